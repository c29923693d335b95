package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/obstest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/internal/testkit/testtable"
	"github.com/claimlock/claimlock/tasklock"
)

// serveFixture is a claim table with rows in every state, a held lease,
// and claimctl's description of both.
type serveFixture struct {
	*obstest.Fixture
	conf string
	// ids are the claimed rows of task 42: ids[0] done, ids[1] parked,
	// ids[2] scheduled an hour ahead, ids[3] and ids[4] processing.
	ids   []any
	k     *tasklock.Locker
	lease *tasklock.Lease
}

const parkedError = "smtp 550: mailbox unavailable"

func newServeFixture(t *testing.T, e testengine.Engine) *serveFixture {
	t.Helper()
	ctx := context.Background()
	f := obstest.New(t, e, 5, 2)
	cc := f.Config
	c, err := claim.New(f.Dialect, cc, func(r *struct{ P string }) []any { return []any{&r.P} })
	require.NoError(t, err)
	b, err := c.Claim(ctx)
	require.NoError(t, err)
	ids := b.IDs()
	require.Len(t, ids, 5)
	require.NoError(t, b.Ack(ctx, ids[0]))
	require.NoError(t, b.Fail(ctx, ids[1], claim.Park(errors.New(parkedError))))
	require.NoError(t, b.Fail(ctx, ids[2], claim.RetryAfter(time.Hour, errors.New("429 too many requests"))))
	require.NoError(t, tasklock.CreateTable(ctx, f.Dialect, "leases"))
	k, err := tasklock.New(f.Dialect, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: time.Hour})
	require.NoError(t, err)
	l, err := k.Acquire(ctx, "nightly")
	require.NoError(t, err)
	return &serveFixture{Fixture: f, conf: writeConfig(t, f), ids: ids, k: k, lease: l}
}

// syncBuffer is a log destination tests read while servers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const testToken = "s3cret-action-token-0123456789"

// newTestServer builds the server of fx's tables with pages for task 42
// and task 7, stuck after 1ms, and samples once; token "" is read-only.
// extra are more flags.
func newTestServer(t *testing.T, fx *serveFixture, token string, extra ...string) (*server, *syncBuffer) {
	t.Helper()
	o, err := parseOptions("serve", append([]string{"-config", fx.conf, "-scope", "42", "-scope", "7", "-older", "1ms", "-action-token", token}, extra...))
	require.NoError(t, err)
	require.NoError(t, o.Serve.check())
	src, err := openSource(context.Background(), &env{o: o, d: fx.Dialect})
	require.NoError(t, err)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	m := newMonitor(src, time.Second, log)
	s, err := newServer(m, token, true, log)
	require.NoError(t, err)
	m.sampleAll(context.Background())
	return s, logs
}

// client is a browser's state against a server: its cookie and the CSRF
// token of the last page.
type client struct {
	t      *testing.T
	s      *server
	cookie *http.Cookie
	csrf   string
}

type req struct {
	method, path string
	body         string
	header       map[string]string
	noCookie     bool
}

func (c *client) do(r req) *httptest.ResponseRecorder {
	c.t.Helper()
	hr := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
	hr.Host = "127.0.0.1:8080"
	hr.RemoteAddr = "127.0.0.1:50000"
	for k, v := range r.header {
		if k == "Host" {
			hr.Host = v
			continue
		}
		hr.Header.Set(k, v)
	}
	if c.cookie != nil && !r.noCookie {
		hr.AddCookie(c.cookie)
	}
	w := httptest.NewRecorder()
	c.s.ServeHTTP(w, hr)
	for _, ck := range w.Result().Cookies() {
		if ck.Name == sessionCookie {
			c.cookie = ck
		}
	}
	return w
}

var csrfRE = regexp.MustCompile(`id="csrf" value="([^"]+)"`)

// visit loads page i and keeps its CSRF token.
func (c *client) visit(i int) string {
	c.t.Helper()
	w := c.do(req{method: "GET", path: fmt.Sprintf("/page/%d", i)})
	require.Equal(c.t, http.StatusOK, w.Code)
	m := csrfRE.FindStringSubmatch(w.Body.String())
	require.NotNil(c.t, m, "the page carries its CSRF token")
	c.csrf = m[1]
	return w.Body.String()
}

// login posts the login form with token.
func (c *client) login(token string) *httptest.ResponseRecorder {
	c.t.Helper()
	form := url.Values{"csrf": {c.csrf}, "token": {token}, "next": {"/page/0"}}
	return c.do(req{method: "POST", path: "/login", body: form.Encode(), header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
}

// post sends an action with the client's CSRF token.
func (c *client) post(path, body string, header map[string]string) *httptest.ResponseRecorder {
	c.t.Helper()
	h := map[string]string{"Content-Type": "application/json", csrfHeader: c.csrf}
	for k, v := range header {
		h[k] = v
	}
	return c.do(req{method: "POST", path: path, body: body, header: h})
}

func requireSecurityHeaders(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	h := w.Header()
	require.Equal(t, "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
		h.Get("Content-Security-Policy"))
	require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
	require.Equal(t, "no-referrer", h.Get("Referrer-Policy"))
	require.Equal(t, "DENY", h.Get("X-Frame-Options"))
}

// apiErr decodes the error of a refused request.
func apiErr(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	require.Equal(t, "application/json; charset=utf-8", w.Header().Get("Content-Type"))
	var e apiError
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e), w.Body.String())
	return e.Error
}

// Every read route: what it serves, with which headers; the page and its
// JSON show what the database holds.
func TestServeRead(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, testengine.All[0])
	s, _ := newTestServer(t, fx, "")
	c := &client{t: t, s: s}

	w := c.do(req{method: "GET", path: "/"})
	require.Equal(t, http.StatusOK, w.Code)
	requireSecurityHeaders(t, w)
	require.Contains(t, w.Body.String(), `<tr><td><a href="/page/0">task_id=42</a></td><td>1</td><td>2</td><td>1</td>`)
	require.Contains(t, w.Body.String(), `<tr><td><a href="/page/1">task_id=7</a></td><td>2</td><td>0</td><td>0</td>`)

	c.cookie = nil
	page := c.visit(0)
	require.NotNil(t, c.cookie, "a session cookie")
	require.True(t, c.cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.cookie.SameSite)
	require.Equal(t, "/", c.cookie.Path)
	w = c.do(req{method: "GET", path: "/page/0"})
	requireSecurityHeaders(t, w)
	require.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	require.Empty(t, w.Result().Cookies(), "the session is kept")
	for _, want := range []string{
		`<span class="n" id="c-pending">1</span>`, `<span class="n" id="c-processing">2</span>`,
		`<span class="n" id="c-done">1</span>`, `<span class="n" id="c-failed">1</span>`,
		`<td class="err">` + parkedError + `</td>`, `<span class="badge">read-only</span>`,
		`<script src="/static/app.js"></script>`, "one count of rows by status in that scope",
	} {
		require.Contains(t, page, want)
	}
	require.NotContains(t, page, "Log in")
	require.Contains(t, page, `<p class="note" id="more-parked" hidden>The first 50 only: raise -limit to list more.</p>`)
	require.NotContains(t, page, "<script>", "no inline script")
	require.NotContains(t, page, "style=", "no inline style")

	w = c.do(req{method: "GET", path: "/api/page/0"})
	require.Equal(t, http.StatusOK, w.Code)
	requireSecurityHeaders(t, w)
	var v pageView
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
	require.Equal(t, "task_id=42", v.Scope)
	require.Equal(t, countsView{Pending: 1, Processing: 2, Done: 1, Failed: 1, OldestPending: v.Counts.OldestPending, OldestProcessing: v.Counts.OldestProcessing}, *v.Counts)
	require.Len(t, v.Stuck, 2)
	require.Equal(t, []string{fmt.Sprint(fx.ids[3]), fmt.Sprint(fx.ids[4])}, []string{v.Stuck[0].ID, v.Stuck[1].ID})
	require.Equal(t, noWorkerColumn, v.Stuck[0].Worker, "a table without a worker column says so")
	require.Len(t, v.Parked, 1)
	require.Equal(t, rowOutView{ID: fmt.Sprint(fx.ids[1]), Attempts: 1, Age: v.Parked[0].Age, RunIn: "0s", Error: parkedError}, v.Parked[0])
	require.Len(t, v.Scheduled, 1)
	require.Equal(t, fmt.Sprint(fx.ids[2]), v.Scheduled[0].ID)
	require.Regexp(t, `^(5[0-9]m[0-9]+s|1h0m0s)$`, v.Scheduled[0].RunIn)
	require.Len(t, v.Leases, 1)
	require.Equal(t, "nightly", v.Leases[0].Key)
	require.Equal(t, "held", v.Leases[0].State)
	require.Equal(t, fx.lease.Owner(), v.Leases[0].Owner)
	require.Regexp(t, `^(5[0-9]m[0-9]+s|1h0m0s)$`, v.Leases[0].Remaining, "time left on the database clock")
	require.Len(t, v.History, 1)
	require.EqualValues(t, 1, v.History[0].Pending)

	// A list cut at -limit says so.
	sl, _ := newTestServer(t, fx, "", "-limit", "2")
	limited := (&client{t: t, s: sl}).visit(0)
	require.Contains(t, limited, `<p class="note" id="more-stuck">The first 2 only: raise -limit to list more.</p>`)
	require.Contains(t, limited, `<p class="note" id="more-parked" hidden>`)

	w = c.do(req{method: "GET", path: "/api/page/1"})
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
	require.Equal(t, "task_id=7", v.Scope)
	require.EqualValues(t, 2, v.Counts.Pending)
	require.Empty(t, v.Parked)

	for path, ctype := range map[string]string{"/static/app.js": "text/javascript; charset=utf-8", "/static/app.css": "text/css; charset=utf-8"} {
		w = c.do(req{method: "GET", path: path})
		require.Equal(t, http.StatusOK, w.Code, path)
		require.Equal(t, ctype, w.Header().Get("Content-Type"))
		requireSecurityHeaders(t, w)
	}
	js := c.do(req{method: "GET", path: "/static/app.js"}).Body.String()
	require.NotContains(t, js, "innerHTML")
	require.NotContains(t, js, "outerHTML")
	require.NotContains(t, js, "insertAdjacentHTML")
	for _, path := range []string{"/static/", "/static/nope.js", "/page/2", "/page/01", "/page/-1", "/page/x", "/api/page/2", "/nope", "/login"} {
		w = c.do(req{method: "GET", path: path})
		require.Equal(t, http.StatusNotFound, w.Code, path)
		requireSecurityHeaders(t, w)
	}
	// Another site's name for this address (DNS rebinding) reads nothing.
	for _, host := range []string{"evil.example:8080", "127.0.0.1.nip.io", "10.0.0.1:8080"} {
		w = c.do(req{method: "GET", path: "/api/page/0", header: map[string]string{"Host": host}})
		require.Equal(t, http.StatusMisdirectedRequest, w.Code, host)
		require.NotContains(t, w.Body.String(), parkedError)
	}
	for _, host := range []string{"localhost:8080", "[::1]:8080", "127.0.0.2"} {
		w = c.do(req{method: "GET", path: "/api/page/0", header: map[string]string{"Host": host}})
		require.Equal(t, http.StatusOK, w.Code, host)
	}
}

// Values from the database are untrusted: hostile error texts, lease keys
// and owners reach the page and its JSON as text, escaped, valid UTF-8 and
// bounded in size.
func TestServeHostileText(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, testengine.All[0])
	ctx := context.Background()
	hostileKey := `"><img src=x onerror=alert(2)>`
	_, err := fx.k.Acquire(ctx, hostileKey)
	require.NoError(t, err)
	big := strings.Repeat("<b>A</b>", 1<<20/8)
	for _, tc := range []struct {
		name, text string
		// html must appear in the page, raw must not.
		html, raw string
	}{
		{"script", `<script>alert(1)</script>`, `&lt;script&gt;alert(1)&lt;/script&gt;`, `<script>alert(1)`},
		{"attribute", `"><img src=x onerror=alert(1)>`, `&#34;&gt;&lt;img src=x onerror=alert(1)&gt;`, `<img src=x`},
		{"invalid UTF-8", "bad \xff\xfe bytes \x00 end", "bad \uFFFD bytes \uFFFD end", "\xff"},
		{"1 MB", big, `&lt;b&gt;A&lt;/b&gt;`, `<b>A</b>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx.Exec(t, "UPDATE jobs SET last_error = ? WHERE id = ?", tc.text, fx.ids[1])
			s, _ := newTestServer(t, fx, testToken)
			c := &client{t: t, s: s}
			c.visit(0)
			require.Equal(t, http.StatusSeeOther, c.login(testToken).Code)
			page := c.visit(0)
			require.True(t, utf8.ValidString(page))
			require.Contains(t, page, tc.html)
			require.NotContains(t, page, tc.raw)
			require.NotContains(t, page, "<img")
			require.Contains(t, page, `<td>&#34;&gt;&lt;img src=x onerror=alert(2)&gt;</td>`, "the lease key")
			require.Less(t, len(page), 64<<10, "a value is cut for the page")

			w := c.do(req{method: "GET", path: "/api/page/0"})
			body := w.Body.Bytes()
			require.True(t, utf8.Valid(body))
			require.NotContains(t, string(body), "<", "JSON escapes < and >")
			require.Less(t, len(body), 64<<10)
			var v pageView
			require.NoError(t, json.Unmarshal(body, &v))
			require.Len(t, v.Parked, 1)
			want := clean(tc.text)
			require.Equal(t, want, v.Parked[0].Error)
			require.LessOrEqual(t, utf8.RuneCountInString(v.Parked[0].Error), maxShownText)
			if len(tc.text) > maxShownText {
				require.True(t, strings.HasSuffix(v.Parked[0].Error, "…"))
			}
			keys := []string{v.Leases[0].Key, v.Leases[1].Key}
			require.Contains(t, keys, hostileKey)
		})
	}
}

// otherFirst returns s with its first byte changed: a wrong token that
// differs from s whatever s starts with ("x" + s[1:] was s itself for a
// token that started with x, one run in 64).
func otherFirst(s string) string {
	if s[0] == 'x' {
		return "y" + s[1:]
	}
	return "x" + s[1:]
}

// Every refusal answers its status, says why, and changes nothing; then
// a logged-in operator's actions do what they say and are logged with who
// asked, never with the token.
func TestServeActions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newServeFixture(t, testengine.All[0])
	s, logs := newTestServer(t, fx, testToken)
	parked, sched := fmt.Sprint(fx.ids[1]), fmt.Sprint(fx.ids[2])
	unchanged := func(t *testing.T) {
		t.Helper()
		require.Equal(t, 1, fx.Count(t, "status = 'FAILED' AND id = ?", fx.ids[1]), "still parked")
		require.Equal(t, 1, fx.Count(t, "run_at IS NOT NULL AND id = ?", fx.ids[2]), "still scheduled")
		require.NoError(t, fx.lease.Renew(ctx), "the lease is still held")
	}
	unpark := "/api/page/0/unpark"
	unparkBody := `{"ids":["` + parked + `"],"reset_attempts":true}`

	c := &client{t: t, s: s}
	page := c.visit(0)
	require.Contains(t, page, `<a id="login-link" class="button" href="/login?next=/page/0">Log in to act</a>`)
	other := &client{t: t, s: s}
	other.visit(0)

	for _, tc := range []struct {
		name   string
		r      req
		code   int
		reason string
	}{
		{"GET on an action", req{method: "GET", path: unpark}, http.StatusMethodNotAllowed, ""},
		{"no session, no CSRF", req{method: "POST", path: unpark, body: unparkBody, noCookie: true, header: map[string]string{"Content-Type": "application/json"}}, http.StatusForbidden, "CSRF"},
		{"no CSRF token", req{method: "POST", path: unpark, body: unparkBody, header: map[string]string{"Content-Type": "application/json"}}, http.StatusForbidden, "CSRF"},
		{"wrong CSRF token", req{method: "POST", path: unpark, body: unparkBody, header: map[string]string{"Content-Type": "application/json", csrfHeader: otherFirst(c.csrf)}}, http.StatusForbidden, "CSRF"},
		{"another session's CSRF token", req{method: "POST", path: unpark, body: unparkBody, header: map[string]string{"Content-Type": "application/json", csrfHeader: other.csrf}}, http.StatusForbidden, "CSRF"},
		{"CSRF token without its cookie", req{method: "POST", path: unpark, body: unparkBody, noCookie: true, header: map[string]string{"Content-Type": "application/json", csrfHeader: c.csrf}}, http.StatusForbidden, "CSRF"},
		{"not logged in", req{method: "POST", path: unpark, body: unparkBody, header: map[string]string{"Content-Type": "application/json", csrfHeader: c.csrf}}, http.StatusUnauthorized, "log in"},
		{"wrong bearer token", req{method: "POST", path: unpark, body: unparkBody, header: map[string]string{"Content-Type": "application/json", csrfHeader: c.csrf, "Authorization": "Bearer wrong-token-0123456789"}}, http.StatusUnauthorized, "wrong action token"},
		{"right bearer token, no CSRF", req{method: "POST", path: unpark, body: unparkBody, header: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + testToken}}, http.StatusForbidden, "CSRF"},
		{"GET on force-release", req{method: "GET", path: "/api/force-release"}, http.StatusMethodNotAllowed, ""},
		{"GET on retry-now", req{method: "GET", path: "/api/page/0/retry-now"}, http.StatusMethodNotAllowed, ""},
		{"GET on logout", req{method: "GET", path: "/logout"}, http.StatusMethodNotAllowed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := c.do(tc.r)
			require.Equal(t, tc.code, w.Code, w.Body.String())
			requireSecurityHeaders(t, w)
			if tc.code == http.StatusMethodNotAllowed {
				require.Equal(t, "POST", w.Header().Get("Allow"))
			} else {
				require.Contains(t, apiErr(t, w), tc.reason)
			}
			if tc.code == http.StatusUnauthorized {
				require.Equal(t, `Bearer realm="claimctl"`, w.Header().Get("WWW-Authenticate"))
			}
			unchanged(t)
		})
	}

	// Logging in: the form needs its CSRF token and the right token.
	form := func(csrf, token string) req {
		return req{method: "POST", path: "/login", body: url.Values{"csrf": {csrf}, "token": {token}, "next": {"/page/0"}}.Encode(),
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}
	}
	w := c.do(form("", testToken))
	require.Equal(t, http.StatusForbidden, w.Code)
	w = c.do(form(other.csrf, testToken))
	require.Equal(t, http.StatusForbidden, w.Code, "another session's CSRF token")
	before := c.cookie.Value
	w = c.do(form(c.csrf, "wrong-token-0123456789"))
	require.Equal(t, http.StatusUnauthorized, w.Code)
	require.Contains(t, w.Body.String(), "Wrong token.")
	require.Equal(t, before, c.cookie.Value, "no new session")
	require.Equal(t, http.StatusUnauthorized, c.post(unpark, unparkBody, nil).Code, "still not logged in")
	unchanged(t)

	w = c.login(testToken)
	require.Equal(t, http.StatusSeeOther, w.Code)
	require.Equal(t, "/page/0", w.Header().Get("Location"))
	require.NotEqual(t, before, c.cookie.Value, "a logged-in session gets a new identifier")
	require.True(t, c.cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.cookie.SameSite)
	w = c.post(unpark, unparkBody, nil)
	require.Equal(t, http.StatusForbidden, w.Code, "the CSRF token of the session before the login")
	page = c.visit(0)
	require.Contains(t, page, `id="logout"`)

	// Logged in, still refused: bad bodies, and an action on rows the page
	// does not show changes nothing.
	for _, tc := range []struct {
		name, path, body, ctype string
		code                    int
		reason                  string
	}{
		{"form body", unpark, "ids=" + parked, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType, "application/json"},
		{"body too large", unpark, `{"ids":["` + strings.Repeat("1", maxActionBody) + `"]}`, "application/json", http.StatusRequestEntityTooLarge, "exceeds"},
		{"unknown field", unpark, `{"ids":["` + parked + `"],"every":true}`, "application/json", http.StatusBadRequest, "unknown field"},
		{"two values", unpark, unparkBody + unparkBody, "application/json", http.StatusBadRequest, "more than one"},
		{"no ids", unpark, `{"ids":[]}`, "application/json", http.StatusBadRequest, "no row keys"},
		{"bad id", unpark, `{"ids":["1 OR 1=1"]}`, "application/json", http.StatusBadRequest, "not an integer"},
		{"comma in id", unpark, `{"ids":["1,2"]}`, "application/json", http.StatusBadRequest, "comma"},
		{"no such page", "/api/page/5/unpark", unparkBody, "application/json", http.StatusNotFound, ""},
		{"retry now with reset", "/api/page/0/retry-now", `{"ids":["` + sched + `"],"reset_attempts":true}`, "application/json", http.StatusBadRequest, "row ids only"},
		{"retry now all", "/api/page/0/retry-now", `{"all":true}`, "application/json", http.StatusBadRequest, "row ids only"},
		{"ids and all", unpark, `{"ids":["` + parked + `"],"all":true}`, "application/json", http.StatusBadRequest, "not both"},
		{"neither ids nor all", unpark, `{"reset_attempts":true}`, "application/json", http.StatusBadRequest, "no row keys"},
		{"release without owner", "/api/force-release", `{"key":"nightly"}`, "application/json", http.StatusBadRequest, "no owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := c.post(tc.path, tc.body, map[string]string{"Content-Type": tc.ctype})
			require.Equal(t, tc.code, w.Code, w.Body.String())
			if tc.reason != "" {
				require.Contains(t, apiErr(t, w), tc.reason)
			}
			unchanged(t)
		})
	}
	// Task 7's page cannot act on task 42's rows.
	w = c.post("/api/page/1/unpark", unparkBody, nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var reply actionReply
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reply))
	require.Zero(t, reply.Rows)
	unchanged(t)
	// A release names the owner the operator saw: another owner's lease
	// stays held.
	w = c.post("/api/force-release", `{"key":"nightly","owner":"someone-else"}`, nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reply))
	require.Zero(t, reply.Rows)
	require.Contains(t, reply.Message, "nothing changed")
	unchanged(t)

	// The actions.
	w = c.post(unpark, unparkBody, nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reply))
	require.Equal(t, actionReply{Action: "unpark", Rows: 1, Message: "unparked 1 row(s) with fresh attempts"}, reply)
	require.Equal(t, 1, fx.Count(t, "id = ? AND status = 'PENDING' AND attempts = 0 AND last_error IS NULL", fx.ids[1]))
	var v pageView
	require.NoError(t, json.Unmarshal(c.do(req{method: "GET", path: "/api/page/0"}).Body.Bytes(), &v))
	require.Empty(t, v.Parked, "the server sampled again after the action")
	require.EqualValues(t, 2, v.Counts.Pending)

	w = c.post("/api/page/0/retry-now", `{"ids":["`+sched+`"]}`, nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reply))
	require.EqualValues(t, 1, reply.Rows)
	require.Equal(t, 0, fx.Count(t, "run_at IS NOT NULL"))

	w = c.post("/api/force-release", fmt.Sprintf(`{"key":"nightly","owner":%q}`, fx.lease.Owner()), nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reply))
	require.EqualValues(t, 1, reply.Rows)
	require.ErrorIs(t, fx.lease.Renew(ctx), dialect.ErrLeaseLost)

	// A script: the bearer header and a session's CSRF token.
	fx.Exec(t, "UPDATE jobs SET status = 'FAILED' WHERE id = ?", fx.ids[1])
	w = other.post(unpark, `{"ids":["`+parked+`"]}`, map[string]string{"Authorization": "Bearer " + testToken})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, 1, fx.Count(t, "id = ? AND status = 'PENDING'", fx.ids[1]))

	// Unpark every parked row of the page's scope, and only of it.
	fx.Exec(t, "UPDATE jobs SET status = 'FAILED' WHERE id IN (?, ?)", fx.ids[1], fx.ids[3])
	fx.Exec(t, "UPDATE jobs SET status = 'FAILED' WHERE task_id = 7")
	w = c.post(unpark, `{"all":true}`, nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reply))
	require.EqualValues(t, 2, reply.Rows)
	require.Equal(t, 0, fx.Count(t, "task_id = 42 AND status = 'FAILED'"))
	require.Equal(t, 2, fx.Count(t, "task_id = 7 AND status = 'FAILED'"), "task 7's page's rows")

	// Logged out, the session acts no more.
	w = c.do(req{method: "POST", path: "/logout", body: url.Values{"csrf": {c.csrf}}.Encode(), header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	require.Equal(t, http.StatusSeeOther, w.Code)
	fx.Exec(t, "UPDATE jobs SET status = 'FAILED' WHERE id = ?", fx.ids[1])
	c.visit(0)
	require.Equal(t, http.StatusUnauthorized, c.post(unpark, unparkBody, nil).Code)
	require.Equal(t, 1, fx.Count(t, "id = ? AND status = 'FAILED'", fx.ids[1]))

	log := logs.String()
	require.NotContains(t, log, testToken, "the token is never logged")
	require.NotContains(t, log, c.cookie.Value, "nor a session identifier")
	require.Regexp(t, `level=INFO msg="serve: login" remote=127.0.0.1:50000 who="session [0-9a-f]{8}"`, log)
	require.Regexp(t, `level=INFO msg="serve: action" action=unpark remote=127.0.0.1:50000 who="session [0-9a-f]{8}" table=jobs scope="task_id=42" ids=\[`+parked+`\] all=false reset_attempts=true rows=1`, log)
	require.Regexp(t, `msg="serve: action" action=force-release remote=127.0.0.1:50000 who="session [0-9a-f]{8}" lease_table=leases key=nightly owner=`+fx.lease.Owner()+` rows=1`, log)
	require.Contains(t, log, `msg="serve: action" action=unpark remote=127.0.0.1:50000 who=bearer`)
	require.Contains(t, log, `msg="serve: refused" method=POST path=/api/page/0/unpark status=403 reason="missing or wrong CSRF token (reload the page)" remote=127.0.0.1:50000`)
	require.Contains(t, log, `reason="wrong action token" remote=127.0.0.1:50000`)
}

// Wrong tokens are limited: past maxAuthFailures a minute, even the right
// one is refused unchecked.
func TestServeLoginLimit(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, testengine.All[0])
	s, _ := newTestServer(t, fx, testToken)
	c := &client{t: t, s: s}
	c.visit(0)
	for range maxAuthFailures {
		require.Equal(t, http.StatusUnauthorized, c.login("wrong-token-0123456789").Code)
	}
	w := c.login(testToken)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	w = c.post("/api/page/0/unpark", `{"ids":["1"]}`, map[string]string{"Authorization": "Bearer " + testToken})
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, 1, fx.Count(t, "status = 'FAILED'"))
}

// Without an action token the server is read-only: no login, and every
// action is refused, whatever it carries.
func TestServeReadOnly(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, testengine.All[0])
	s, _ := newTestServer(t, fx, "")
	c := &client{t: t, s: s}
	c.visit(0)
	require.Equal(t, http.StatusNotFound, c.do(req{method: "GET", path: "/login"}).Code)
	require.Equal(t, http.StatusForbidden, c.login(testToken).Code)
	for _, path := range []string{"/api/page/0/unpark", "/api/page/0/retry-now", "/api/force-release"} {
		w := c.post(path, `{"ids":["1"]}`, map[string]string{"Authorization": "Bearer " + testToken})
		require.Equal(t, http.StatusForbidden, w.Code)
		require.Contains(t, apiErr(t, w), "read-only")
	}
	require.Equal(t, 1, fx.Count(t, "status = 'FAILED'"))
	require.Equal(t, 1, fx.Count(t, "run_at IS NOT NULL"))
}

// serve's configuration errors are usage errors, before anything listens.
// (Not parallel: it sets the environment.)
func TestServeConfig(t *testing.T) {
	fx := newServeFixture(t, testengine.All[0])
	t.Setenv("CLAIMCTL_ACTION_TOKEN", "")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-config", fx.conf}, "-scope is required"},
		{[]string{"-config", fx.conf, "-scope", "42", "-action-token", "short"}, "at least 16 characters"},
		{[]string{"-config", fx.conf, "-scope", "42", "-action-token", "has white space in it"}, "white space"},
		{[]string{"-config", fx.conf, "-scope", "42", "-interval", "10ms"}, "-interval 10ms is outside 1s..1h"},
		{[]string{"-config", fx.conf, "-scope", "42", "-listen", "8080"}, "-listen"},
		{[]string{"-config", fx.conf, "-scope", "42", "-older", "0s"}, "-older must be positive"},
		{[]string{"-driver", "sqlite", "-dsn", fx.DSN}, "give a claim table"},
	} {
		t.Run(strings.Join(tc.args[2:], " "), func(t *testing.T) {
			code, _, stderr := ctl(t, "", append([]string{"serve"}, tc.args...)...)
			require.Equal(t, exitUsage, code, stderr)
			require.Contains(t, stderr, tc.msg)
		})
	}
	// The token from the environment counts as the flag's.
	t.Setenv("CLAIMCTL_ACTION_TOKEN", "short")
	code, _, stderr := ctl(t, "", "serve", "-config", fx.conf, "-scope", "42")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "at least 16 characters")
}

// The serve command listens where -listen says, logs its address, closes
// a connection that sends its header too slowly, outlives its -timeout,
// and stops cleanly when its context ends.
func TestServeCommand(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, testengine.All[0])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// -timeout bounds each database call, not the server's life.
	base := startServe(t, ctx, "-config", fx.conf, "-scope", "42", "-listen", "127.0.0.1:0", "-timeout", "2s", "-interval", "1s")
	require.True(t, strings.HasPrefix(base.url, "http://127.0.0.1:"), base.url)
	res, err := http.Get(base.url + "api/page/0")
	require.NoError(t, err)
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(b), parkedError)

	// A client that never finishes its header is cut off after
	// readHeaderTimeout, not held forever nor until readTimeout: the
	// deadline leaves 7s of slack for a loaded machine.
	require.GreaterOrEqual(t, readTimeout-readHeaderTimeout, 10*time.Second)
	start := time.Now()
	conn, err := (&netDialer).DialContext(ctx, "tcp", strings.TrimSuffix(strings.TrimPrefix(base.url, "http://"), "/"))
	require.NoError(t, err)
	_, err = conn.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(readHeaderTimeout+7*time.Second)))
	_, err = io.ReadAll(conn)
	conn.Close()
	require.NoError(t, err, "the server closed the connection before the read deadline")
	require.GreaterOrEqual(t, time.Since(start), readHeaderTimeout-time.Second)

	// Past -timeout, the server still serves and samples.
	res, err = http.Get(base.url + "api/page/0")
	require.NoError(t, err)
	var v pageView
	require.NoError(t, json.NewDecoder(res.Body).Decode(&v))
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Empty(t, v.Error)
	require.GreaterOrEqual(t, len(v.History), 2, "the timer sampled again")

	cancel()
	require.Equal(t, exitOK, base.wait(t))
	require.Contains(t, base.logs.String(), `msg="serve: stopped"`)
}

var netDialer net.Dialer

// running is a serve command running in-process.
type running struct {
	url  string
	logs *syncBuffer
	done chan int
}

var listenRE = regexp.MustCompile(`msg="serve: listening" url=(http://\S+/)`)

// startServe runs claimctl serve with args until ctx ends, and returns once
// it listens.
func startServe(t *testing.T, ctx context.Context, args ...string) *running {
	t.Helper()
	r := &running{logs: &syncBuffer{}, done: make(chan int, 1)}
	var stderr syncBuffer
	go func() { r.done <- run(ctx, append([]string{"serve"}, args...), strings.NewReader(""), r.logs, &stderr) }()
	deadline := time.Now().Add(time.Minute)
	for {
		if m := listenRE.FindStringSubmatch(r.logs.String()); m != nil {
			r.url = m[1]
			return r
		}
		select {
		case code := <-r.done:
			t.Fatalf("serve exited with %d: %s%s", code, r.logs.String(), stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "serve did not listen within a minute: %s", r.logs.String())
	}
}

// wait returns the command's exit code once it ends.
func (r *running) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.done:
		return code
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop within a minute")
	}
	return -1
}

// A server of a lease table alone, for every lease table shape: one page
// of leases (listed by expiry, or the -key ones where the table has no
// expiry column), no row actions, and a force-release of the owner shown
// (an owner token, or the stamp of a table without an owner column) frees
// the lease.
func TestServeLeaseShapes(t *testing.T) {
	t.Parallel()
	e := testengine.All[0]
	for _, sh := range leaseShapes() {
		t.Run(sh.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := testengine.Open(t, e, 4)
			if sh.def == nil {
				require.NoError(t, tasklock.CreateTable(ctx, c.Dialect, sh.spec.Table))
			} else {
				require.NoError(t, testtable.Create(ctx, c.Dialect, *sh.def))
				_, err := c.DB.ExecContext(ctx, sh.insert)
				require.NoError(t, err)
			}
			cfg := map[string]any{"driver": e.Name, "dsn": c.DSN}
			for k, v := range sh.conf {
				cfg[k] = v
			}
			data, err := json.Marshal(cfg)
			require.NoError(t, err)
			conf := filepath.Join(t.TempDir(), "claimctl.json")
			require.NoError(t, os.WriteFile(conf, data, 0o600))
			k, err := tasklock.New(c.Dialect, tasklock.Config{Table: sh.spec, TTL: time.Minute})
			require.NoError(t, err)
			l, err := k.Acquire(ctx, sh.key)
			require.NoError(t, err)

			args := []string{"-config", conf, "-action-token", testToken}
			if sh.spec.ExpiresAt == "" {
				args = append(args, "-lease-ttl", "60") // the holders' TTL, in seconds
			}
			o, err := parseOptions("serve", args)
			require.NoError(t, err)
			require.NoError(t, o.Serve.check())
			src, err := openSource(ctx, &env{o: o, d: c.Dialect})
			require.NoError(t, err)
			m := newMonitor(src, time.Second, slog.New(slog.DiscardHandler))
			s, err := newServer(m, testToken, true, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			m.sampleAll(ctx)

			cl := &client{t: t, s: s}
			w := cl.do(req{method: "GET", path: "/"})
			require.Equal(t, http.StatusSeeOther, w.Code)
			require.Equal(t, "/page/0", w.Header().Get("Location"))
			page := cl.visit(0)
			require.Contains(t, page, "<h1>Leases</h1>")
			require.NotContains(t, page, `id="parked"`)
			var v pageView
			require.NoError(t, json.Unmarshal(cl.do(req{method: "GET", path: "/api/page/0"}).Body.Bytes(), &v))
			require.Len(t, v.Leases, 1, "every holder is listed, with or without an expiry column")
			want := leaseOutView{Key: fmt.Sprint(sh.key), State: "held", Owner: l.Owner(), Holder: l.Owner(), Fence: v.Leases[0].Fence,
				LockedAt: "-", ExpiresAt: v.Leases[0].ExpiresAt, Remaining: v.Leases[0].Remaining}
			if sh.spec.ExpiresAt == "" {
				want.LockedAt = v.Leases[0].LockedAt
				require.Regexp(t, `^[0-9-]+T[0-9:.]+Z$`, v.Leases[0].LockedAt, "the lock time, as a time")
				require.Contains(t, page, "a lease expires at its lock time plus 1m0s")
			}
			if sh.spec.Owner == "" {
				want.Holder = unknownHold
				require.Contains(t, page, "a holder is known by its lock time only")
			}
			require.Equal(t, want, v.Leases[0])
			require.Regexp(t, `^[0-9-]+T[0-9:.]+Z$`, v.Leases[0].ExpiresAt)
			require.Regexp(t, `^5[0-9]\.[0-9]s|1m0s$`, v.Leases[0].Remaining, "time left on the database clock")
			require.Nil(t, v.Counts)

			require.Equal(t, http.StatusSeeOther, cl.login(testToken).Code)
			cl.visit(0)
			require.Equal(t, http.StatusNotFound, cl.post("/api/page/0/unpark", `{"ids":["1"]}`, nil).Code)
			w = cl.post("/api/force-release", fmt.Sprintf(`{"key":%q,"owner":%q}`, fmt.Sprint(sh.key), l.Owner()), nil)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			var reply actionReply
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reply))
			require.EqualValues(t, 1, reply.Rows, reply.Message)
			require.ErrorIs(t, l.Renew(ctx), dialect.ErrLeaseLost)
		})
	}
}

// An unscoped description counts the whole table, on one page that says
// so.
func TestServeWholeTable(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, testengine.All[0])
	o, err := parseOptions("serve", []string{"-config", fx.conf, "-scope-cols", "", "-lease-table", ""})
	require.NoError(t, err)
	src, err := openSource(context.Background(), &env{o: o, d: fx.Dialect})
	require.NoError(t, err)
	m := newMonitor(src, time.Second, slog.New(slog.DiscardHandler))
	s, err := newServer(m, "", true, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	m.sampleAll(context.Background())
	c := &client{t: t, s: s}
	page := c.visit(0)
	require.Contains(t, page, `<span class="scope">whole table</span>`)
	require.NotContains(t, page, `id="leases"`)
	var v pageView
	require.NoError(t, json.Unmarshal(c.do(req{method: "GET", path: "/api/page/0"}).Body.Bytes(), &v))
	require.Equal(t, "", v.Scope)
	require.EqualValues(t, 3, v.Counts.Pending, "task 42's and task 7's")
	require.Len(t, v.Parked, 1)
}

// When the database fails, the page keeps its last reading and says why
// the refresh failed, and an action answers 500 with the error, its
// operation named once.
func TestServeDatabaseDown(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, testengine.All[0])
	s, logs := newTestServer(t, fx, testToken)
	c := &client{t: t, s: s}
	c.visit(0)
	require.Equal(t, http.StatusSeeOther, c.login(testToken).Code)
	c.visit(0)
	require.NoError(t, fx.DB.Close())

	s.m.sampleAll(context.Background())
	var v pageView
	require.NoError(t, json.Unmarshal(c.do(req{method: "GET", path: "/api/page/0"}).Body.Bytes(), &v))
	require.Contains(t, v.Error, "database is closed")
	require.NotNil(t, v.Counts, "the last reading stays")
	require.EqualValues(t, 1, v.Counts.Failed)
	require.Contains(t, c.visit(0), `<p id="error" class="msg error" role="alert">Last refresh failed: <span id="error-text">`)

	for path, op := range map[string]string{"/api/page/0/unpark": "claim: unpark: ", "/api/page/0/retry-now": "claim: retry now: "} {
		w := c.post(path, `{"ids":["1"]}`, nil)
		require.Equal(t, http.StatusInternalServerError, w.Code, path)
		msg := apiErr(t, w)
		require.True(t, strings.HasPrefix(msg, op), msg)
		require.Equal(t, 1, strings.Count(msg, op), msg)
		require.Contains(t, msg, "database is closed")
	}
	require.Contains(t, logs.String(), `level=ERROR msg="serve: action failed" action=unpark`)
}

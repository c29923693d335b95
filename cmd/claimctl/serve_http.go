package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

//go:embed web
var webFS embed.FS

// contentSecurityPolicy lets the page load its own script, style and
// images and talk to its own server, and nothing else: no inline script or
// style, no frames, no other origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Request bounds.
const (
	maxActionBody = 64 << 10
	maxLoginBody  = 4 << 10
)

// server is the status page's HTTP handler.
type server struct {
	m        *monitor
	info     sourceInfo
	log      *slog.Logger
	token    actionToken
	sess     *sessions
	tmpl     *template.Template
	static   http.Handler
	interval time.Duration
	// loopback restricts the Host header to loopback names (the server
	// listens on a loopback address): a page of another site whose name
	// resolves to 127.0.0.1 (DNS rebinding) cannot read this one.
	loopback bool
	mux      *http.ServeMux
}

// newServer builds the handler of the pages m samples. token "" makes it
// read-only.
func newServer(m *monitor, token string, loopback bool, log *slog.Logger) (*server, error) {
	tmpl, err := template.New("").ParseFS(webFS, "web/*.html")
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(webFS, "web/static")
	if err != nil {
		return nil, err
	}
	s := &server{
		m: m, info: m.info, log: log, token: newActionToken(token), sess: newSessions(), tmpl: tmpl,
		static: http.StripPrefix("/static/", http.FileServerFS(static)), interval: m.interval, loopback: loopback,
		mux: http.NewServeMux(),
	}
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.HandleFunc("GET /page/{n}", s.page)
	s.mux.HandleFunc("GET /api/page/{n}", s.pageJSON)
	s.mux.HandleFunc("POST /api/page/{n}/unpark", s.unpark)
	s.mux.HandleFunc("POST /api/page/{n}/pause", s.pauseScope)
	s.mux.HandleFunc("POST /api/page/{n}/resume", s.resumeScope)
	s.mux.HandleFunc("POST /api/page/{n}/retry-now", s.retryNow)
	s.mux.HandleFunc("POST /api/force-release", s.forceRelease)
	s.mux.HandleFunc("GET /login", s.loginForm)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.mux.HandleFunc("GET /static/", s.staticFile)
	return s, nil
}

// ServeHTTP sets the security headers of every answer, refuses a Host
// that is not a loopback name when listening on loopback, and routes.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Cache-Control", "no-store")
	}
	if s.loopback && !loopbackHost(r.Host) {
		s.log.Warn("serve: refused", "reason", "host is not a loopback name", "host", r.Host, "remote", r.RemoteAddr)
		http.Error(w, "claimctl serve: this server answers only to a loopback host name (localhost, 127.0.0.1, [::1])", http.StatusMisdirectedRequest)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether host (a Host header, maybe with a port)
// names the loopback interface.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// pageIndex returns the page number of r, or answers 404 and returns -1.
func (s *server) pageIndex(w http.ResponseWriter, r *http.Request) int {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 0 || n >= len(s.m.pages) || strconv.Itoa(n) != r.PathValue("n") {
		http.NotFound(w, r)
		return -1
	}
	return n
}

// nav is one link of the page bar.
type nav struct {
	Index   int
	Label   string
	Current bool
}

// pageData is what the page template gets.
type pageData struct {
	Title      string
	Info       sourceInfo
	View       pageView
	Nav        []nav
	CSRF       string
	Actions    bool // an action token is configured
	LoggedIn   bool
	IntervalMS int64
	Interval   string
	StuckAfter string
}

func (s *server) navs(current int) []nav {
	out := make([]nav, len(s.m.pages))
	for i := range out {
		label := "leases"
		if s.info.Table != "" {
			label = s.info.Scopes[i]
			if label == "" {
				label = "whole table"
			}
		}
		out[i] = nav{Index: i, Label: label, Current: i == current}
	}
	return out
}

func (s *server) index(w http.ResponseWriter, r *http.Request) {
	if len(s.m.pages) == 1 {
		http.Redirect(w, r, "/page/0", http.StatusSeeOther)
		return
	}
	ensureSession(w, r)
	type entry struct {
		nav
		Counts *countsView
		Error  string
	}
	var pages []entry
	for _, n := range s.navs(-1) {
		v := s.m.view(n.Index)
		pages = append(pages, entry{n, v.Counts, v.Error})
	}
	s.render(w, "index.html", http.StatusOK, struct {
		Info  sourceInfo
		Nav   []nav
		Pages []entry
	}{s.info, s.navs(-1), pages})
}

func (s *server) page(w http.ResponseWriter, r *http.Request) {
	i := s.pageIndex(w, r)
	if i < 0 {
		return
	}
	id := ensureSession(w, r)
	_, in := s.sess.loggedIn(id, time.Now())
	title := "leases"
	if s.info.Table != "" {
		title = s.info.Table + " " + s.navs(i)[i].Label
	}
	s.render(w, "page.html", http.StatusOK, pageData{
		Title: title, Info: s.info, View: s.m.view(i), Nav: s.navs(i), CSRF: s.sess.csrf(id), Actions: s.token.set, LoggedIn: in,
		IntervalMS: s.interval.Milliseconds(), Interval: s.interval.String(), StuckAfter: s.info.StuckAfter.String(),
	})
}

// render executes template name into a buffer first, so that a failure
// answers 500 rather than half a page.
func (s *server) render(w http.ResponseWriter, name string, code int, data any) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("serve: template", "name", name, "err", err)
		http.Error(w, "claimctl serve: cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

func (s *server) pageJSON(w http.ResponseWriter, r *http.Request) {
	i := s.pageIndex(w, r)
	if i < 0 {
		return
	}
	writeJSON(w, http.StatusOK, s.m.view(i))
}

func (s *server) staticFile(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/") {
		http.NotFound(w, r) // no directory listings
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	s.static.ServeHTTP(w, r)
}

// writeJSON answers v as JSON with code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "claimctl serve: cannot encode the answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// apiError is the JSON of a refused or failed request.
type apiError struct {
	Error string `json:"error"`
}

// refuse answers a refused request with code and why, and logs it with
// the caller's address (never a token).
func (s *server) refuse(w http.ResponseWriter, r *http.Request, code int, why string) {
	s.log.Warn("serve: refused", "method", r.Method, "path", r.URL.Path, "status", code, "reason", why, "remote", r.RemoteAddr)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="claimctl"`)
	}
	writeJSON(w, code, apiError{Error: why})
}

// gate admits an action: the server must have an action token, the
// request a session cookie and its CSRF token (every POST), then the
// action token (a logged-in session, or an Authorization: Bearer header),
// then a JSON body of at most maxActionBody bytes, decoded into v. It
// returns who asked, as the log names them, or answers the refusal and
// returns "".
func (s *server) gate(w http.ResponseWriter, r *http.Request, v any) string {
	if !s.token.set {
		s.refuse(w, r, http.StatusForbidden, "read-only: no action token is configured")
		return ""
	}
	id := sessionID(r)
	if !s.sess.checkCSRF(id, r.Header.Get(csrfHeader)) {
		s.refuse(w, r, http.StatusForbidden, "missing or wrong CSRF token (reload the page)")
		return ""
	}
	now := time.Now()
	who := ""
	if tok, ok := bearer(r); ok {
		if s.sess.limited(now) {
			s.refuse(w, r, http.StatusTooManyRequests, "too many wrong tokens; try again in a minute")
			return ""
		}
		if !s.token.matches(tok) {
			s.sess.failed(now)
			s.refuse(w, r, http.StatusUnauthorized, "wrong action token")
			return ""
		}
		who = "bearer"
	} else if label, ok := s.sess.loggedIn(id, now); ok {
		who = "session " + label
	} else {
		s.refuse(w, r, http.StatusUnauthorized, "log in with the action token first")
		return ""
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		s.refuse(w, r, http.StatusUnsupportedMediaType, "the body must be application/json")
		return ""
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body exceeds %d bytes", maxActionBody))
			return ""
		}
		s.refuse(w, r, http.StatusBadRequest, "bad JSON body: "+err.Error())
		return ""
	}
	if dec.More() {
		s.refuse(w, r, http.StatusBadRequest, "bad JSON body: more than one value")
		return ""
	}
	return who
}

// rowsAction is the body of an action on rows: their keys as text, or
// (unpark only) all, every parked row of the page's scope.
type rowsAction struct {
	IDs           []string `json:"ids"`
	All           bool     `json:"all"`
	ResetAttempts bool     `json:"reset_attempts"`
}

// actionReply is the answer of an action.
type actionReply struct {
	Action  string `json:"action"`
	Rows    int64  `json:"rows"`
	Message string `json:"message"`
}

// finish answers an action's outcome, logs it with who asked and what
// they asked for, and samples again so that the page shows the change.
func (s *server) finish(w http.ResponseWriter, r *http.Request, who, action string, what []any, n int64, msg string, err error) {
	attrs := append([]any{"action", action, "remote", r.RemoteAddr, "who", who}, what...)
	if err != nil {
		s.log.Error("serve: action failed", append(attrs, "rows", n, "err", err)...)
		code := http.StatusInternalServerError
		if invalidInput(err) {
			code = http.StatusBadRequest
		}
		// The reply answers the action; a library error names its
		// package and operation ("claim: unpark: <cause>").
		writeJSON(w, code, apiError{Error: oneLine(err.Error())})
		return
	}
	s.log.Info("serve: action", append(attrs, "rows", n)...)
	s.m.sampleAll(r.Context())
	writeJSON(w, http.StatusOK, actionReply{Action: action, Rows: n, Message: msg})
}

// rowPage returns the page number of an action on rows, or answers 404
// and returns -1.
func (s *server) rowPage(w http.ResponseWriter, r *http.Request) int {
	if s.info.Table == "" {
		http.NotFound(w, r)
		return -1
	}
	return s.pageIndex(w, r)
}

// pageAction starts an action on page i (page answers 404 where it has
// none): it reads the body and checks the operator (see gate). ok is false
// when it has answered already.
func pageAction[B any](s *server, w http.ResponseWriter, r *http.Request, page func(http.ResponseWriter, *http.Request) int) (i int, body B, who string, ok bool) {
	if i = page(w, r); i < 0 {
		return i, body, "", false
	}
	who = s.gate(w, r, &body)
	return i, body, who, who != ""
}

func (s *server) unpark(w http.ResponseWriter, r *http.Request) {
	i, body, who, ok := pageAction[rowsAction](s, w, r, s.rowPage)
	if !ok {
		return
	}
	ids := body.IDs
	switch {
	case body.All && len(ids) > 0:
		s.refuse(w, r, http.StatusBadRequest, "give ids or all, not both")
		return
	case body.All:
		ids = nil
	case ids == nil:
		ids = []string{} // refused by the source: no keys
	}
	n, warning, err := s.m.src.unpark(r.Context(), i, ids, body.ResetAttempts)
	msg := fmt.Sprintf("unparked %d row(s)", n)
	if body.ResetAttempts {
		msg += " with fresh attempts"
	}
	if warning != "" {
		msg += ". Warning: " + warning
	}
	s.finish(w, r, who, "unpark", []any{"table", s.info.Table, "scope", s.info.Scopes[i], "ids", body.IDs, "all", body.All, "reset_attempts", body.ResetAttempts}, n, msg, err)
}

func (s *server) retryNow(w http.ResponseWriter, r *http.Request) {
	i, body, who, ok := pageAction[rowsAction](s, w, r, s.rowPage)
	if !ok {
		return
	}
	if body.ResetAttempts || body.All {
		s.refuse(w, r, http.StatusBadRequest, "retry now takes row ids only")
		return
	}
	n, err := s.m.src.retryNow(r.Context(), i, body.IDs)
	s.finish(w, r, who, "retry-now", []any{"table", s.info.Table, "scope", s.info.Scopes[i], "ids", body.IDs}, n, fmt.Sprintf("%d row(s) claimable now", n), err)
}

// pauseAction is the body of a pause: why (optional).
type pauseAction struct {
	Reason string `json:"reason"`
}

// pausePage returns the page number of a pause or resume, or answers 404
// (no pause table) and returns -1.
func (s *server) pausePage(w http.ResponseWriter, r *http.Request) int {
	if s.info.PauseTable == "" {
		http.NotFound(w, r)
		return -1
	}
	return s.rowPage(w, r)
}

func (s *server) pauseScope(w http.ResponseWriter, r *http.Request) {
	i, body, who, ok := pageAction[pauseAction](s, w, r, s.pausePage)
	if !ok {
		return
	}
	ok, err := s.m.src.pause(r.Context(), i, body.Reason, "claimctl serve, "+who)
	n, msg := int64(0), "paused already; nothing changed"
	if ok {
		n, msg = 1, "paused: claimers with this pause table take no rows of it once their PauseRefresh has passed"
	}
	s.finish(w, r, who, "pause", []any{"table", s.info.Table, "scope", s.info.Scopes[i], "reason", body.Reason}, n, msg, err)
}

func (s *server) resumeScope(w http.ResponseWriter, r *http.Request) {
	i, _, who, ok := pageAction[struct{}](s, w, r, s.pausePage)
	if !ok {
		return
	}
	ok, err := s.m.src.resume(r.Context(), i)
	n, msg := int64(0), "not paused; nothing changed"
	if ok {
		n, msg = 1, "resumed"
	}
	s.finish(w, r, who, "resume", []any{"table", s.info.Table, "scope", s.info.Scopes[i]}, n, msg, err)
}

// releaseAction is the body of a force-release: the lease's key and the
// owner the operator saw holding it.
type releaseAction struct {
	Key   string `json:"key"`
	Owner string `json:"owner"`
}

func (s *server) forceRelease(w http.ResponseWriter, r *http.Request) {
	var body releaseAction
	who := s.gate(w, r, &body)
	if who == "" {
		return
	}
	ok, err := s.m.src.forceRelease(r.Context(), body.Key, body.Owner)
	n, msg := int64(0), fmt.Sprintf("lease %s is no longer held by %s; nothing changed", body.Key, body.Owner)
	if ok {
		n, msg = 1, fmt.Sprintf("released lease %s (owner %s)", body.Key, body.Owner)
	}
	s.finish(w, r, who, "force-release", []any{"lease_table", s.info.LeaseTable, "key", body.Key, "owner", body.Owner}, n, msg, err)
}

// nextRE matches the pages a login may return to.
var nextRE = regexp.MustCompile(`^/(page/[0-9]{1,6})?$`)

// loginData is what the login template gets.
type loginData struct {
	Info    sourceInfo
	CSRF    string
	Next    string
	Message string
}

func (s *server) loginForm(w http.ResponseWriter, r *http.Request) {
	if !s.token.set {
		http.Error(w, "claimctl serve: read-only: no action token is configured", http.StatusNotFound)
		return
	}
	id := ensureSession(w, r)
	next := r.URL.Query().Get("next")
	if !nextRE.MatchString(next) {
		next = "/"
	}
	s.render(w, "login.html", http.StatusOK, loginData{Info: s.info, CSRF: s.sess.csrf(id), Next: next})
}

// login checks the form's CSRF token and the action token; on success it
// starts a new logged-in session and returns to the page it came from.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if !s.token.set {
		s.refuse(w, r, http.StatusForbidden, "read-only: no action token is configured")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		s.refuse(w, r, http.StatusBadRequest, "bad form")
		return
	}
	id := sessionID(r)
	if !s.sess.checkCSRF(id, r.PostForm.Get("csrf")) {
		s.refuse(w, r, http.StatusForbidden, "missing or wrong CSRF token (reload the page)")
		return
	}
	next := r.PostForm.Get("next")
	if !nextRE.MatchString(next) {
		next = "/"
	}
	now := time.Now()
	if s.sess.limited(now) {
		s.log.Warn("serve: refused", "path", r.URL.Path, "reason", "too many wrong tokens", "remote", r.RemoteAddr)
		s.render(w, "login.html", http.StatusTooManyRequests, loginData{Info: s.info, CSRF: s.sess.csrf(id), Next: next, Message: "Too many wrong tokens: try again in a minute."})
		return
	}
	if !s.token.matches(r.PostForm.Get("token")) {
		s.sess.failed(now)
		s.log.Warn("serve: refused", "path", r.URL.Path, "reason", "wrong action token", "remote", r.RemoteAddr)
		s.render(w, "login.html", http.StatusUnauthorized, loginData{Info: s.info, CSRF: s.sess.csrf(id), Next: next, Message: "Wrong token."})
		return
	}
	nid, label := s.sess.login(now)
	setSession(w, r, nid, int(sessionTTL/time.Second))
	s.log.Info("serve: login", "remote", r.RemoteAddr, "who", "session "+label)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		s.refuse(w, r, http.StatusBadRequest, "bad form")
		return
	}
	id := sessionID(r)
	if !s.sess.checkCSRF(id, r.PostForm.Get("csrf")) {
		s.refuse(w, r, http.StatusForbidden, "missing or wrong CSRF token (reload the page)")
		return
	}
	if label := s.sess.logout(id); label != "" {
		s.log.Info("serve: logout", "remote", r.RemoteAddr, "who", "session "+label)
	}
	setSession(w, r, randomID(32), 0)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// hostileError is a stored error that would run script if the page parsed
// it as HTML.
const hostileError = `<script>document.title="pwned"</script><img src=x onerror="document.title='pwned'">`

// An operator's visit in a real browser, on PostgreSQL and MariaDB: the
// page shows what the database holds (counts, a chart of them, stuck,
// parked and scheduled rows, the held leases; a coalescer's backlog with
// -coalesce, refreshed in place), a hostile error text stays
// text, and an unpark through the page (log in with the token, click,
// confirm) returns the row to pending. With CLAIMLOCK_SERVE_SCREENSHOT
// set, the PostgreSQL run saves its screenshot there (the README's).
func TestServeBrowser(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b := startBrowser(t, ctx)
	for _, e := range testengine.All {
		if e.Name == testengine.SQLite {
			continue // the handler tests run on SQLite
		}
		t.Run(e.Name, func(t *testing.T) { browserVisit(t, ctx, b, e) })
		t.Run(e.Name+"-coalesce", func(t *testing.T) { browserCoalesce(t, ctx, b, e) })
		if e.Name == testengine.Postgres {
			// The pause buttons are the page's own: one engine shows them
			// (the handler tests run the actions on every engine).
			t.Run(e.Name+"-pause", func(t *testing.T) { browserPause(t, ctx, b, e) })
		}
	}
}

func browserVisit(t *testing.T, ctx context.Context, b *browser, e testengine.Engine) {
	fx := newServeFixture(t, e)
	// ids[3] has been processing for ten minutes (stuck past the default
	// five); ids[4] is parked with a hostile error text.
	fx.Exec(t, "UPDATE jobs SET claimed_at = "+fx.Ago(600)+" WHERE id = ?", fx.ids[3])
	fx.Exec(t, "UPDATE jobs SET status = 'FAILED', token = NULL, attempts = 3, last_error = ? WHERE id = ?", hostileError, fx.ids[4])
	_, err := fx.k.Acquire(ctx, "reports:weekly")
	require.NoError(t, err)

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	srv := startServe(t, sctx, "-config", fx.conf, "-scope", "42", "-scope", "7", "-listen", "127.0.0.1:0",
		"-action-token", testToken, "-interval", "1s")
	defer func() {
		stop()
		require.Equal(t, exitOK, srv.wait(t))
	}()

	// Some traffic while the server samples, for the chart.
	cc := fx.Config
	cc.BatchSize = 2
	c, err := claim.New(fx.Dialect, cc, func(r *struct{ P string }) []any { return []any{&r.P} })
	require.NoError(t, err)
	for i := range 6 {
		for j := range 3 {
			fx.Exec(t, "INSERT INTO jobs (task_id, payload, created_at) VALUES (42, ?, "+fx.Ago(30)+")", fmt.Sprintf("new%d-%d", i, j))
		}
		if i%2 == 1 {
			bt, err := c.Claim(ctx)
			require.NoError(t, err)
			require.NoError(t, bt.AckAll(ctx))
		}
		time.Sleep(700 * time.Millisecond)
	}

	page := srv.url + "page/0"
	b.navigate(t, ctx, page)
	// Two renders after the last change: the server sampled it.
	b.waitFor(t, ctx, "the first render", `Number(document.body.dataset.loaded) >= 1`)
	var loaded int
	require.NoError(t, b.eval(ctx, `Number(document.body.dataset.loaded)`, &loaded))
	b.waitFor(t, ctx, "a fresh sample", fmt.Sprintf(`Number(document.body.dataset.loaded) >= %d`, loaded+2))

	text := func(expr string) string {
		t.Helper()
		var s string
		require.NoError(t, b.eval(ctx, expr, &s), expr)
		return s
	}
	rowText := func(table, id string) string {
		t.Helper()
		return text(`(() => { for (const tr of document.querySelectorAll("#` + table + ` tbody tr")) {
			if (tr.cells[0].textContent === ` + jsString(id) + `) return Array.from(tr.cells, (td) => td.textContent).join("|"); } return ""; })()`)
	}
	pending := fx.Count(t, "task_id = 42 AND status = 'PENDING'")
	require.Equal(t, fmt.Sprint(pending), text(`document.getElementById("c-pending").textContent`))
	require.Equal(t, "2", text(`document.getElementById("c-failed").textContent`))
	require.Equal(t, fmt.Sprint(fx.Count(t, "task_id = 42 AND status = 'DONE'")), text(`document.getElementById("c-done").textContent`))
	require.Regexp(t, `^([0-9]+m)?[0-9.]+s$`, text(`document.getElementById("c-oldest-pending").textContent`))
	require.Regexp(t, `^1[0-9]m[0-9]+s$`, text(`document.getElementById("c-oldest-processing").textContent`))
	var lines int
	require.NoError(t, b.eval(ctx, `document.querySelectorAll("#chart polyline").length`, &lines))
	require.Equal(t, 3, lines, "one line per status in the chart")
	require.Regexp(t, `^[0-9]+ samples over [0-9]+ s$`, text(`document.querySelector("#chart text:last-of-type").textContent`))

	id := func(i int) string { return fmt.Sprint(fx.ids[i]) }
	require.Regexp(t, `^`+id(3)+`\|[A-Z0-9]+\|\(no worker column\)\|1\|1[0-9]m[0-9]+s$`, rowText("stuck", id(3)), "stuck past the reap timeout")
	require.Regexp(t, `^`+id(1)+`\|1\|[0-9.]+m?[0-9.]*s\|`+parkedError+`$`, rowText("parked", id(1)))
	require.True(t, strings.HasSuffix(rowText("parked", id(4)), "|"+hostileError), "the hostile text shows as text")
	require.Regexp(t, `^`+id(2)+`\|1\|5[0-9]m[0-9]+s\|429 too many requests$`, rowText("scheduled", id(2)))
	require.Regexp(t, `^nightly\|held\|`+fx.lease.Owner()+`\|1\|-\|[0-9-]+T[0-9:.]+Z\|5[0-9]m[0-9]+s$`, rowText("leases", "nightly"))
	require.Contains(t, rowText("leases", "reports:weekly"), "|held|")
	var injected int
	require.NoError(t, b.eval(ctx, `document.querySelectorAll("main img, main script, #parked b").length`, &injected))
	require.Zero(t, injected, "nothing from the database became an element")
	require.NotEqual(t, "pwned", text(`document.title`))
	// Not logged in: no actions offered.
	var buttons int
	require.NoError(t, b.eval(ctx, `document.querySelectorAll("#parked button, #leases button").length`, &buttons))
	require.Zero(t, buttons)

	// Log in with the token.
	b.click(t, ctx, `document.getElementById("login-link")`)
	b.waitFor(t, ctx, "the login form", `location.pathname === "/login" && document.readyState === "complete"`)
	b.typeText(t, ctx, `document.getElementById("token")`, testToken)
	b.click(t, ctx, `document.getElementById("login")`)
	b.waitFor(t, ctx, "the page after login", `location.href === `+jsString(page)+` && Number(document.body.dataset.loaded) >= 1 && document.querySelector("#parked button")`)
	require.Equal(t, "Log out", text(`document.getElementById("logout").textContent`))

	if out := os.Getenv("CLAIMLOCK_SERVE_SCREENSHOT"); out != "" && e.Name == testengine.Postgres {
		require.NoError(t, os.WriteFile(out, b.screenshot(t, ctx), 0o644))
	} else {
		require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), "status-page.png"), b.screenshot(t, ctx), 0o644))
	}

	// Unpark the first parked row: click, confirm with fresh attempts.
	unparkButton := `(() => { for (const tr of document.querySelectorAll("#parked tbody tr")) {
		if (tr.cells[0].textContent === ` + jsString(id(1)) + `) return tr.querySelector("button"); } return null; })()`
	b.click(t, ctx, unparkButton)
	b.waitFor(t, ctx, "the confirmation", `document.getElementById("confirm").open`)
	require.Equal(t, "Unpark row "+id(1)+"? It goes back to pending and workers claim it again.", text(`document.getElementById("confirm-text").textContent`))
	require.Equal(t, 1, fx.Count(t, "id = ? AND status = 'FAILED'", fx.ids[1]), "nothing changes before the confirmation")
	b.click(t, ctx, `document.getElementById("confirm-reset")`)
	b.click(t, ctx, `document.getElementById("confirm-ok")`)
	b.waitFor(t, ctx, "the action's answer", `document.getElementById("status").textContent === "unparked 1 row(s) with fresh attempts"`)
	require.Equal(t, 1, fx.Count(t, "id = ? AND status = 'PENDING' AND attempts = 0 AND last_error IS NULL", fx.ids[1]))
	b.waitFor(t, ctx, "the row to leave the parked list", `!Array.from(document.querySelectorAll("#parked tbody tr")).some((tr) => tr.cells[0].textContent === `+jsString(id(1))+`)`)
	require.Equal(t, "1", text(`document.getElementById("c-failed").textContent`))

	// A cancelled confirmation changes nothing.
	resetShown := `getComputedStyle(document.getElementById("confirm-reset-row")).display !== "none"`
	b.click(t, ctx, `document.querySelector("#parked button")`)
	b.waitFor(t, ctx, "the confirmation", `document.getElementById("confirm").open`)
	var shown bool
	require.NoError(t, b.eval(ctx, resetShown, &shown))
	require.True(t, shown, "an unpark offers fresh attempts")
	b.click(t, ctx, `document.getElementById("confirm-cancel")`)
	b.waitFor(t, ctx, "the dialog to close", `!document.getElementById("confirm").open`)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 1, fx.Count(t, "id = ? AND status = 'FAILED'", fx.ids[4]))
	// A force-release asks about the holder, and offers no attempts.
	b.click(t, ctx, `document.querySelector("#leases button")`)
	b.waitFor(t, ctx, "the confirmation", `document.getElementById("confirm").open`)
	require.NoError(t, b.eval(ctx, resetShown, &shown))
	require.False(t, shown, "a force-release has no attempts to offer")
	require.Contains(t, text(`document.getElementById("confirm-text").textContent`), " held by ")
	b.click(t, ctx, `document.getElementById("confirm-cancel")`)
	b.waitFor(t, ctx, "the dialog to close", `!document.getElementById("confirm").open`)
	require.NoError(t, fx.lease.Renew(ctx), "the lease is still held")

	// Unpark every parked row of the scope.
	require.Equal(t, "Unpark all 1", text(`document.getElementById("unpark-all").textContent`))
	b.click(t, ctx, `document.getElementById("unpark-all")`)
	b.waitFor(t, ctx, "the confirmation", `document.getElementById("confirm").open`)
	require.Equal(t, "Unpark all 1 parked row(s) of task_id=42? They go back to pending and workers claim them again.", text(`document.getElementById("confirm-text").textContent`))
	b.click(t, ctx, `document.getElementById("confirm-ok")`)
	b.waitFor(t, ctx, "the action's answer", `document.getElementById("status").textContent === "unparked 1 row(s)"`)
	require.Equal(t, 0, fx.Count(t, "task_id = 42 AND status = 'FAILED'"))
	require.Equal(t, 1, fx.Count(t, "id = ? AND status = 'PENDING' AND attempts = 3", fx.ids[4]), "attempts kept")
	b.waitFor(t, ctx, "the button to go", `document.getElementById("unpark-all").hidden`)

	require.Regexp(t, `msg="serve: action" action=unpark remote=127\.0\.0\.1:[0-9]+ who="session [0-9a-f]{8}" table=jobs scope="task_id=42" ids=\[`+id(1)+`\] all=false reset_attempts=true rows=1`, srv.logs.String())
	require.NotContains(t, srv.logs.String(), testToken)
}

// browserCoalesce: the page of a coalescer (-coalesce) shows its backlog,
// and a change accepted while it is open shows on the next refresh.
func browserCoalesce(t *testing.T, ctx context.Context, b *browser, e testengine.Engine) {
	c := testengine.Open(t, e, 4)
	require.NoError(t, coalesce.CreateTables(ctx, c.Dialect, c.DB, coalesce.Config{}))
	co, _ := coalesceState(t, c)

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	srv := startServe(t, sctx, "-driver", e.Name, "-dsn", c.DSN, "-coalesce", "-listen", "127.0.0.1:0", "-interval", "1s")
	defer func() {
		stop()
		require.Equal(t, exitOK, srv.wait(t))
	}()
	b.navigate(t, ctx, srv.url+"page/0")
	b.waitFor(t, ctx, "the first render", `Number(document.body.dataset.loaded) >= 1`)
	text := func(expr string) string {
		t.Helper()
		var s string
		require.NoError(t, b.eval(ctx, expr, &s), expr)
		return s
	}
	require.Equal(t, "1", text(`document.getElementById("b-dirty").textContent`))
	require.Regexp(t, `^([0-9]+m)?[0-9.]+m?s$`, text(`document.getElementById("b-oldest").textContent`))
	require.Equal(t, "1", text(`document.getElementById("c-failed").textContent`), "k2 is parked")

	_, err := co.Accept(ctx, coalesce.Change{Key: "k4", EventID: "k4-1", Payload: []byte("1")})
	require.NoError(t, err)
	b.waitFor(t, ctx, "the new dirty key", `document.getElementById("b-dirty").textContent === "2"`)
}

// browserPause: with -pause-table, a logged-in operator pauses the page's
// scope (click, confirm), the page shows the pause, and resumes it.
func browserPause(t *testing.T, ctx context.Context, b *browser, e testengine.Engine) {
	fx := newServeFixture(t, e)
	require.NoError(t, claim.CreatePauseTable(ctx, fx.Dialect, "ops_pauses"))
	p, err := claim.NewPauses(fx.Dialect, "ops_pauses")
	require.NoError(t, err)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	srv := startServe(t, sctx, "-config", fx.conf, "-scope", "42", "-pause-table", "ops_pauses", "-listen", "127.0.0.1:0",
		"-action-token", testToken, "-interval", "1s")
	defer func() {
		stop()
		require.Equal(t, exitOK, srv.wait(t))
	}()
	page := srv.url + "page/0"
	b.navigate(t, ctx, page)
	b.waitFor(t, ctx, "the first render", `Number(document.body.dataset.loaded) >= 1`)
	text := func(expr string) string {
		t.Helper()
		var s string
		require.NoError(t, b.eval(ctx, expr, &s), expr)
		return s
	}
	var hidden bool
	require.NoError(t, b.eval(ctx, `document.getElementById("pause-state").hidden && !document.getElementById("pause")`, &hidden))
	require.True(t, hidden, "not paused, and no button before a login")
	b.click(t, ctx, `document.getElementById("login-link")`)
	b.waitFor(t, ctx, "the login form", `location.pathname === "/login" && document.readyState === "complete"`)
	b.typeText(t, ctx, `document.getElementById("token")`, testToken)
	b.click(t, ctx, `document.getElementById("login")`)
	b.waitFor(t, ctx, "the page after login", `location.href === `+jsString(page)+` && Number(document.body.dataset.loaded) >= 1 && !document.getElementById("pause").hidden`)

	b.click(t, ctx, `document.getElementById("pause")`)
	b.waitFor(t, ctx, "the confirmation", `document.getElementById("confirm").open`)
	require.Equal(t, "Pause claims of task_id=42? Claimers with this pause table take no more of its rows; rows already claimed finish.",
		text(`document.getElementById("confirm-text").textContent`))
	list, err := p.List(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, list, "nothing changes before the confirmation")
	b.click(t, ctx, `document.getElementById("confirm-ok")`)
	b.waitFor(t, ctx, "the pause shown", `!document.getElementById("pause-state").hidden && document.getElementById("pause").hidden && !document.getElementById("resume").hidden`)
	require.Regexp(t, `^Paused since [0-9-]+T[0-9:]+Z \([0-9.]+m?s ago\) by claimctl serve, session [0-9a-f]{8}$`, text(`document.getElementById("pause-text").textContent`))
	list, err = p.List(ctx, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, []string{"42"}, list[0].Scope)

	b.click(t, ctx, `document.getElementById("resume")`)
	b.waitFor(t, ctx, "the confirmation", `document.getElementById("confirm").open`)
	b.click(t, ctx, `document.getElementById("confirm-ok")`)
	b.waitFor(t, ctx, "the action's answer", `document.getElementById("status").textContent === "resumed"`)
	b.waitFor(t, ctx, "the pause gone", `document.getElementById("pause-state").hidden && !document.getElementById("pause").hidden`)
	list, err = p.List(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, list)
	require.Regexp(t, `msg="serve: action" action=pause remote=127\.0\.0\.1:[0-9]+ who="session [0-9a-f]{8}" table=jobs scope="task_id=42"`, srv.logs.String())
}

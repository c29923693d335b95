package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/internal/testkit/obstest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// claimOf returns a claimer of the fixture's task whose pauses are those
// of table pt, read before every claim.
func claimOf(t *testing.T, f *obstest.Fixture, pt string, task int) *claim.Claimer[struct{ P string }] {
	t.Helper()
	cfg := f.Config
	cfg.PauseTable, cfg.PauseRefresh, cfg.ScopeValues = pt, -1, []any{task}
	c, err := claim.New(f.Dialect, cfg, func(r *struct{ P string }) []any { return []any{&r.P} })
	require.NoError(t, err)
	return c
}

// pause, resume and pauses on every engine: the pause table's DDL, a
// pause of one scope that claimers honour while the other scope is
// claimed, the listing, a resume, a pause of the whole table, and the
// refusals that change nothing.
func TestPauseCommands(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := obstest.New(t, e, 3, 2)
			conf := writeConfig(t, f)
			const pt = "ops_pauses"

			code, _, stderr := ctl(t, "", "pauses", "-config", conf, "-pause-table", pt)
			require.Equal(t, exitSchema, code, "no pause table yet: %s", stderr)
			require.Contains(t, stderr, "does not exist")
			code, out, _ := ctl(t, "", "ddl", "-config", conf, "-pause-table", pt)
			require.Equal(t, exitOK, code)
			require.Contains(t, out, "-- pause table "+pt)
			ddl, err := claim.PauseTableDDL(f.Dialect, pt)
			require.NoError(t, err)
			require.Contains(t, out, ddl[0]+";", "the library's DDL")
			require.NoError(t, claim.CreatePauseTable(ctx, f.Dialect, pt))

			// Refusals change nothing.
			code, _, stderr = ctl(t, "", "pause", "-config", conf, "-pause-table", pt, "-yes")
			require.Equal(t, exitUsage, code)
			require.Contains(t, stderr, "-all-scopes for the whole table")
			code, _, _ = ctl(t, "", "pause", "-config", conf, "-pause-table", pt, "-scope", "42", "-all-scopes", "-yes")
			require.Equal(t, exitUsage, code)
			code, out, _ = ctl(t, "n\n", "pause", "-config", conf, "-pause-table", pt, "-scope", "42")
			require.Equal(t, exitRefused, code)
			require.Contains(t, out, "Pause claims of jobs where task_id=42")
			code, out, _ = ctl(t, "", "pauses", "-config", conf, "-pause-table", pt)
			require.Equal(t, exitOK, code)
			require.Equal(t, "no pauses in "+pt+"\n", out)

			code, out, _ = ctl(t, "y\n", "pause", "-config", conf, "-pause-table", pt, "-scope", "42", "-reason", "smtp down", "-by", "ana")
			require.Equal(t, exitOK, code)
			require.True(t, strings.HasSuffix(out, "paused jobs where task_id=42\n"), "%q", out)
			code, out, _ = ctl(t, "", "pause", "-config", conf, "-pause-table", pt, "-scope", "42", "-yes", "-json")
			require.Equal(t, exitOK, code)
			var res actionResult
			require.NoError(t, json.Unmarshal([]byte(out), &res))
			require.Equal(t, actionResult{Action: "pause", Table: "jobs", Scope: "42", Rows: 0}, res, "paused already")

			_, err = claimOf(t, f, pt, 42).Claim(ctx)
			require.ErrorIs(t, err, claim.ErrPaused)
			b, err := claimOf(t, f, pt, 7).Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, b.Len(), "task 7 is not paused")
			require.NoError(t, b.AckAll(ctx))

			code, out, _ = ctl(t, "", "pauses", "-config", conf, "-pause-table", pt, "-json")
			require.Equal(t, exitOK, code)
			var rows []pauseRow
			require.NoError(t, json.Unmarshal([]byte(out), &rows))
			require.Len(t, rows, 1)
			require.Equal(t, []string{"42"}, rows[0].Scope)
			require.Equal(t, "jobs", rows[0].Table)
			require.Equal(t, "smtp down", rows[0].Reason)
			require.Equal(t, "ana", rows[0].By)
			require.GreaterOrEqual(t, rows[0].AgeSec, 0.0)
			code, out, _ = ctl(t, "", "pauses", "-config", conf, "-pause-table", pt)
			require.Equal(t, exitOK, code)
			got := fields(out)
			require.Len(t, got, 2)
			require.Equal(t, []string{"TABLE", "SCOPE", "PAUSED", "AT", "AGE", "BY", "REASON"}, got[0])
			require.Equal(t, []string{"jobs", "42", rows[0].PausedAt, "AGE", "ana", "smtp", "down"}, got[1])

			code, out, _ = ctl(t, "", "resume", "-config", conf, "-pause-table", pt, "-scope", "42", "-yes")
			require.Equal(t, exitOK, code)
			require.Equal(t, "resumed jobs where task_id=42\n", out)
			code, out, _ = ctl(t, "", "resume", "-config", conf, "-pause-table", pt, "-scope", "42", "-yes")
			require.Equal(t, exitOK, code)
			require.Equal(t, "jobs where task_id=42 was not paused; nothing changed\n", out)
			b, err = claimOf(t, f, pt, 42).Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 3, b.Len(), "resumed")
			_, err = b.Release(ctx)
			require.NoError(t, err)

			// The whole table.
			code, _, _ = ctl(t, "", "pause", "-config", conf, "-pause-table", pt, "-all-scopes", "-yes")
			require.Equal(t, exitOK, code)
			for _, task := range []int{42, 7} {
				_, err = claimOf(t, f, pt, task).Claim(ctx)
				require.ErrorIs(t, err, claim.ErrPaused, "task %d", task)
			}
			code, out, _ = ctl(t, "", "pauses", "-config", conf, "-pause-table", pt)
			require.Equal(t, exitOK, code)
			require.Contains(t, out, "(every scope)")
			code, out, _ = ctl(t, "", "resume", "-config", conf, "-pause-table", pt, "-all-scopes", "-yes")
			require.Equal(t, exitOK, code)
			require.Equal(t, "resumed jobs (every scope)\n", out)
			b, err = claimOf(t, f, pt, 42).Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 3, b.Len())
			require.NoError(t, b.AckAll(ctx))
		})
	}
}

// The status page with a pause table, on every engine: each page shows
// whether its scope (or the whole table) is paused; a logged-in operator
// pauses and resumes the page's scope, which claimers honour; without a
// session or with the action's wrong shape nothing changes; a server
// without a pause table has no such actions.
func TestServePause(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			fx := newServeFixture(t, e)
			const pt = "ops_pauses"
			require.NoError(t, claim.CreatePauseTable(ctx, fx.Dialect, pt))
			p, err := claim.NewPauses(fx.Dialect, pt)
			require.NoError(t, err)
			s, logs := newTestServer(t, fx, testToken, "-pause-table", pt)
			pageOf := func(i int) pageView {
				w := (&client{t: t, s: s}).do(req{method: "GET", path: fmt.Sprintf("/api/page/%d", i)})
				require.Equal(t, http.StatusOK, w.Code)
				var v pageView
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
				return v
			}
			require.Nil(t, pageOf(0).Pause)

			c := &client{t: t, s: s}
			html := c.visit(1)
			require.Contains(t, html, `id="pause-state" class="msg paused" hidden`)
			require.NotContains(t, html, `id="pause"`, "no button before a login")
			w := c.post("/api/page/1/pause", `{"reason":"x"}`, nil)
			require.Equal(t, http.StatusUnauthorized, w.Code)
			list, err := p.List(ctx, 10)
			require.NoError(t, err)
			require.Empty(t, list, "a refused pause changes nothing")

			require.Equal(t, http.StatusSeeOther, c.login(testToken).Code)
			html = c.visit(1)
			require.Contains(t, html, `<button type="button" id="pause" class="small">Pause claims</button>`)
			w = c.post("/api/page/1/pause", `{"reason":"x","every":true}`, nil)
			require.Equal(t, http.StatusBadRequest, w.Code)
			require.Contains(t, apiErr(t, w), "unknown field")
			w = c.post("/api/page/1/pause", `{"reason":"provider <b>down</b>"}`, nil)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			var rep actionReply
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &rep))
			require.Equal(t, actionReply{Action: "pause", Rows: 1, Message: rep.Message}, rep)
			require.Contains(t, logs.String(), "action=pause")
			w = c.post("/api/page/1/pause", `{}`, nil)
			require.Equal(t, http.StatusOK, w.Code)
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &rep))
			require.Zero(t, rep.Rows, "paused already")

			_, err = claimOf(t, fx.Fixture, pt, 7).Claim(ctx)
			require.ErrorIs(t, err, claim.ErrPaused, "page 1 is task 7")
			b, err := claimOf(t, fx.Fixture, pt, 42).Claim(ctx)
			require.NoError(t, err)
			_, err = b.Release(ctx)
			require.NoError(t, err)
			v := pageOf(1)
			require.NotNil(t, v.Pause)
			require.False(t, v.Pause.Whole)
			require.Equal(t, "provider <b>down</b>", v.Pause.Reason)
			require.Contains(t, v.Pause.By, "claimctl serve, session")
			require.Nil(t, pageOf(0).Pause, "task 42 is not paused")
			html = c.visit(1)
			require.Contains(t, html, "provider &lt;b&gt;down&lt;/b&gt;", "the reason is escaped")
			require.Contains(t, html, `<button type="button" id="resume" class="small">Resume claims</button>`)

			// A pause of the whole table shows on every page, and is not
			// resumed from a scope's page.
			_, err = p.Pause(ctx, "jobs", nil, claim.PauseNote{By: "ops"})
			require.NoError(t, err)
			s.m.sampleAll(ctx)
			v = pageOf(0)
			require.NotNil(t, v.Pause)
			require.True(t, v.Pause.Whole)
			require.Equal(t, "ops", v.Pause.By)
			_, err = p.Resume(ctx, "jobs", nil)
			require.NoError(t, err)

			w = c.post("/api/page/1/resume", `{}`, nil)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &rep))
			require.Equal(t, "resume", rep.Action)
			require.EqualValues(t, 1, rep.Rows)
			require.Nil(t, pageOf(1).Pause)
			b, err = claimOf(t, fx.Fixture, pt, 7).Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, b.Len(), "resumed")
			_, err = b.Release(ctx)
			require.NoError(t, err)

			plain, _ := newTestServer(t, fx, testToken)
			pc := &client{t: t, s: plain}
			pc.visit(0)
			require.Equal(t, http.StatusSeeOther, pc.login(testToken).Code)
			pc.visit(0)
			require.Equal(t, http.StatusNotFound, pc.post("/api/page/0/pause", `{}`, nil).Code, "no pause table: no pause action")
		})
	}
}

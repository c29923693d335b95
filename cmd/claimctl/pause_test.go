package main

import (
	"context"
	"encoding/json"
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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/obstest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
)

// ctl runs claimctl's main logic in-process with stdin as standard input.
func ctl(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	if code != exitOK {
		line, usage, _ := strings.Cut(errOut.String(), "\n")
		require.True(t, strings.HasPrefix(line, "claimctl: "), "%q", line)
		require.NotContains(t, line, "goroutine")
		if usage != "" {
			require.Equal(t, exitUsage, code, "only a usage error is followed by more than its line: %q", errOut.String())
			require.True(t, strings.HasPrefix(usage, "\nusage: claimctl "), "the usage follows the error: %q", usage)
		}
	} else {
		require.Empty(t, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// writeConfig writes the JSON description of the fixture's tables.
func writeConfig(t *testing.T, f *obstest.Fixture) string {
	t.Helper()
	cfg := map[string]any{
		"driver": f.Engine, "dsn": f.DSN, "table": obstest.Table, "attempts": "attempts", "run-at": "run_at",
		"error": "last_error", "created-at": "created_at", "scope-cols": []string{"task_id"},
		"lease-table": "leases",
	}
	if f.Engine == testengine.Postgres {
		cfg["driver"] = "postgres"
	}
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "claimctl.json")
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

var ageRE = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m\d+s|h\d+m\d+s)\b`)

// fields normalises a human table for comparison: ages become AGE, and
// each line becomes its whitespace-separated fields.
func fields(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(ageRE.ReplaceAllString(s, "AGE")), "\n") {
		out = append(out, strings.Fields(l))
	}
	return out
}

// An operator's session on every engine: every report matches the
// database, every action is verified in it, and every refusal changes
// nothing.
func TestOperatorSession(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			seeded := time.Now()
			f := obstest.New(t, e, 5, 2)
			conf := writeConfig(t, f)
			cc := f.Config
			cc.MaxAttempts = 0
			c, err := claim.New(f.Dialect, cc, func(r *struct{ P string }) []any { return []any{&r.P} })
			require.NoError(t, err)
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			ids := b.IDs()
			require.NoError(t, b.Ack(ctx, ids[0]))
			require.NoError(t, b.Fail(ctx, ids[1], claim.Park(errors.New("smtp 550: mailbox unavailable"))))
			require.NoError(t, b.Fail(ctx, ids[2], claim.RetryAfter(time.Hour, errors.New("429")))) // scheduled
			time.Sleep(50 * time.Millisecond)
			// ids[3] and ids[4] stay processing: stuck.

			// stats, JSON and table, against Stats.
			code, out, _ := ctl(t, "", "stats", "-config", conf, "-scope", "42", "-scope", "7", "-json")
			require.Equal(t, exitOK, code)
			var stats []statsRow
			require.NoError(t, json.Unmarshal([]byte(out), &stats))
			require.Len(t, stats, 2)
			st42, err := c.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, "task_id=42", stats[0].Scope)
			require.Equal(t, [5]int64{st42.Pending, st42.Processing, st42.Done, st42.Failed, st42.Other},
				[5]int64{stats[0].Pending, stats[0].Processing, stats[0].Done, stats[0].Failed, stats[0].Other})
			require.Equal(t, [5]int64{1, 2, 1, 1, 0}, [5]int64{stats[0].Pending, stats[0].Processing, stats[0].Done, stats[0].Failed, stats[0].Other})
			require.Equal(t, "task_id=7", stats[1].Scope)
			require.EqualValues(t, 2, stats[1].Pending)
			// Task 7's rows were created 6 and 7 s before the seed; the
			// oldest is 7 s old then, and older by the time since.
			require.GreaterOrEqual(t, stats[1].OldestPendingSeconds, 6.0, "task 7's oldest row was created 7 s before the seed")
			require.LessOrEqual(t, stats[1].OldestPendingSeconds, 8+time.Since(seeded).Seconds(), "task 7's oldest row was created 7 s before the seed")
			require.Greater(t, stats[0].OldestProcessingSeconds, 0.0)

			code, out, _ = ctl(t, "", "stats", "-config", conf)
			require.Equal(t, exitOK, code)
			require.Equal(t, [][]string{
				{"TABLE", "SCOPE", "PENDING", "PROCESSING", "DONE", "FAILED", "OTHER", "OLDEST", "PENDING", "OLDEST", "PROCESSING"},
				{"jobs", "(all)", "3", "2", "1", "1", "0", "AGE", "AGE"},
			}, fields(out))

			// stuck rows with token and age on the database clock.
			code, out, _ = ctl(t, "", "stuck", "-config", conf, "-scope", "42", "-older", "1ms", "-json")
			require.Equal(t, exitOK, code)
			var stuck []rowOut
			require.NoError(t, json.Unmarshal([]byte(out), &stuck))
			require.Len(t, stuck, 2)
			for _, r := range stuck {
				require.Equal(t, b.Token(), r.Token)
				require.Greater(t, r.ClaimedAgeSeconds, 0.0)
				require.EqualValues(t, 1, r.Attempts)
			}
			code, out, _ = ctl(t, "", "stuck", "-config", conf, "-scope", "42", "-older", "1h")
			require.Equal(t, exitOK, code)
			require.Equal(t, [][]string{{"ID", "TOKEN", "WORKER", "ATTEMPTS", "CLAIMED", "AGO"}}, fields(out), "nothing stuck for an hour")

			// parked rows with attempts and error.
			code, out, _ = ctl(t, "", "parked", "-config", conf, "-scope", "42")
			require.Equal(t, exitOK, code)
			require.Equal(t, [][]string{
				{"ID", "ATTEMPTS", "LAST", "CLAIM", "AGO", "ERROR"},
				{fmt.Sprint(ids[1]), "1", "AGE", "smtp", "550:", "mailbox", "unavailable"},
			}, fields(out))

			// unpark: refused without confirmation, then done.
			code, out, _ = ctl(t, "n\n", "unpark", "-config", conf, "-scope", "42")
			require.Equal(t, exitRefused, code)
			require.Contains(t, out, "Unpark 1 parked row(s)")
			require.Equal(t, 1, f.Count(t, "status = 'FAILED'"), "nothing changed")
			code, out, _ = ctl(t, "", "unpark", "-config", conf, "-scope", "42", "-reset-attempts", "-yes", "-json")
			require.Equal(t, exitOK, code)
			var res actionResult
			require.NoError(t, json.Unmarshal([]byte(out), &res))
			require.Equal(t, actionResult{Action: "unpark", Table: "jobs", Scope: "task_id=42", Rows: 1}, res)
			require.Equal(t, 0, f.Count(t, "status = 'FAILED'"))
			require.Equal(t, 1, f.Count(t, "id = ? AND status = 'PENDING' AND attempts = 0 AND last_error IS NULL", ids[1]))

			// scheduled, then retry now.
			code, out, _ = ctl(t, "", "scheduled", "-config", conf, "-scope", "42", "-json")
			require.Equal(t, exitOK, code)
			var sched []rowOut
			require.NoError(t, json.Unmarshal([]byte(out), &sched))
			require.Len(t, sched, 1)
			require.Equal(t, float64(ids[2].(int64)), sched[0].ID)
			require.InDelta(t, 3600, sched[0].RunInSeconds, 60)
			code, _, _ = ctl(t, "", "retry-now", "-config", conf, "-scope", "42")
			require.Equal(t, exitRefused, code, "no answer on stdin is no")
			require.Equal(t, 1, f.Count(t, "run_at IS NOT NULL"))
			code, out, _ = ctl(t, "y\n", "retry-now", "-config", conf, "-scope", "42", "-ids", fmt.Sprint(ids[2]))
			require.Equal(t, exitOK, code)
			require.Contains(t, out, "1 row(s) claimable now")
			require.Equal(t, 0, f.Count(t, "run_at IS NOT NULL"))

			// one reap sweep.
			code, _, _ = ctl(t, "", "reap", "-config", conf, "-scope", "42", "-older", "1ms")
			require.Equal(t, exitRefused, code)
			require.Equal(t, 2, f.Count(t, "status = 'PROCESSING'"))
			code, out, _ = ctl(t, "", "reap", "-config", conf, "-scope", "42", "-older", "1ms", "-yes")
			require.Equal(t, exitOK, code)
			require.Contains(t, out, "returned 2 row(s) to pending, parked 0")
			require.Equal(t, 0, f.Count(t, "status = 'PROCESSING'"))
			require.ErrorIs(t, b.AckAll(ctx), dialect.ErrClaimLost, "the dead batch cannot complete reaped rows")

			// leases: inspect and force-release.
			require.NoError(t, tasklock.CreateTable(ctx, f.Dialect, "leases"))
			k, err := tasklock.New(f.Dialect, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: time.Minute})
			require.NoError(t, err)
			l, err := k.Acquire(ctx, "nightly")
			require.NoError(t, err)
			code, out, _ = ctl(t, "", "leases", "-config", conf, "-key", "nightly", "-key", "weekly", "-json")
			require.Equal(t, exitOK, code)
			var leases []leaseOut
			require.NoError(t, json.Unmarshal([]byte(out), &leases))
			require.Len(t, leases, 2)
			require.Equal(t, "held", leases[0].State)
			require.Equal(t, l.Owner(), leases[0].Owner)
			require.Equal(t, l.Fence(), leases[0].Fence)
			require.InDelta(t, 60, leases[0].RemainingSeconds, 10)
			require.Equal(t, "absent", leases[1].State)
			// Without -key: every holder, time left on the database clock.
			code, out, _ = ctl(t, "", "leases", "-config", conf, "-json")
			require.Equal(t, 0, code, out)
			var holders []leaseOut
			require.NoError(t, json.Unmarshal([]byte(out), &holders))
			require.Len(t, holders, 1)
			require.Equal(t, "nightly", holders[0].Key)
			require.Equal(t, l.Owner(), holders[0].Owner)
			require.True(t, holders[0].DBClock)
			require.InDelta(t, 60, holders[0].RemainingSeconds, 10)
			code, out, _ = ctl(t, "", "leases", "-config", conf, "-key", "nightly")
			require.Equal(t, exitOK, code)
			rows := fields(out)
			require.Equal(t, []string{"nightly", "held", l.Owner(), "1"}, rows[1][:4])

			code, out, _ = ctl(t, "no\n", "force-release", "-config", conf, "-key", "nightly")
			require.Equal(t, exitRefused, code)
			require.Contains(t, out, "Force-release lease nightly of leases, held by owner "+l.Owner())
			require.NoError(t, l.Renew(ctx), "refused: still held")
			code, out, _ = ctl(t, "", "force-release", "-config", conf, "-key", "nightly", "-yes")
			require.Equal(t, exitOK, code)
			require.Contains(t, out, "released lease nightly (was fence 1")
			require.ErrorIs(t, l.Renew(ctx), dialect.ErrLeaseLost)

			// ddl on a table that has everything: nothing to add.
			code, out, _ = ctl(t, "", "ddl", "-config", conf, "-lease-table", "")
			require.Equal(t, exitOK, code)
			require.Equal(t, 2, strings.Count(out, "-- (nothing to do)"), out)
		})
	}
}

// Bad input gets one line and a non-zero exit, and changes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	f := obstest.New(t, testengine.All[0], 3, 0)
	conf := writeConfig(t, f)
	before := f.Count(t, "status = 'PENDING'")
	for _, tc := range []struct {
		name string
		code int
		args []string
		msg  string
	}{
		{"no command", exitUsage, nil, "no command"},
		{"unknown command", exitUsage, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"bad flag", exitUsage, []string{"stats", "-config", conf, "-nope"}, "flag provided but not defined"},
		{"bad duration", exitUsage, []string{"stuck", "-config", conf, "-older", "soon"}, "invalid value"},
		{"missing config", exitUsage, []string{"stats", "-config", "/nonexistent/claimctl.json"}, "config:"},
		{"no driver", exitUsage, []string{"stats", "-dsn", "x", "-table", "jobs"}, "-driver is required"},
		{"bad identifier", exitUsage, []string{"stats", "-config", conf, "-table", "jobs; DROP TABLE jobs"}, "table description"},
		{"unknown table", exitSchema, []string{"unpark", "-config", conf, "-table", "no_such_table", "-scope", "42", "-yes"}, "no_such_table"},
		{"wrong column", exitSchema, []string{"reap", "-config", conf, "-attempts", "tries", "-scope", "42", "-yes"}, `no column "tries"`},
		{"wrong lease column", exitSchema, []string{"force-release", "-config", conf, "-lease-kind", "task", "-lease-table", "jobs", "-key", "1", "-yes"}, "lock_owner"},
		{"scope count", exitUsage, []string{"parked", "-config", conf, "-scope", "42,7"}, "1 scope column"},
		{"scope required", exitUsage, []string{"unpark", "-config", conf, "-yes"}, "-scope is required"},
		{"bad ids", exitUsage, []string{"unpark", "-config", conf, "-scope", "42", "-ids", "1,x", "-yes"}, `"x" is not an integer`},
		{"sqlite file missing", exitConnect, []string{"stats", "-driver", "sqlite", "-dsn", filepath.Join(t.TempDir(), "none.db"), "-table", "jobs"}, "no database file"},
		{"postgres down", exitConnect, []string{"stats", "-driver", "postgres", "-dsn", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", "-table", "jobs"}, "postgres"},
		{"mysql down", exitConnect, []string{"stats", "-driver", "mysql", "-dsn", "nobody@tcp(127.0.0.1:1)/none?timeout=2s", "-table", "jobs"}, "connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := ctl(t, "y\n", tc.args...)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, stderr, tc.msg)
		})
	}
	require.Equal(t, before, f.Count(t, "status = 'PENDING'"), "nothing changed")
	_, err := os.Stat(filepath.Join(t.TempDir(), "none.db"))
	require.True(t, os.IsNotExist(err))
}

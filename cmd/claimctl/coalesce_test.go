package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// A coalescer's tables on every engine: ddl -coalesce prints
// coalesce.CreateTablesDDL, which applies; backlog reports the dirty keys,
// the oldest unfolded change's age and the parked key with its fold's
// error, as the library reads them; parked and unpark -coalesce list and
// unpark the key; bad names and mixed descriptions are usage errors, a
// missing table a schema error.
func TestCoalesceBacklog(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := testengine.Open(t, e, 4)
			conn := []string{"-driver", e.Name, "-dsn", c.DSN}
			args := func(cmd string, more ...string) []string {
				return append(append([]string{cmd}, conn...), more...)
			}

			// ddl: the library's statements, applied as printed.
			code, out, stderr := ctl(t, "", args("ddl", "-coalesce", "-json")...)
			require.Equal(t, exitOK, code, stderr)
			var sections []ddlSection
			require.NoError(t, json.Unmarshal([]byte(out), &sections))
			require.Len(t, sections, 1)
			want, err := coalesce.CreateTablesDDL(c.Dialect, coalesce.Config{})
			require.NoError(t, err)
			require.Equal(t, want, sections[0].Statements)
			code, out, stderr = ctl(t, "", args("ddl", "-coalesce")...)
			require.Equal(t, exitOK, code, stderr)
			stmts := statements(out)
			require.Len(t, stmts, len(want))
			for _, s := range stmts {
				_, err := c.DB.ExecContext(ctx, s)
				require.NoError(t, err, s)
			}
			spec, err := coalesce.KeysTable(coalesce.Config{})
			require.NoError(t, err)
			keys, err := claim.New[struct{}](c.Dialect, claim.Config{ClaimTable: spec}, nil)
			require.NoError(t, err)
			require.NoError(t, keys.Verify(ctx), "the printed DDL made the keys table")
			missing, err := keys.MissingIndexes(ctx)
			require.NoError(t, err)
			require.Empty(t, missing)
			code, out, stderr = ctl(t, "", args("ddl", "-coalesce", "-coalesce-changes", "ops_changes", "-coalesce-keys", "ops_keys", "-coalesce-sources", "ops_sources")...)
			require.Equal(t, exitOK, code, stderr)
			require.Contains(t, out, "ops_changes")
			require.Contains(t, out, "ops_keys")
			require.Contains(t, out, "ops_sources")
			require.NotContains(t, out, coalesce.DefaultKeysTable)

			// An empty backlog.
			code, out, stderr = ctl(t, "", args("backlog", "-coalesce")...)
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, [][]string{
				{"KEYS", "TABLE", "DIRTY", "OLDEST", "UNFOLDED", "PENDING", "PROCESSING", "DONE", "PARKED"},
				{coalesce.DefaultKeysTable, "0", "-", "0", "0", "0", "0"},
			}, fields(out))

			co, before := coalesceState(t, c)
			code, out, stderr = ctl(t, "", args("backlog", "-coalesce", "-json")...)
			window := time.Since(before)
			require.Equal(t, exitOK, code, stderr)
			var b backlogOut
			require.NoError(t, json.Unmarshal([]byte(out), &b))
			require.Equal(t, coalesce.DefaultChangesTable, b.ChangesTable)
			require.Equal(t, coalesce.DefaultKeysTable, b.KeysTable)
			require.EqualValues(t, 1, b.Dirty, "k3; parked k2 is not dirty")
			require.Equal(t, [4]int64{1, 0, 1, 1}, [4]int64{b.Pending, b.Processing, b.Done, b.Parked})
			// k3's change is the oldest unfolded one (k2's is parked): at
			// least the pause after it, at most the window around it (with
			// a second for the clocks' rounding).
			require.GreaterOrEqual(t, b.OldestUnfoldedSeconds, 0.04)
			require.LessOrEqual(t, b.OldestUnfoldedSeconds, window.Seconds()+1)
			require.Len(t, b.ParkedKeys, 1)
			require.Equal(t, "k2", b.ParkedKeys[0].ID)
			require.EqualValues(t, 1, b.ParkedKeys[0].Attempts)
			require.Contains(t, b.ParkedKeys[0].Error, "ledger closed")
			require.False(t, b.MoreParked)

			code, out, stderr = ctl(t, "", args("backlog", "-coalesce")...)
			require.Equal(t, exitOK, code, stderr)
			got := fields(out)
			require.Equal(t, []string{coalesce.DefaultKeysTable, "1", "AGE", "1", "0", "1", "1"}, got[1])
			require.Empty(t, got[2])
			require.Equal(t, "parked", got[3][0])
			require.Equal(t, []string{"KEY", "ATTEMPTS", "LAST", "CLAIM", "AGO", "ERROR"}, got[4])
			require.Equal(t, "k2", got[5][0])
			require.Contains(t, out, "ledger closed")

			// The existing row commands on the keys table.
			code, out, stderr = ctl(t, "", args("parked", "-coalesce", "-json")...)
			require.Equal(t, exitOK, code, stderr)
			var parked []rowOut
			require.NoError(t, json.Unmarshal([]byte(out), &parked))
			require.Len(t, parked, 1)
			require.Equal(t, "k2", parked[0].ID)
			require.Contains(t, parked[0].Error, "ledger closed")
			code, out, stderr = ctl(t, "", args("unpark", "-coalesce", "-ids", "k2", "-reset-attempts", "-yes", "-json")...)
			require.Equal(t, exitOK, code, stderr)
			var res actionResult
			require.NoError(t, json.Unmarshal([]byte(out), &res))
			require.EqualValues(t, 1, res.Rows)
			dirty, _, err := co.Backlog(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 2, dirty, "k2 is dirty again, with k3")
			code, out, stderr = ctl(t, "", args("backlog", "-coalesce", "-json")...)
			require.Equal(t, exitOK, code, stderr)
			require.NoError(t, json.Unmarshal([]byte(out), &b))
			require.Equal(t, [2]int64{2, 0}, [2]int64{b.Dirty, b.Parked})
			require.Empty(t, b.ParkedKeys)

			// Usage errors change nothing and reach no database.
			for _, bad := range [][]string{
				args("backlog"),
				args("backlog", "-coalesce", "-table", "jobs"),
				args("backlog", "-coalesce", "-id", "change_key"),
				args("backlog", "-coalesce", "-coalesce-keys", "keys; DROP TABLE coalesce_changes"),
				args("backlog", "-coalesce", "-coalesce-keys", coalesce.DefaultChangesTable),
				args("stats", "-coalesce-keys", "ops_keys"),
				args("ddl", "-coalesce", "-coalesce-sources", "a.b.c"),
			} {
				code, _, stderr := ctl(t, "", bad...)
				require.Equal(t, exitUsage, code, "%v: %s", bad, stderr)
			}
			_, err = c.DB.ExecContext(ctx, "SELECT COUNT(*) FROM "+coalesce.DefaultChangesTable)
			require.NoError(t, err, "still there")

			// A coalescer whose keys table does not exist.
			code, _, stderr = ctl(t, "", args("backlog", "-coalesce", "-coalesce-keys", "no_such_keys")...)
			require.Equal(t, exitSchema, code, stderr)
			require.True(t, strings.Contains(stderr, "no_such_keys"), stderr)
			// Or whose changes table does not: the database's error.
			code, _, stderr = ctl(t, "", args("backlog", "-coalesce", "-coalesce-changes", "no_such_changes")...)
			require.Equal(t, exitFailed, code, stderr)
			require.Contains(t, stderr, "no_such_changes")
		})
	}
}

// coalesceState makes the coalescer of c's default tables (which exist)
// hold a folded key k1, a parked key k2 (its fold failed: "ledger
// closed") and a dirty key k3 whose change was accepted after before and
// is at least 50 ms old.
func coalesceState(t *testing.T, c *testengine.Conn) (co *coalesce.Coalescer, before time.Time) {
	t.Helper()
	ctx := context.Background()
	co, err := coalesce.New(c.Dialect, c.DB, coalesce.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	f, err := co.Flusher(coalesce.FlusherConfig{
		MaxAttempts: 1,
		Fold: func(_ context.Context, _ *sql.Tx, key string, _ []coalesce.Record) error {
			if key == "k2" {
				return errors.New("ledger closed")
			}
			return nil
		},
	})
	require.NoError(t, err)
	for _, k := range []string{"k1", "k2"} {
		_, err := co.Accept(ctx, coalesce.Change{Key: k, EventID: k + "-1", Payload: []byte("1")})
		require.NoError(t, err)
	}
	keys := f.Claimer()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := f.Flush(ctx)
		require.NoError(t, err)
		st, err := keys.TableStats(ctx)
		require.NoError(t, err)
		if st.Done == 1 && st.Failed == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "k1 not folded or k2 not parked: %+v", st)
		time.Sleep(5 * time.Millisecond)
	}
	before = time.Now()
	_, err = co.Accept(ctx, coalesce.Change{Key: "k3", EventID: "k3-1", Payload: []byte("1")})
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	return co, before
}

// The status page of a coalescer (-coalesce) on every engine: its page
// shows the keys table's counts and parked key with its error, and the
// backlog (dirty keys, oldest unfolded change), in the HTML and the JSON;
// unparking the key from the page makes it dirty again, which the next
// reading shows. A page without -coalesce has no backlog.
func TestServeCoalesce(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := testengine.Open(t, e, 4)
			require.NoError(t, coalesce.CreateTables(ctx, c.Dialect, c.DB, coalesce.Config{}))
			_, before := coalesceState(t, c)

			o, err := parseOptions("serve", []string{"-driver", e.Name, "-dsn", c.DSN, "-coalesce", "-action-token", testToken})
			require.NoError(t, err)
			require.NoError(t, o.Serve.check())
			src, err := openSource(ctx, &env{o: o, d: c.Dialect, db: c.DB})
			require.NoError(t, err)
			m := newMonitor(src, time.Second, slog.New(slog.DiscardHandler))
			s, err := newServer(m, testToken, true, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			m.sampleAll(ctx)
			window := time.Since(before)

			cl := &client{t: t, s: s}
			page := cl.visit(0)
			require.Contains(t, page, `<span class="n" id="b-dirty">1</span><span class="k">dirty keys</span>`)
			require.Contains(t, page, `id="b-oldest"`)
			require.Contains(t, page, "Coalescer backlog of "+coalesce.DefaultChangesTable+" and "+coalesce.DefaultKeysTable)
			var v pageView
			require.NoError(t, json.Unmarshal(cl.do(req{method: "GET", path: "/api/page/0"}).Body.Bytes(), &v))
			require.Equal(t, coalesce.DefaultKeysTable, v.Table)
			require.NotNil(t, v.Backlog)
			require.Equal(t, coalesce.DefaultChangesTable, v.Backlog.ChangesTable)
			require.EqualValues(t, 1, v.Backlog.Dirty)
			oldest, err := time.ParseDuration(v.Backlog.OldestUnfolded)
			require.NoError(t, err, v.Backlog.OldestUnfolded)
			require.GreaterOrEqual(t, oldest, 40*time.Millisecond)
			require.LessOrEqual(t, oldest, window+time.Second)
			require.Equal(t, [3]int64{1, 1, 1}, [3]int64{v.Counts.Pending, v.Counts.Done, v.Counts.Failed})
			require.Len(t, v.Parked, 1)
			require.Equal(t, "k2", v.Parked[0].ID)
			require.Contains(t, v.Parked[0].Error, "ledger closed")

			require.Equal(t, http.StatusSeeOther, cl.login(testToken).Code)
			cl.visit(0)
			w := cl.post("/api/page/0/unpark", `{"ids":["k2"],"reset_attempts":true}`, nil)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			m.sampleAll(ctx)
			require.NoError(t, json.Unmarshal(cl.do(req{method: "GET", path: "/api/page/0"}).Body.Bytes(), &v))
			require.EqualValues(t, 2, v.Backlog.Dirty, "k2 unparked is dirty again")
			require.Empty(t, v.Parked)

			// The same keys table described by hand: no backlog.
			o, err = parseOptions("serve", []string{"-driver", e.Name, "-dsn", c.DSN, "-table", coalesce.DefaultKeysTable,
				"-id", "change_key", "-id-kind", "text", "-attempts", "attempts", "-run-at", "run_at", "-error", "last_error"})
			require.NoError(t, err)
			src, err = openSource(ctx, &env{o: o, d: c.Dialect, db: c.DB})
			require.NoError(t, err)
			m = newMonitor(src, time.Second, slog.New(slog.DiscardHandler))
			s, err = newServer(m, "", true, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			m.sampleAll(ctx)
			plain := &client{t: t, s: s}
			require.NotContains(t, plain.visit(0), `id="backlog"`)
			body := plain.do(req{method: "GET", path: "/api/page/0"}).Body.String()
			require.Contains(t, body, `"backlog":null`)
		})
	}
}

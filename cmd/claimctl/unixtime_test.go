package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/internal/testkit/testtable"
	"github.com/claimlock/claimlock/tasklock"
)

// TestUnixSecondsTables: claimctl on the cron story's tables as a PHP shop
// has them (integer statuses, send_at and lock_at INT unix seconds),
// described by its config file as it describes them to the library: stats
// and stuck rows report ages on the database clock, a reap returns the
// stuck rows (and only after -older), and the task lease shows as locked
// with its stamp.
func TestUnixSecondsTables(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := testengine.Open(t, e, 4)
			exec := func(q string) {
				_, err := c.DB.ExecContext(ctx, q)
				require.NoError(t, err, q)
			}
			for _, def := range []testtable.Def{
				{Table: "xxx_task", PrimaryKey: []string{"id"}, Columns: []testtable.Column{
					{Name: "id", Type: testtable.Int, NotNull: true}, {Name: "status", Type: testtable.Int},
				}},
				{Table: "xxx_task_target", Columns: []testtable.Column{
					{Name: "id", Type: testtable.Serial}, {Name: "task_id", Type: testtable.Int, NotNull: true},
					{Name: "openid", Type: testtable.Text, Len: 64}, {Name: "status", Type: testtable.Int, NotNull: true, Default: ptr(dialect.StatusInt(0))},
					{Name: "cron_token", Type: testtable.Text, Len: 40},
				}},
			} {
				require.NoError(t, testtable.Create(ctx, c.Dialect, def))
			}
			exec("ALTER TABLE xxx_task ADD COLUMN lock_at INT NULL")
			exec("ALTER TABLE xxx_task_target ADD COLUMN send_at INT NULL")
			exec("INSERT INTO xxx_task (id, status) VALUES (42, 0)")
			for i := range 5 {
				exec(fmt.Sprintf("INSERT INTO xxx_task_target (task_id, openid) VALUES (42, 'o%d')", i))
			}
			spec := dialect.ClaimTable{Table: "xxx_task_target", Token: "cron_token", ClaimedAt: "send_at", ClaimedAtFormat: dialect.UnixSeconds,
				Scope: []string{"task_id"}, Columns: []string{"openid"},
				Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2), Failed: dialect.StatusInt(3)}
			cl, err := claim.New(c.Dialect, claim.Config{ClaimTable: spec, ScopeValues: []any{42}, BatchSize: 3},
				func(x *struct{ O string }) []any { return []any{&x.O} })
			require.NoError(t, err)
			b, err := cl.Claim(ctx) // 3 rows stuck: never acked
			require.NoError(t, err)
			require.Equal(t, 3, b.Len())
			k, err := tasklock.New(c.Dialect, tasklock.Config{TTL: time.Minute, Table: dialect.LeaseTable{
				Table: "xxx_task", Key: "id", LockedAt: "lock_at", LockedAtFormat: dialect.UnixSeconds, Status: "status"}})
			require.NoError(t, err)
			l, err := k.Acquire(ctx, 42)
			require.NoError(t, err)
			defer l.Release(ctx)

			driver := e.Name
			if driver == testengine.Postgres {
				driver = "postgres"
			}
			data, err := json.Marshal(map[string]any{
				"driver": driver, "dsn": c.DSN, "table": "xxx_task_target", "token": "cron_token", "claimed-at": "send_at",
				"claimed-at-format": "unix-seconds", "scope-cols": []string{"task_id"}, "statuses": []string{"0", "1", "2", "3"},
				"int-statuses": true, "lease-table": "xxx_task", "lease-kind": "task-no-owner", "lease-locked-at-format": "unix-seconds",
			})
			require.NoError(t, err)
			conf := filepath.Join(t.TempDir(), "claimctl.json")
			require.NoError(t, os.WriteFile(conf, data, 0o600))

			code, out, errOut := ctl(t, "", "stats", "-config", conf, "-scope", "42", "-json")
			require.Equal(t, exitOK, code, errOut)
			var stats []statsRow
			require.NoError(t, json.Unmarshal([]byte(out), &stats))
			require.Len(t, stats, 1)
			require.EqualValues(t, 2, stats[0].Pending)
			require.EqualValues(t, 3, stats[0].Processing)
			require.Less(t, stats[0].OldestProcessingSeconds, 5.0, "claimed just now")

			code, out, errOut = ctl(t, "", "stuck", "-config", conf, "-scope", "42", "-older", "1ms", "-json")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			var stuck []rowOut
			require.NoError(t, json.Unmarshal([]byte(out), &stuck))
			require.Len(t, stuck, 3)
			for _, r := range stuck {
				require.Equal(t, b.Token(), r.Token)
				require.Less(t, r.ClaimedAgeSeconds, 5.0)
			}
			// The table records tokens, not workers: the stuck list says so.
			code, out, errOut = ctl(t, "", "stuck", "-config", conf, "-scope", "42", "-older", "1ms")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			require.Contains(t, out, noWorkerNote)
			require.Equal(t, "unknown", stuck[0].Worker)
			code, out, errOut = ctl(t, "", "reap", "-config", conf, "-scope", "42", "-older", "1h", "-yes")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			require.Contains(t, out, "no row has been processing longer than 1h0m0s; nothing changed", "rows claimed just now are not an hour old")
			time.Sleep(2100 * time.Millisecond) // whole seconds: at least a second beyond -older
			code, out, errOut = ctl(t, "", "reap", "-config", conf, "-scope", "42", "-older", "1s", "-yes")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			require.Contains(t, out, "returned 3 row(s) to pending")

			code, out, errOut = ctl(t, "", "leases", "-config", conf, "-key", "42", "-json")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			var leases []leaseOut
			require.NoError(t, json.Unmarshal([]byte(out), &leases))
			require.Len(t, leases, 1)
			// Without an owner or expiry column the lease is identified by its
			// stamp, the lock time as an integer in the engine's unit
			// (milliseconds or microseconds): whole seconds here. Without
			// the holders' TTL its expiry is unknown; the lock time shows
			// as a time.
			require.Equal(t, "locked", leases[0].State)
			require.Equal(t, l.Owner(), leases[0].Owner)
			require.Equal(t, unknownHold, leases[0].Holder)
			stamp, err := strconv.ParseInt(leases[0].Owner, 10, 64)
			require.NoError(t, err)
			require.Positive(t, stamp)
			require.Zero(t, stamp%1000, "lock_at holds whole seconds")
			require.NotNil(t, leases[0].LockedAt)
			require.Zero(t, leases[0].LockedAt.Nanosecond(), "lock_at holds whole seconds")
			require.WithinDuration(t, time.Now(), *leases[0].LockedAt, 30*time.Second)
			require.Nil(t, leases[0].ExpiresAt)

			// With the TTL the workers use (the config's "lease-ttl", in
			// the seconds a PHP config has), the expiry is the lock time
			// plus it, on the database clock; every holder is listed.
			code, out, errOut = ctl(t, "", "leases", "-config", conf, "-lease-ttl", "300")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			row := fields(out)[1]
			require.Equal(t, []string{"42", "held", "unknown", "(no", "owner", "column)", "0", timeText(leases[0].LockedAt)}, row[:8])
			require.Equal(t, timeText(ptr(leases[0].LockedAt.Add(5*time.Minute))), row[8])
			require.NotContains(t, out, strconv.FormatInt(stamp, 10), "no raw stamp")

			// A parked row of a table without an error column says it has
			// none, rather than showing an empty error.
			b2, err := cl.Claim(ctx)
			require.NoError(t, err)
			require.NoError(t, b2.Fail(ctx, b2.IDs()[0], claim.Park(errors.New("bounced"))))
			require.NoError(t, b2.AckAll(ctx))
			code, out, errOut = ctl(t, "", "parked", "-config", conf, "-scope", "42")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			require.Equal(t, noErrorColumn, strings.Join(fields(out)[1][3:], " "))
			code, out, errOut = ctl(t, "", "parked", "-config", conf, "-scope", "42", "-json")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			var parked []rowOut
			require.NoError(t, json.Unmarshal([]byte(out), &parked))
			require.Len(t, parked, 1)
			require.Equal(t, "table has no error column", parked[0].Note)

			// The status page says the same: the lock time and expiry as
			// times, the holder unknown, the error column absent.
			o, err := parseOptions("serve", []string{"-config", conf, "-scope", "42", "-lease-ttl", "5m"})
			require.NoError(t, err)
			src, err := openSource(ctx, &env{o: o, d: c.Dialect})
			require.NoError(t, err)
			m := newMonitor(src, time.Second, slog.New(slog.DiscardHandler))
			m.sampleAll(ctx)
			v := m.view(0)
			require.Len(t, v.Parked, 1)
			require.Equal(t, noErrorColumn, v.Parked[0].Error)
			require.Len(t, v.Leases, 1)
			require.Equal(t, leaseOutView{Key: "42", State: "held", Owner: l.Owner(), Holder: unknownHold, LockedAt: timeText(leases[0].LockedAt),
				ExpiresAt: timeText(ptr(leases[0].LockedAt.Add(5 * time.Minute))), Remaining: v.Leases[0].Remaining}, v.Leases[0])

			// unpark warns when the scope's task is finished by the task
			// table's status (-lease-done): nothing would claim the rows.
			code, out, errOut = ctl(t, "n\n", "unpark", "-config", conf, "-scope", "42", "-lease-done", "2,3")
			require.Equal(t, exitRefused, code, "%s%s", out, errOut)
			require.NotContains(t, out, "Warning", "task 42 is not finished")
			exec("UPDATE xxx_task SET status = 2 WHERE id = 42")
			code, out, errOut = ctl(t, "n\n", "unpark", "-config", conf, "-scope", "42", "-lease-done", "2,3")
			require.Equal(t, exitRefused, code, "%s%s", out, errOut)
			require.Contains(t, out, "Warning: task 42 of xxx_task is finished (status = 2): no run of it will claim the unparked rows")
			code, out, errOut = ctl(t, "", "unpark", "-config", conf, "-scope", "42", "-lease-done", "2", "-yes", "-json")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			var res actionResult
			require.NoError(t, json.Unmarshal([]byte(out), &res))
			require.EqualValues(t, 1, res.Rows)
			require.Contains(t, res.Warning, "task 42 of xxx_task is finished")

			// The status page's unpark says the same in its reply.
			b3, err := cl.Claim(ctx)
			require.NoError(t, err)
			require.NoError(t, b3.Fail(ctx, b3.IDs()[0], claim.Park(errors.New("bounced"))))
			require.NoError(t, b3.AckAll(ctx))
			o, err = parseOptions("serve", []string{"-config", conf, "-scope", "42", "-lease-done", "2,3", "-action-token", testToken})
			require.NoError(t, err)
			src, err = openSource(ctx, &env{o: o, d: c.Dialect})
			require.NoError(t, err)
			m = newMonitor(src, time.Second, slog.New(slog.DiscardHandler))
			srv, err := newServer(m, testToken, true, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			m.sampleAll(ctx)
			page := &client{t: t, s: srv}
			page.visit(0)
			require.Equal(t, http.StatusSeeOther, page.login(testToken).Code)
			page.visit(0)
			w := page.post("/api/page/0/unpark", `{"all":true}`, nil)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			var reply actionReply
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reply))
			require.EqualValues(t, 1, reply.Rows)
			require.Contains(t, reply.Message, "unparked 1 row(s). Warning: task 42 of xxx_task is finished (status = 2)")

			code, _, errOut = ctl(t, "", "unpark", "-config", conf, "-scope", "42", "-lease-done", "2", "-lease-status", "-", "-yes")
			require.Equal(t, exitUsage, code)
			require.Contains(t, errOut, "-lease-done needs the lease table's status column")
		})
	}
}

func ptr[T any](v T) *T { return &v }

package claim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// seedTables creates the cron story's tables as a PHP shop has them:
// xxx_task(id, status INT, lock_at INT) and xxx_task_target(id, task_id,
// openid, status INT, cron_token VARCHAR(40), send_at INT), the times
// integer unix seconds, and n targets of task 42. timeType is the SQL type
// of lock_at and send_at.
func seedTables(t *testing.T, e *env, n int, timeType string) (task, target string) {
	t.Helper()
	ctx := context.Background()
	task, target = tableName("xxx_task"), tableName("xxx_task_target")
	for _, def := range []store.TableDef{
		{Table: task, PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
			{Name: "id", Type: store.TypeInt, NotNull: true},
			{Name: "status", Type: store.TypeInt, NotNull: true, Default: ptrStatus(dialect.StatusInt(0))},
		}},
		{Table: target, Columns: []store.ColumnDef{
			{Name: "id", Type: store.TypeSerial},
			{Name: "task_id", Type: store.TypeInt, NotNull: true},
			{Name: "openid", Type: store.TypeText, Len: 64, NotNull: true},
			{Name: "status", Type: store.TypeInt, NotNull: true, Default: ptrStatus(dialect.StatusInt(0))},
			{Name: "cron_token", Type: store.TypeText, Len: 40},
		}},
	} {
		ddl, err := store.CreateTableDDL(e.d, def)
		require.NoError(t, err)
		require.NoError(t, store.ExecDDL(ctx, e.d, ddl))
	}
	e.exec(t, fmt.Sprintf("ALTER TABLE %s ADD COLUMN lock_at %s NULL", task, timeType))
	e.exec(t, fmt.Sprintf("ALTER TABLE %s ADD COLUMN send_at %s NULL", target, timeType))
	e.exec(t, "INSERT INTO "+task+" (id) VALUES (42)")
	insertRows(t, e, target, []string{"task_id", "openid"}, n, func(i int) []any { return []any{42, fmt.Sprintf("openid-%04d", i)} })
	return task, target
}

func ptrStatus(s dialect.Status) *dialect.Status { return &s }

// seedConfig describes xxx_task_target: integer statuses 0 pending, 1
// sending, 2 sent, 3 failed; send_at holds the claim time as unix seconds.
func seedConfig(target string, s dialect.Strategy) claim.Config {
	return claim.Config{
		ClaimTable: dialect.ClaimTable{
			Table: target, Token: "cron_token", ClaimedAt: "send_at", ClaimedAtFormat: dialect.UnixSeconds,
			Columns: []string{"openid"}, Scope: []string{"task_id"},
			Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2), Failed: dialect.StatusInt(3),
		},
		ScopeValues: []any{42}, RequireScope: true, BatchSize: 20, Strategy: s,
		ReapTimeout: 3 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
	}
}

// TestCronStoryUnixTimes runs the cron story on the seed's schema as it
// is, with INT unix-second times: four cron runs share task 42 under its
// task lease (lock_at INT, no owner column), each releasing the task lease
// early as the story's job did, claiming batches of targets and sending
// them, some for longer than the reap timeout (kept alive by heartbeats
// that write whole seconds); one run crashes with a batch claimed, and a
// reaper returns it. Every target is sent exactly once, no two sends of a
// target overlap, and no live batch is reaped.
func TestCronStoryUnixTimes(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		const targets = 200
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		task, tgt := seedTables(t, e, targets, "INT")
		cfg := seedConfig(tgt, s)
		c, err := claim.New(e.d, cfg, func(x *target) []any { return []any{&x.OpenID} })
		require.NoError(t, err)
		locker, err := tasklock.New(e.d, tasklock.Config{
			Table: dialect.LeaseTable{Table: task, Key: "id", LockedAt: "lock_at", LockedAtFormat: dialect.UnixSeconds, Status: "status"},
			TTL:   3 * time.Second,
		})
		require.NoError(t, err)
		reaper, err := zombie.New(e.d, cfg, zombie.Config{Timeout: cfg.ReapTimeout})
		require.NoError(t, err)
		reapCtx, stopReaper := context.WithCancel(ctx)
		reaped := make(chan error, 1)
		go func() { reaped <- reaper.Run(reapCtx, 200*time.Millisecond) }()

		var mu sync.Mutex
		sends, inFlight := map[string]int{}, map[string]int{}
		var overlaps, lost atomic.Int64
		send := func(bctx context.Context, openid string, d time.Duration) error {
			mu.Lock()
			inFlight[openid]++
			if inFlight[openid] > 1 {
				overlaps.Add(1)
			}
			mu.Unlock()
			defer func() { mu.Lock(); inFlight[openid]--; mu.Unlock() }()
			select {
			case <-time.After(d):
			case <-bctx.Done():
				return context.Cause(bctx)
			}
			mu.Lock()
			sends[openid]++
			mu.Unlock()
			return nil
		}
		// crashed claims one batch and never touches it again.
		crash, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, cfg.BatchSize, crash.Len())

		run := func(long bool) {
			for ctx.Err() == nil {
				lease, err := locker.Acquire(ctx, 42)
				if errors.Is(err, dialect.ErrLeaseHeld) {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				require.NoError(t, err)
				b, err := c.Claim(ctx)
				require.NoError(t, err)
				_, err = lease.Release(ctx) // the story's early release
				require.NoError(t, err)
				if b.Len() == 0 {
					st, err := c.Stats(ctx)
					require.NoError(t, err)
					if st.Pending == 0 && st.Processing == 0 {
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				stop := b.KeepAlive(context.WithoutCancel(ctx))
				bctx, bcancel := b.Context(ctx)
				d := 5 * time.Millisecond
				if long {
					d = 250 * time.Millisecond // 20 rows: 5 s, beyond the 3 s reap timeout
				}
				var done []any
				for _, r := range b.Rows() {
					if send(bctx, r.Value.OpenID, d) == nil {
						done = append(done, r.ID)
					}
				}
				bcancel()
				if err := b.Ack(ctx, done...); err != nil {
					lost.Add(1)
					t.Errorf("ack of a live batch: %v", err)
				}
				stop()
			}
		}
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() { run(i == 0 || rand.IntN(2) == 0) })
		}
		wg.Wait()
		stopReaper()
		if err := <-reaped; err != nil {
			require.ErrorIs(t, err, context.Canceled, "the reaper ends with its context")
		}

		require.Zero(t, overlaps.Load(), "two sends of one target overlapped")
		require.Zero(t, lost.Load(), "a live batch lost its rows")
		require.Len(t, sends, targets, "every target is sent")
		for openid, n := range sends {
			require.Equal(t, 1, n, "%s sent %d times", openid, n)
		}
		st, err := c.Stats(ctx)
		require.NoError(t, err)
		require.EqualValues(t, targets, st.Done)
		// The crashed run's batch was reaped and sent by the others; its
		// late ack changes nothing.
		require.ErrorIs(t, crash.AckAll(ctx), dialect.ErrClaimLost)
		var sendAt int64
		require.NoError(t, e.raw.QueryRowContext(ctx, "SELECT MAX(send_at) FROM "+tgt).Scan(&sendAt))
		require.InDelta(t, time.Now().Unix(), sendAt, 120, "send_at holds unix seconds")
	})
}

// TestWrongTimeColumnRefusedBeforeAnyRow: a claimer on a table whose
// claimed-at column is a DATE refuses its first claim with a permanent
// error naming the column, and no row changes (the trial's reaper returned
// rows claimed two seconds before under a 15 s timeout); an INT column not
// described as unix time (but on SQLite, whose own convention it is) and a
// VARCHAR described as unix time are refused the same way.
func TestWrongTimeColumnRefusedBeforeAnyRow(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		for _, tc := range []struct {
			typ    string
			format dialect.TimeFormat
			says   string
		}{{"DATE", dialect.TimeNative, "send_at"}, {"INT", dialect.TimeNative, "UnixSeconds"}, {"VARCHAR(40)", dialect.UnixSeconds, "integer"}} {
			if tc.typ == "INT" && e.kind == testengine.SQLite {
				continue // integer milliseconds are SQLite's own convention
			}
			_, tgt := seedTables(t, e, 3, tc.typ)
			cfg := seedConfig(tgt, s)
			cfg.ClaimedAtFormat = tc.format
			c, err := claim.New(e.d, cfg, func(x *target) []any { return []any{&x.OpenID} })
			require.NoError(t, err)
			_, err = c.Claim(ctx)
			require.Error(t, err, "%s", tc.typ)
			require.True(t, dialect.IsPermanent(err), "%s: %v", tc.typ, err)
			require.ErrorContains(t, err, "send_at")
			require.ErrorContains(t, err, tc.says)
			var pending int
			require.NoError(t, e.raw.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tgt+" WHERE status = 0 AND cron_token IS NULL AND send_at IS NULL").Scan(&pending))
			require.Equal(t, 3, pending, "%s: no row changed", tc.typ)
		}
	})
}

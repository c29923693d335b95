package claim_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// runIdle starts c.Run with a poll interval of an hour, so that only a
// wake-up can make its idle loops claim again within the test, and waits
// until every loop made its first (empty) claim. It returns the rows the
// handler saw, in order, and stops Run at cleanup.
func runIdle(t *testing.T, c *claim.Claimer[job], empties *atomic.Int64, workers int) (seen func() []int64) {
	t.Helper()
	var mu sync.Mutex
	var got []int64
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- c.Run(ctx, claim.WorkerConfig[job]{
			Workers: workers, PollMin: time.Hour, PollMax: time.Hour,
			Handler: func(_ context.Context, r claim.Row[job]) error {
				mu.Lock()
				got = append(got, r.ID.(int64))
				mu.Unlock()
				return nil
			},
		})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-errc)
	})
	waitFor(t, "every loop idle", func() bool { return empties.Load() >= int64(workers) })
	return func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int64(nil), got...)
	}
}

func TestWakeMakesIdleLoopsClaim(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		var empties atomic.Int64
		c, cfg := jobSetup(t, e, s, 0, func(cfg *claim.Config) {
			onClaim(cfg, func(n int) {
				if n == 0 {
					empties.Add(1)
				}
			})
		})
		seen := runIdle(t, c, &empties, 4)

		// One row: one wake-up, one claim.
		insertRows(t, e, cfg.Table, []string{"task_id", "payload"}, 1, func(int) []any { return []any{42, "x"} })
		c.Wake()
		waitFor(t, "the woken loop to process the row", func() bool { return len(seen()) == 1 })

		// A backlog of several batches: one wake-up brings loops back one
		// full batch after another until every row is processed.
		insertRows(t, e, cfg.Table, []string{"task_id", "payload"}, 35, func(int) []any { return []any{42, "y"} })
		c.Wake()
		waitFor(t, "the backlog to be processed", func() bool { return len(seen()) == 36 })
		waitFor(t, "the acks", func() bool {
			st, err := c.Stats(context.Background())
			require.NoError(t, err)
			return st.Done == 36
		})
	})
}

// TestWakeWithoutIdleLoopIsRemembered: a Wake while no loop is idle makes
// the next loop to go idle claim again at once. The row arrives only after
// the loop's first claim found nothing (in the observer of that claim, before
// the loop goes idle), so only the remembered wake-up can bring it to the
// loop before the hour-long poll interval.
func TestWakeWithoutIdleLoopIsRemembered(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		var empties atomic.Int64
		var inserted atomic.Bool
		insertErr := make(chan error, 1)
		var table string
		c, _ := jobSetup(t, e, s, 0, func(cfg *claim.Config) {
			table = cfg.Table
			onClaim(cfg, func(n int) {
				if n > 0 {
					return
				}
				if inserted.CompareAndSwap(false, true) {
					_, err := e.raw.ExecContext(context.Background(), e.rebind("INSERT INTO "+table+" (task_id, payload) VALUES (?, ?)"), 42, "x")
					insertErr <- err
				}
				empties.Add(1)
			})
		})
		c.Wake() // no loop runs yet
		seen := runIdle(t, c, &empties, 1)
		require.NoError(t, <-insertErr)
		waitFor(t, "the row, claimed at once by the remembered wake-up", func() bool { return len(seen()) == 1 })
	})
}

// On PostgreSQL with the dialect's listener running, rows made pending by
// another process (an application's insert that notifies in its
// transaction, a release by another claimer) wake an idle Run whose poll
// interval is an hour.
func TestNotifyWakesIdleRunOfAnotherProcess(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		if en.kind != testengine.Postgres && en.kind != testengine.PostgresStdlib {
			continue
		}
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := en.dsn(t)
			here, there := openProcess(t, en, dsn), openProcess(t, en, dsn)

			pd := here.d.(*postgres.Dialect)
			testengine.Listen(t, pd)

			// The listener connects before Run subscribes, so its first
			// connection wakes nobody.
			waitFor(t, "the listener", pd.Listening)
			var empties atomic.Int64
			c, cfg := jobSetup(t, here, here.d.Capabilities().PreferredStrategy, 0, func(cfg *claim.Config) {
				onClaim(cfg, func(n int) {
					if n == 0 {
						empties.Add(1)
					}
				})
			})
			seen := runIdle(t, c, &empties, 4)
			waitFor(t, "the listener on the claimer's channel", pd.Listening)
			// Listening on a channel a claimer subscribed to while the
			// listener ran wakes that claimer once (a notification sent
			// before the LISTEN was lost): one more claim, empty.
			waitFor(t, "the wake-up of the new channel", func() bool { return empties.Load() >= 5 })
			idle := empties.Load()

			// An insert by another process, notified in its transaction.
			tx, err := there.raw.BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, there.rebind("INSERT INTO "+cfg.Table+" (task_id, payload) VALUES (?, ?)"), 42, "x")
			require.NoError(t, err)
			q, args, err := postgres.NotifyStatement(cfg.ClaimTable, cfg.ScopeValues...)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, q, args...)
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
			waitFor(t, "the notified row", func() bool { return len(seen()) == 1 })
			// The loop that processed it claims once more and goes idle.
			waitFor(t, "idle loops", func() bool { return empties.Load() > idle })

			// A row another process's claimer claimed and released.
			insertRows(t, there, cfg.Table, []string{"task_id", "payload"}, 1, func(int) []any { return []any{42, "y"} })
			oc, err := claim.New(there.d, cfg, jobFields)
			require.NoError(t, err)
			b, err := oc.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, b.Len())
			n, err := b.Release(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			waitFor(t, "the released row", func() bool { return len(seen()) == 2 })
		})
	}
}

// NotifyPending wakes the OnNotify subscribers of the same table and scope
// in other processes (PostgreSQL, while their listener runs), also when
// the caller's context ended right after its commit; a stopped
// subscription hears nothing more, and another scope's subscriber nothing
// at all. Where the dialect has no notifications both do nothing.
func TestNotifyPendingAndOnNotify(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := en.dsn(t)
			here := openProcess(t, en, dsn)
			c, cfg := jobSetup(t, here, here.d.Capabilities().PreferredStrategy, 0, nil)
			if en.kind != testengine.Postgres && en.kind != testengine.PostgresStdlib {
				require.NoError(t, c.NotifyPending(ctx), "no notifications: nothing to send")
				var woken atomic.Int64
				stop := c.OnNotify(func() { woken.Add(1) })
				stop()
				require.Zero(t, woken.Load())
				return
			}
			there := openProcess(t, en, dsn)
			pd := there.d.(*postgres.Dialect)
			testengine.Listen(t, pd)
			waitFor(t, "the listener", pd.Listening)
			oc, err := claim.New(there.d, cfg, jobFields)
			require.NoError(t, err)
			otherCfg := cfg
			otherCfg.ScopeValues = []any{7}
			other, err := claim.New(there.d, otherCfg, jobFields)
			require.NoError(t, err)

			var kept, stopped, otherScope atomic.Int64
			stopKept := oc.OnNotify(func() { kept.Add(1) })
			t.Cleanup(stopKept)
			stopStopped := oc.OnNotify(func() { stopped.Add(1) })
			stopOther := other.OnNotify(func() { otherScope.Add(1) })
			t.Cleanup(stopOther)
			require.NotNil(t, oc.OnNotify(nil), "a nil wake subscribes nothing")
			// The listener connected before these subscriptions: its first
			// connection's wake-up reached none of them, but listening on
			// their new channel wakes once those subscribed before the
			// LISTEN (a notification sent before it was lost): the first
			// always, the others if the LISTEN came after them.
			// The listener dispatches in one goroutine, so once the first
			// notification reached kept, that wake-up is over for all.
			waitFor(t, "the listener on the claimer's channel", pd.Listening)
			waitFor(t, "the new channel's wake-up", func() bool { return kept.Load() == 1 })
			require.NoError(t, c.NotifyPending(ctx))
			waitFor(t, "the first notification", func() bool { return kept.Load() == 2 })
			require.Contains(t, []int64{1, 2}, stopped.Load(), "woken by the notification, and perhaps by the LISTEN")
			require.LessOrEqual(t, otherScope.Load(), int64(1), "woken by the LISTEN at most")
			kept.Store(0)
			stopped.Store(0)
			otherScope.Store(0)

			// A caller whose context is already over (its request answered
			// right after the commit) still wakes the other process; it is
			// told that it did not wait for the notification.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			require.ErrorIs(t, c.NotifyPending(cctx), context.Canceled)
			waitFor(t, "the notification of an ended context", func() bool { return kept.Load() == 1 && stopped.Load() == 1 })

			stopStopped()
			require.NoError(t, c.NotifyPending(ctx))
			waitFor(t, "the third notification", func() bool { return kept.Load() == 2 })
			require.EqualValues(t, 1, stopped.Load(), "a stopped subscription hears nothing more")
			require.Zero(t, otherScope.Load(), "another scope's subscriber is not woken")
		})
	}
}

// openProcess opens en's database at dsn as another process would: a pool
// and a dialect of its own, closed when the test ends.
func openProcess(t *testing.T, en engine, dsn string) *env {
	t.Helper()
	e, closeFn, err := openDSN(context.Background(), en.kind, dsn, dialect.Options{})
	require.NoError(t, err)
	t.Cleanup(closeFn)
	return e
}

package zombie_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/zombie"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSweepBounded: stale rows come back in bounded statements; fresh
// claims stay; the dead batch's ack is lost.
func TestSweepBounded(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		cc := jobsConfig(5)
		cs := createTable(t, e, cc, false)
		insertRows(t, e, cc.Table, "PENDING", 10, 100)
		c, err := claim.New[struct{}](e.d, cc, nil)
		require.NoError(t, err)

		dead, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 5, dead.Len())
		// The dead claim was made an hour ago; the fresh one stays fresh
		// for the sweep's minute, however slow the machine.
		back := map[string]string{
			testengine.SQLite:   "claimed_at - 3600000",
			testengine.MySQL:    "claimed_at - INTERVAL 1 HOUR",
			testengine.Postgres: "claimed_at - interval '1 hour'",
		}[e.kind]
		e.exec(t, fmt.Sprintf("UPDATE %s SET claimed_at = %s WHERE token = ?", cc.Table, back), dead.Token())
		c3 := cc
		c3.BatchSize = 3
		c3c, err := claim.New[struct{}](e.d, c3, nil)
		require.NoError(t, err)
		fresh, err := c3c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, fresh.Len())

		var swept []zombie.Result
		r, err := zombie.New(e.d, cc, zombie.Config{Timeout: time.Minute, BatchLimit: 2,
			Observer: sweeps(func(r zombie.Result) { swept = append(swept, r) }, nil)})
		require.NoError(t, err)
		res, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 5, res.Returned)
		require.Zero(t, res.Parked)
		require.Equal(t, 6, res.Statements, "5 rows with BatchLimit 2: 2 + 2 + 1, each call a park and a return statement")
		require.Positive(t, res.Elapsed)
		require.Equal(t, []zombie.Result{res}, swept)

		st, err := cs.Stats(ctx, nil)
		require.NoError(t, err)
		require.EqualValues(t, 7, st.Pending)
		require.EqualValues(t, 3, st.Processing)

		// The dead worker's late ack must not complete re-claimable rows.
		err = dead.AckAll(ctx)
		require.ErrorIs(t, err, dialect.ErrClaimLost)
		var lost *claim.LostError
		require.ErrorAs(t, err, &lost)
		require.Len(t, lost.IDs, 5)
		require.NoError(t, fresh.AckAll(ctx))

		// Nothing is stale any more: an immediate sweep does nothing.
		res, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, zombie.Result{Statements: 2, Elapsed: res.Elapsed}, res, "a park and a return statement")
	})
}

// TestSweepScoped: a reaper built from a scoped claim config sweeps that
// scope only, by default, leaving other scopes' stale rows alone; AllScopes
// (or an unscoped claim config) sweeps the whole table.
func TestSweepScoped(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		base := jobsConfig(10)
		base.Scope = []string{"task_id"}
		createTable(t, e, scopedTo(base, 1), false)
		for _, task := range []int{1, 2} {
			for range 4 {
				e.exec(t, fmt.Sprintf("INSERT INTO %s (task_id, status) VALUES (?, ?)", base.Table), task, "PENDING")
			}
		}
		// claimAll claims the 4 rows of each task and lets them go stale.
		claimAll := func(tasks ...int) {
			t.Helper()
			for _, task := range tasks {
				c, err := claim.New[struct{}](e.d, scopedTo(base, task), nil)
				require.NoError(t, err)
				b, err := c.Claim(ctx)
				require.NoError(t, err)
				require.Equal(t, 4, b.Len())
			}
			time.Sleep(150 * time.Millisecond)
		}
		sweep := func(cc claim.Config, cfg zombie.Config) int64 {
			t.Helper()
			cfg.Timeout = 50 * time.Millisecond
			r, err := zombie.New(e.d, cc, cfg)
			require.NoError(t, err)
			res, err := r.Sweep(ctx)
			require.NoError(t, err)
			return res.Returned
		}

		// The default follows the claim config: task 1's reaper takes
		// task 1's rows, and task 2's stay processing.
		claimAll(1, 2)
		require.EqualValues(t, 4, sweep(scopedTo(base, 1), zombie.Config{}))
		require.EqualValues(t, 0, sweep(scopedTo(base, 1), zombie.Config{}), "task 2's rows are not task 1's reaper's")

		// AllScopes sweeps every task's rows.
		claimAll(1) // task 2's are still stale
		require.EqualValues(t, 8, sweep(scopedTo(base, 1), zombie.Config{AllScopes: true}))

		// So does a reaper of an unscoped claim config.
		claimAll(1, 2)
		unscoped := base
		unscoped.Scope = nil
		require.EqualValues(t, 8, sweep(unscoped, zombie.Config{}))
	})
}

// scopedTo returns base claiming task's rows only.
func scopedTo(base claim.Config, task int) claim.Config {
	base.ScopeValues = []any{task}
	return base
}

// TestPoisonRowParked: a row whose worker dies every time (claimed, never
// acked, reaped, again) ends FAILED after MaxAttempts, with its attempts,
// whether the reaper's config or the claim config (the table's rule,
// stated once) says MaxAttempts.
func TestPoisonRowParked(t *testing.T) {
	t.Parallel()
	for _, fromClaim := range []bool{false, true} {
		t.Run(map[bool]string{false: "reaper config", true: "claim config"}[fromClaim], func(t *testing.T) {
			t.Parallel()
			testPoisonRowParked(t, fromClaim)
		})
	}
}

func testPoisonRowParked(t *testing.T, fromClaim bool) {
	forEachEngine(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		cc := jobsConfig(1)
		cs := createTable(t, e, cc, false)
		insertRows(t, e, cc.Table, "PENDING", 1, 10)
		const maxAttempts = 3
		cfg := zombie.Config{Timeout: 50 * time.Millisecond}
		cc.MaxAttempts = maxAttempts
		c, err := claim.New[struct{}](e.d, cc, nil)
		require.NoError(t, err)
		r, err := zombie.New(e.d, cc, cfg)
		require.NoError(t, err)
		for attempt := 1; ; attempt++ {
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			if b.Len() == 0 {
				require.Equal(t, maxAttempts+1, attempt, "the parked row is never claimed again")
				break
			}
			require.LessOrEqual(t, attempt, maxAttempts)
			// The handler "crashes": the batch is abandoned.
			time.Sleep(120 * time.Millisecond)
			res, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, res.Statements, "park, then return")
			if attempt < maxAttempts {
				require.Equal(t, zombie.Result{Returned: 1, Statements: 2, Elapsed: res.Elapsed}, res)
			} else {
				require.Equal(t, zombie.Result{Parked: 1, Statements: 2, Elapsed: res.Elapsed}, res)
			}
		}
		status, attempts := rowState(t, e, cc.Table, 1)
		require.Equal(t, "FAILED", status)
		require.EqualValues(t, maxAttempts, attempts)
		st, err := cs.Stats(ctx, nil)
		require.NoError(t, err)
		require.EqualValues(t, 1, st.Failed)
		require.Zero(t, st.Pending+st.Processing+st.Done)
	})
}

// TestHeartbeatNeverReaped: a worker heartbeating with Batch.KeepAlive keeps
// its rows against a reaper sweeping every few ms whose timeout is a few
// heartbeat intervals; a worker that stops heartbeating loses them, and its
// late ack gets ErrClaimLost without touching the new owner's work.
func TestHeartbeatNeverReaped(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		cc := jobsConfig(5)
		cs := createTable(t, e, cc, false)
		insertRows(t, e, cc.Table, "PENDING", 10, 100)
		const heartbeat, timeout = 100 * time.Millisecond, 400 * time.Millisecond
		cc.HeartbeatInterval = heartbeat
		c, err := claim.New[struct{}](e.d, cc, nil)
		require.NoError(t, err)

		var returned, nSweeps atomic.Int64
		var sweepErrs []error
		var mu sync.Mutex
		r, err := zombie.New(e.d, cc, zombie.Config{Timeout: timeout, Observer: sweeps(func(res zombie.Result) { returned.Add(res.Returned); nSweeps.Add(1) }, func(err error) { mu.Lock(); sweepErrs = append(sweepErrs, err); mu.Unlock() })})
		require.NoError(t, err)

		live, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 5, live.Len())
		stop := live.KeepAlive(ctx)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx, 5*time.Millisecond) }()
		time.Sleep(4 * timeout) // the claim is 4 timeouts old by now
		cancel()
		require.NoError(t, <-done)
		require.Zero(t, returned.Load(), "a heartbeating worker's rows were reaped")
		require.Greater(t, nSweeps.Load(), int64(10))
		require.Empty(t, sweepErrs)
		require.NoError(t, live.AckAll(ctx))
		stop()

		// A late worker: no heartbeat, its rows go stale and are reaped.
		late, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 5, late.Len())
		time.Sleep(timeout + 100*time.Millisecond)
		res, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 5, res.Returned)

		next, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, late.IDs(), next.IDs(), "reaped rows are claimed again")
		err = late.AckAll(ctx)
		require.ErrorIs(t, err, dialect.ErrClaimLost)
		var lost *claim.LostError
		require.True(t, errors.As(err, &lost))
		require.ElementsMatch(t, late.IDs(), lost.IDs)
		require.NoError(t, next.AckAll(ctx), "the late ack did not touch the new owner's rows")

		st, err := cs.Stats(ctx, nil)
		require.NoError(t, err)
		require.EqualValues(t, 10, st.Done)
	})
}

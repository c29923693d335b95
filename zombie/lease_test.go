package zombie_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// TestLeaseReaper: expired leases are cleared in bounded statements, live
// ones kept, and fences keep increasing after a reap.
func TestLeaseReaper(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		table := fmt.Sprintf("leases_%d", tableSeq.Add(1))
		require.NoError(t, tasklock.CreateTable(ctx, e.d, table))
		// The short TTL must outlast one Acquire statement on a loaded CI
		// machine (the 1,000,000-row plan tests run beside this one).
		short, err := tasklock.New(e.d, tasklock.Config{Table: tasklock.KeyTable(table), TTL: 1500 * time.Millisecond})
		require.NoError(t, err)
		long, err := tasklock.New(e.d, tasklock.Config{Table: tasklock.KeyTable(table), TTL: time.Minute})
		require.NoError(t, err)

		fences := map[string]int64{}
		for _, k := range []string{"a", "b", "c"} {
			l, err := short.Acquire(ctx, k) // its holder "dies": no renewals
			require.NoError(t, err)
			fences[k] = l.Fence()
		}
		live, err := long.Acquire(ctx, "live")
		require.NoError(t, err)
		defer live.Release(context.Background())
		time.Sleep(2 * time.Second)

		var results []zombie.Result
		r, err := zombie.NewLeaseReaper(e.d, tasklock.KeyTable(table), zombie.LeaseConfig{BatchLimit: 2,
			Observer: sweeps(func(res zombie.Result) { results = append(results, res) }, nil)})
		require.NoError(t, err)
		n, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 3, n)
		require.Len(t, results, 1)
		require.Equal(t, 2, results[0].Statements, "3 leases with BatchLimit 2: 2 + 1")
		require.EqualValues(t, 3, results[0].Returned)

		for k, f := range fences {
			st, err := long.Inspect(ctx, k)
			require.NoError(t, err)
			require.True(t, st.Exists, "the row stays")
			require.Empty(t, st.Owner, "expired lease %s cleared", k)
			require.Equal(t, f, st.Fence)
		}
		st, err := long.Inspect(ctx, "live")
		require.NoError(t, err)
		require.Equal(t, live.Owner(), st.Owner, "the live lease is kept")
		require.NoError(t, live.Err())

		// Fences keep increasing across the reap.
		again, err := long.Acquire(ctx, "a")
		require.NoError(t, err)
		require.Greater(t, again.Fence(), fences["a"])
		_, err = again.Release(ctx)
		require.NoError(t, err)

		n, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "nothing expired is left")

		// Run clears leases that expire later.
		_, err = short.Acquire(ctx, "d")
		require.NoError(t, err)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx, 10*time.Millisecond) }()
		require.Eventually(t, func() bool {
			st, err := long.Inspect(ctx, "d")
			return err == nil && st.Exists && st.Owner == ""
		}, 5*time.Second, 20*time.Millisecond)
		cancel()
		require.NoError(t, <-done)
		st, err = long.Inspect(ctx, "live")
		require.NoError(t, err)
		require.Equal(t, live.Owner(), st.Owner)
	})
}

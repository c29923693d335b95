package zombie_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

type traceKey struct{}

// Sweeps reach the observer with the caller's context, the table, scope and
// result; Run with a Locker reports taking and giving up the lease.
func TestObserverSweepEvents(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		ctx := context.WithValue(ctxT(t), traceKey{}, "caller")
		cc := jobsConfig(5)
		createTable(t, e, cc, false)
		insertRows(t, e, cc.Table, "PENDING", 4, 100)
		c, err := claim.New[struct{}](e.d, cc, nil)
		require.NoError(t, err)
		dead, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 4, dead.Len())
		time.Sleep(1500 * time.Millisecond)

		var events []observe.Event
		var marks []any
		obs := observe.Func(func(ctx context.Context, ev observe.Event) {
			events = append(events, ev)
			marks = append(marks, ctx.Value(traceKey{}))
		})
		r, err := zombie.New(e.d, cc, zombie.Config{Timeout: time.Second, Observer: obs})
		require.NoError(t, err)
		res, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 4, res.Returned)
		require.Len(t, events, 1)
		require.Equal(t, zombie.OpSweep, events[0].Op)
		require.Equal(t, observe.SourceZombie, events[0].Source)
		require.Equal(t, cc.Table, events[0].Table)
		require.Equal(t, res, resultOf(events[0]))
		require.NoError(t, events[0].Err)
		require.Equal(t, "caller", marks[0])
		require.False(t, events[0].Start.IsZero())

		// Run with a lease: leadership and the sweep under it.
		table := fmt.Sprintf("reaper_lease_%d", tableSeq.Add(1))
		require.NoError(t, tasklock.CreateTable(ctx, e.d, table))
		k, err := tasklock.New(e.d, tasklock.Config{Table: tasklock.KeyTable(table), TTL: 5 * time.Second})
		require.NoError(t, err)
		events, marks = nil, nil
		r, err = zombie.New(e.d, cc, zombie.Config{Timeout: time.Second, Locker: k, LockKey: "reaper", Observer: obs})
		require.NoError(t, err)
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		require.NoError(t, r.Run(rctx, time.Hour))
		cancel()
		require.Len(t, events, 3, "%+v", events)
		require.Equal(t, zombie.OpLeader, events[0].Op)
		require.Equal(t, observe.SourceZombie, events[0].Source)
		require.True(t, events[0].Leading)
		require.Equal(t, zombie.OpSweep, events[1].Op)
		require.Equal(t, "caller", marks[1], "the sweep runs under the lease's context, derived from Run's")
		require.Equal(t, zombie.OpLeader, events[2].Op)
		require.False(t, events[2].Leading)
	})
}

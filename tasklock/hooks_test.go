package tasklock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
)

type traceKey struct{}

// leaseRecorder collects lease events with their context's trace marker.
type leaseRecorder struct {
	mu     sync.Mutex
	events []observe.Event
	marks  []any
}

func (r *leaseRecorder) Observe(ctx context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.marks = append(r.marks, ctx.Value(traceKey{}))
}

func (r *leaseRecorder) snapshot() ([]observe.Event, []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.Event(nil), r.events...), append([]any(nil), r.marks...)
}

// Every lease operation reaches the observer with the caller's context, the
// table, key, owner and fence; a loss the lease detects on its own carries
// the acquiring context's values and is marked as background work.
func TestObserverLeaseEvents(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		rec := &leaseRecorder{}
		// The keep-alive must find the force-release (within an interval)
		// long before the local deadline could end the lease instead: with
		// a TTL of 800 ms a loaded CI run saw the deadline win.
		const ttl = 3 * time.Second
		k, _ := setup(t, e, tasklock.Config{TTL: ttl, SafetyMargin: 300 * time.Millisecond,
			RenewInterval: 200 * time.Millisecond, Observer: rec})
		ctx := context.WithValue(ctxT(t), traceKey{}, "caller")

		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		_, err = k.Acquire(ctx, "job")
		require.ErrorIs(t, err, dialect.ErrLeaseHeld)
		require.NoError(t, l.Renew(ctx))
		ok, err := l.Release(ctx)
		require.NoError(t, err)
		require.True(t, ok)

		// A lease force-released under a keep-alive is lost in the background.
		l2, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		stop2 := l2.KeepAlive(ctx)
		ok, err = k.ForceRelease(ctx, "job")
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, closedWithin(l2.Done(), 5*time.Second))
		require.ErrorIs(t, l2.Err(), dialect.ErrLeaseLost)
		stop2()

		events, marks := rec.snapshot()
		var ops []observe.Op // the caller's, in order
		var fg []observe.Event
		for i, ev := range events {
			if !ev.Background {
				ops = append(ops, ev.Op)
				fg = append(fg, ev)
			}
			require.Equal(t, "caller", marks[i], "event %d (%s) carries the caller's values", i, ev.Op)
			require.Equal(t, "job", ev.Key)
			require.Equal(t, observe.SourceTasklock, ev.Source)
			require.NotEmpty(t, ev.Table)
			require.Equal(t, ttl, ev.TTL)
		}
		require.Equal(t, []observe.Op{tasklock.OpAcquire, tasklock.OpAcquire, tasklock.OpRenew, tasklock.OpRelease, tasklock.OpAcquire, tasklock.OpForceRelease}, ops)
		require.True(t, fg[0].OK)
		require.Equal(t, l.Owner(), fg[0].Token)
		require.EqualValues(t, 1, fg[0].Fence)
		require.False(t, fg[1].OK)
		require.ErrorIs(t, fg[1].Err, dialect.ErrLeaseHeld)
		require.True(t, fg[2].OK)
		require.NoError(t, fg[2].Err)
		require.True(t, fg[3].OK)
		require.EqualValues(t, 2, fg[4].Fence)
		require.True(t, fg[5].OK)
		// Then the keep-alive's renewal finds the lease gone: the loss is
		// reported, then the renewal.
		lost, renew := events[len(events)-2], events[len(events)-1]
		require.Equal(t, tasklock.OpLost, lost.Op)
		require.ErrorIs(t, lost.Err, dialect.ErrLeaseLost)
		require.True(t, lost.Background)
		require.EqualValues(t, 2, lost.Fence)
		require.Equal(t, tasklock.OpRenew, renew.Op)
		require.True(t, renew.Background)
		require.ErrorIs(t, renew.Err, dialect.ErrLeaseLost)
	})
}

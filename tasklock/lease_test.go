package tasklock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
)

func TestAcquireRenewRelease(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		var acquired, released atomic.Int64
		k, _ := setup(t, e, tasklock.Config{Observer: observe.Func(func(_ context.Context, ev observe.Event) {
			switch {
			case ev.Op == tasklock.OpAcquire && ev.OK:
				acquired.Add(1)
			case ev.Op == tasklock.OpRelease && ev.Err == nil:
				released.Add(1)
			}
		})})
		ctx := ctxT(t)

		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, "job", l.Key())
		require.Len(t, l.Owner(), store.TokenLen)
		require.Equal(t, int64(1), l.Fence())
		require.False(t, l.ExpiresAt().IsZero())
		require.NoError(t, l.Err())

		_, err = k.Acquire(ctx, "job")
		require.ErrorIs(t, err, dialect.ErrLeaseHeld)
		require.ErrorIs(t, err, dialect.ErrLeaseHeld, "same identity as the dialect sentinel")

		// Another key is independent.
		other, err := k.Acquire(ctx, "other")
		require.NoError(t, err)
		require.Equal(t, int64(1), other.Fence())

		st, err := k.Inspect(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, l.Owner(), st.Owner)
		require.Equal(t, l.Fence(), st.Fence)

		before, deadline := l.ExpiresAt(), deadlineOf(l)
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, l.Renew(ctx))
		require.True(t, l.ExpiresAt().After(before), "renew moves the DB expiry")
		require.True(t, deadlineOf(l).After(deadline), "renew moves the local deadline")
		require.Equal(t, int64(1), l.Fence(), "renew keeps the fence")

		ok, err := l.Release(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, closedWithin(l.Done(), time.Second))
		require.ErrorIs(t, l.Err(), tasklock.ErrReleased)
		require.ErrorIs(t, l.Renew(ctx), dialect.ErrLeaseLost)
		ok, err = l.Release(ctx)
		require.NoError(t, err)
		require.False(t, ok, "a second release is a reported no-op")

		l2, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		require.Greater(t, l2.Fence(), l.Fence())
		require.NotEqual(t, l.Owner(), l2.Owner(), "fresh token per acquisition")

		ok, err = k.ForceRelease(ctx, "job")
		require.NoError(t, err)
		require.True(t, ok)
		require.ErrorIs(t, l2.Renew(ctx), dialect.ErrLeaseLost, "a force-released lease is lost")
		require.True(t, closedWithin(l2.Done(), time.Second))
		require.ErrorIs(t, l2.Err(), dialect.ErrLeaseLost)
		ok, err = l2.Release(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		_, err = other.Release(ctx)
		require.NoError(t, err)

		require.Equal(t, int64(3), acquired.Load())
		// The second Release of l made no statement and fired no hook.
		require.Equal(t, int64(3), released.Load())
	})
}

func TestLeaseContext(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		k, _ := setup(t, e, tasklock.Config{})
		ctx := ctxT(t)
		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		lctx, cancel := l.Context(ctx)
		defer cancel()
		require.NoError(t, lctx.Err())
		_, err = k.ForceRelease(ctx, "job")
		require.NoError(t, err)
		require.ErrorIs(t, l.Renew(ctx), dialect.ErrLeaseLost)
		require.True(t, closedWithin(lctx.Done(), time.Second))
		require.ErrorIs(t, context.Cause(lctx), dialect.ErrLeaseLost)

		// A context whose parent ends first is cancelled with the parent.
		l2, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		parent, pcancel := context.WithCancel(ctx)
		c2, cancel2 := l2.Context(parent)
		defer cancel2()
		pcancel()
		require.True(t, closedWithin(c2.Done(), time.Second))
		require.NoError(t, l2.Err(), "the lease outlives a cancelled derived context")
		_, err = l2.Release(ctx)
		require.NoError(t, err)
	})
}

// Renewals in a tight loop, many within one microsecond of the previous
// write on fast engines, must never look like a lost lease (MySQL reports
// changed rows, so an unchanged row would read as "not owned").
func TestTightRenewalsNeverLookLost(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		var renewed atomic.Int64
		k, _ := setup(t, e, tasklock.Config{
			TTL: 2 * time.Second, RenewInterval: time.Millisecond,
			Observer: observe.Func(func(_ context.Context, ev observe.Event) {
				if ev.Op == tasklock.OpRenew && ev.Err == nil {
					renewed.Add(1)
				}
			}),
		})
		ctx := ctxT(t)
		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		for i := range 300 {
			require.NoError(t, l.Renew(ctx), "renewal %d", i)
		}
		// The background loop at a 1 ms interval, racing with explicit renewals.
		defer l.KeepAlive(context.Background())()
		for i := range 100 {
			require.NoError(t, l.Renew(ctx), "renewal %d beside the keep-alive", i)
		}
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, l.Err())
		require.Greater(t, renewed.Load(), int64(400), "the keep-alive renewed too")
		ok, err := l.Release(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		st, err := k.Inspect(ctx, "job")
		require.NoError(t, err)
		require.Empty(t, st.Owner)
		require.Equal(t, int64(1), st.Fence)
	})
}

func TestAcquireWait(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		k, _ := setup(t, e, tasklock.Config{PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond})
		ctx := ctxT(t)
		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)

		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err = k.AcquireWait(short, "job")
		require.ErrorIs(t, err, dialect.ErrLeaseHeld)
		require.ErrorIs(t, err, context.DeadlineExceeded)

		releasedAt := make(chan time.Time, 1)
		go func() {
			time.Sleep(150 * time.Millisecond)
			releasedAt <- time.Now()
			_, _ = l.Release(ctx)
		}()
		l2, err := k.AcquireWait(ctx, "job")
		require.NoError(t, err)
		require.True(t, time.Now().After(<-releasedAt))
		require.Equal(t, l.Fence()+1, l2.Fence())
		_, err = l2.Release(ctx)
		require.NoError(t, err)
	})
}

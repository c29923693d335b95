package tasklock_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/hold"
	"github.com/claimlock/claimlock/tasklock"
)

// TestHoldCheckLease: hold.Check on a lease's context compares the local
// deadline with the clock itself. The app clock (Config.Now) jumps past the
// deadline, as for a process resumed after a freeze whose deadline timer
// has not run: the context is not cancelled yet, hold.Check reports the
// loss at once. After a release it reports the release.
func TestHoldCheckLease(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		var jump atomic.Int64
		now := func() time.Time { return time.Now().Add(time.Duration(jump.Load())) }
		k, _ := setup(t, e, tasklock.Config{TTL: time.Minute, Now: now})
		ctx := ctxT(t)
		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		lctx, cancel := l.Context(ctx)
		defer cancel()
		require.NoError(t, hold.Check(lctx))
		jump.Store(int64(2 * time.Minute)) // frozen past the deadline
		require.NoError(t, lctx.Err(), "the deadline's timer has not run")
		err = hold.Check(lctx)
		require.ErrorIs(t, err, dialect.ErrLeaseLost)
		require.ErrorIs(t, err, dialect.ErrLocalDeadline)
		jump.Store(0)
		require.NoError(t, hold.Check(lctx), "the clock back inside the deadline: held")
		_, err = l.Release(ctx)
		require.NoError(t, err)
		require.Error(t, hold.Check(lctx), "released")
	})
}

package tasklock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// watchDone records when l ends.
func watchDone(l *tasklock.Lease) func() time.Time {
	var at time.Time
	done := make(chan struct{})
	go func() {
		<-l.Done()
		at = time.Now()
		close(done)
	}()
	return func() time.Time { <-done; return at }
}

// A holder that stops renewing (a frozen process: keep-alive stopped, no
// release) loses the lease after the TTL; its context is cancelled before
// anyone else takes over; the new holder has a larger fence; the old
// holder's renew and release fail harmlessly.
func TestExpiryAndTakeover(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		const ttl = 600 * time.Millisecond
		k, _ := setup(t, e, tasklock.Config{TTL: ttl, RenewInterval: 100 * time.Millisecond})
		ctx := ctxT(t)
		a, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		aEnded := watchDone(a)
		stopA := a.KeepAlive(ctx)
		time.Sleep(2 * ttl) // kept alive well past one TTL
		require.NoError(t, a.Err())
		stopA() // frozen: no renewals, no release

		var b *tasklock.Lease
		var bStart, bEnd time.Time
		for b == nil {
			start := time.Now()
			l, err := k.Acquire(ctx, "job")
			if err == nil {
				b, bStart, bEnd = l, start, time.Now()
				break
			}
			require.ErrorIs(t, err, dialect.ErrLeaseHeld)
			time.Sleep(5 * time.Millisecond)
		}
		require.Greater(t, b.Fence(), a.Fence())
		// Taken over only after the TTL since a's last renewal: a's local
		// deadline is that renewal's start + TTL - margin, and the database
		// expiry is later still. (Measuring from the stop's return
		// instead failed on a loaded machine, where the last renewal's
		// statement had started well before it returned.)
		require.True(t, bEnd.After(deadlineOf(a)), "taken over at %v, before a's deadline %v", bEnd, deadlineOf(a))
		require.True(t, aEnded().Before(bStart), "old holder stopped (%v) before the takeover attempt started (%v)", aEnded(), bStart)
		require.ErrorIs(t, a.Err(), dialect.ErrLeaseLost)
		require.ErrorIs(t, a.Err(), dialect.ErrLocalDeadline)

		require.ErrorIs(t, a.Renew(ctx), dialect.ErrLeaseLost)
		ok, err := a.Release(ctx)
		require.NoError(t, err)
		require.False(t, ok, "releasing a taken-over lease is a no-op")
		st, err := k.Inspect(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, b.Owner(), st.Owner, "the old holder did not touch the new lease")
		require.NoError(t, b.Renew(ctx))
		ok, err = b.Release(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	})
}

// hangingDialect wraps a dialect so that lease renewals block, ignoring
// their context, until unblock is closed: a database that stopped answering
// and a driver that does not honour cancellation.
type hangingDialect struct {
	dialect.Dialect
	unblock chan struct{}
	hung    chan struct{}
	once    sync.Once
}

type hangingStore struct {
	store.LeaseStore
	h *hangingDialect
}

func (h *hangingDialect) WrapLeases(s store.LeaseStore) store.LeaseStore {
	return hangingStore{LeaseStore: s, h: h}
}

// Inner implements the store's test wrapping.
func (h *hangingDialect) Inner() dialect.Dialect { return h.Dialect }

func (s hangingStore) Renew(ctx context.Context, key any, owner string, ttl time.Duration) (store.LeaseInfo, error) {
	s.h.once.Do(func() { close(s.h.hung) })
	<-s.h.unblock
	return s.LeaseStore.Renew(ctx, key, owner, ttl)
}

// A lease whose renewals hang in the database still ends at its local
// deadline.
func TestDeadlineWhenDatabaseHangs(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		// The margin is what a holder allows for its timer firing late: a
		// loaded CI run (race detector, 2 cores) saw 70 ms.
		const ttl, interval, margin = time.Second, 200 * time.Millisecond, 300 * time.Millisecond
		h := &hangingDialect{Dialect: e.open(t), unblock: make(chan struct{}), hung: make(chan struct{})}
		t.Cleanup(func() { close(h.unblock) })
		k := keyed(t, h, tasklock.Config{TTL: ttl, RenewInterval: interval, SafetyMargin: margin})
		ctx := ctxT(t)

		start := time.Now()
		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		ended := watchDone(l)
		// The local deadline the lease ends at: TTL - SafetyMargin after the
		// acquisition was sent, before the database expiry.
		deadline := deadlineOf(l)
		require.False(t, deadline.Before(start.Add(ttl-margin)), "deadline %v after the start", deadline.Sub(start))
		require.True(t, deadline.Before(time.Now().Add(ttl-margin)), "deadline %v after the start", deadline.Sub(start))
		defer l.KeepAlive(context.Background())()
		require.True(t, closedWithin(h.hung, time.Second), "the keep-alive renewal is hanging")
		require.True(t, closedWithin(l.Done(), 2*ttl), "the lease ended while its renewal hung")
		require.False(t, ended().Before(deadline), "ended %v before its deadline", deadline.Sub(ended()))
		took := ended().Sub(start)
		require.GreaterOrEqual(t, took, ttl-margin-20*time.Millisecond)
		require.Less(t, took, ttl, "the holder stopped before the database expiry")
		require.ErrorIs(t, l.Err(), dialect.ErrLocalDeadline)

		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = l.Release(rctx) // must not wait for the hung renewal
		require.NoError(t, err)
	})
}

// Config.Now only ever supplies differences: a host clock far in the past or
// the future behaves exactly like the real one.
func TestSkewedAppClock(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{-20 * 365 * 24 * time.Hour, -time.Hour, 0, time.Hour, 20 * 365 * 24 * time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			forEachEngine(t, func(t *testing.T, e engine) {
				const ttl, margin = 400 * time.Millisecond, 40 * time.Millisecond
				now := func() time.Time { return time.Now().Add(skew) }
				k, _ := setup(t, e, tasklock.Config{TTL: ttl, SafetyMargin: margin, Now: now})
				ctx := ctxT(t)

				start := time.Now()
				l, err := k.Acquire(ctx, "job")
				require.NoError(t, err)
				ended := watchDone(l)
				require.WithinDuration(t, start.Add(skew+ttl-margin), deadlineOf(l), 100*time.Millisecond, "deadline on the injected clock")
				dbExpiry := l.ExpiresAt()
				require.WithinDuration(t, time.Now(), dbExpiry, time.Minute+ttl, "the database clock ignores the app clock")

				time.Sleep(ttl / 4)
				renewStart := time.Now()
				require.NoError(t, l.Renew(ctx))
				require.True(t, l.ExpiresAt().After(dbExpiry))

				require.True(t, closedWithin(l.Done(), 2*ttl))
				// The deadline the renewal set is before the TTL on the
				// local clock; the observed end adds the watcher's
				// scheduling delay, which a loaded CI machine stretches.
				require.Less(t, deadlineOf(l).Sub(renewStart.Add(skew)), ttl)
				took := ended().Sub(renewStart)
				require.GreaterOrEqual(t, took, ttl-margin-20*time.Millisecond, "renewal pushed the deadline")
				require.Less(t, took, ttl+200*time.Millisecond)
				require.ErrorIs(t, l.Err(), dialect.ErrLocalDeadline)

				// The row itself is still ours until the database expiry.
				ok, err := l.Release(ctx)
				require.NoError(t, err)
				require.True(t, ok)
			})
		})
	}
}

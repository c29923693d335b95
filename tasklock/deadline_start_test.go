package tasklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// lateLeaseDialect wraps a dialect so that, once armed, the next acquire or
// renew of its lease stores runs its statement and then waits before
// returning until the test lets it go: a reply that is slow to come back.
// The database computed the expiry from its clock early in that call; the
// library learns of it late.
type lateLeaseDialect struct {
	dialect.Dialect
	hold chan chan struct{} // an armed hold; the call waits for the inner channel
	ran  chan struct{}      // receives once the held call's statement has run
}

func newLateLeaseDialect(d dialect.Dialect) *lateLeaseDialect {
	return &lateLeaseDialect{Dialect: d, hold: make(chan chan struct{}, 1), ran: make(chan struct{}, 1)}
}

func (l *lateLeaseDialect) wait() {
	select {
	case ch := <-l.hold:
		l.ran <- struct{}{}
		<-ch
	default:
	}
}

func (l *lateLeaseDialect) WrapLeases(s store.LeaseStore) store.LeaseStore {
	return lateLeaseStore{LeaseStore: s, l: l}
}

// Inner implements the store's test wrapping.
func (l *lateLeaseDialect) Inner() dialect.Dialect { return l.Dialect }

type lateLeaseStore struct {
	store.LeaseStore
	l *lateLeaseDialect
}

func (s lateLeaseStore) Acquire(ctx context.Context, key any, owner string, ttl time.Duration) (store.LeaseInfo, error) {
	info, err := s.LeaseStore.Acquire(ctx, key, owner, ttl)
	s.l.wait()
	return info, err
}

func (s lateLeaseStore) Renew(ctx context.Context, key any, owner string, ttl time.Duration) (store.LeaseInfo, error) {
	info, err := s.LeaseStore.Renew(ctx, key, owner, ttl)
	s.l.wait()
	return info, err
}

// whileHeld runs op with the next acquire or renew held after its
// statement, and returns an instant taken while it was held: after the
// statement was sent, before the call returned. The sleeps on either side
// keep the instant apart from both on any clock resolution.
func (l *lateLeaseDialect) whileHeld(t *testing.T, op func()) (mid time.Time) {
	t.Helper()
	let := make(chan struct{})
	l.hold <- let
	done := make(chan struct{})
	go func() {
		defer close(done)
		op()
	}()
	select {
	case <-l.ran:
	case <-time.After(30 * time.Second):
		close(let)
		t.Fatal("the held call never ran its statement")
	}
	time.Sleep(10 * time.Millisecond)
	mid = time.Now()
	time.Sleep(10 * time.Millisecond)
	close(let)
	<-done
	return mid
}

// TestLeaseDeadlineFromStatementStart: a lease's local deadline is (local
// start of the last successful acquire or renew statement) + TTL -
// SafetyMargin. The database computed the expiry from its clock at some
// instant after that start, so a deadline measured from when the reply
// arrived could come after another holder may acquire the key: with the
// reply held back, the deadline must still be measured from before the
// statement.
func TestLeaseDeadlineFromStatementStart(t *testing.T) {
	t.Parallel()
	e, ok := engineByName("sqlite")
	require.True(t, ok)
	l := newLateLeaseDialect(e.open(t))
	const ttl, margin = time.Hour, 10 * time.Minute
	const life = ttl - margin
	k := keyed(t, l, tasklock.Config{TTL: ttl, SafetyMargin: margin})
	ctx := ctxT(t)

	var lease *tasklock.Lease
	before := time.Now()
	mid := l.whileHeld(t, func() {
		var err error
		lease, err = k.Acquire(ctx, "job")
		if err != nil {
			t.Error(err)
		}
	})
	require.NotNil(t, lease)
	acquired, _ := lease.Deadline()
	require.False(t, acquired.Before(before.Add(life)), "the acquisition's deadline is before its start + TTL - SafetyMargin")
	require.True(t, acquired.Before(mid.Add(life)),
		"the acquisition's deadline is measured from when its reply arrived (%v after an instant while the reply was held), not from the start of its statement",
		acquired.Sub(mid.Add(life)))

	before = time.Now()
	mid = l.whileHeld(t, func() {
		if err := lease.Renew(ctx); err != nil {
			t.Error(err)
		}
	})
	renewed, _ := lease.Deadline()
	require.True(t, renewed.After(acquired), "a renewal moves the deadline")
	require.False(t, renewed.Before(before.Add(life)), "the renewal's deadline is before its start + TTL - SafetyMargin")
	require.True(t, renewed.Before(mid.Add(life)),
		"the renewal's deadline is measured from when its reply arrived (%v after an instant while the reply was held), not from the start of its statement",
		renewed.Sub(mid.Add(life)))
	require.NoError(t, lease.Err())
	ok, err := lease.Release(ctx)
	require.NoError(t, err)
	require.True(t, ok)
}

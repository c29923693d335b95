package tasklock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// lateLeases is a lease store whose acquisitions the client stops waiting
// for (the context ends) while the server goes on: it runs the real
// acquisition after lag, on a context of its own, and returns at once the
// error the store gives a write whose context ended while the server had
// it, as go-sql-driver/mysql does when it closes the connection of a
// statement that MySQL then finishes and commits.
type lateLeases struct {
	store.LeaseStore
	lag  time.Duration
	cut  context.CancelFunc
	done chan error
	// failReleases is how many releases fail before one reaches the
	// store, as releases failed where the server ran out of connections
	// (it was still finishing the statements of connections that
	// go-sql-driver/mysql had closed).
	failReleases atomic.Int32
}

// errNoConnections is an error that may pass, as MySQL's "Too many
// connections".
var errNoConnections = errors.New("too many connections")

func (s *lateLeases) Release(ctx context.Context, key any, owner string, holdUntil time.Time) (bool, error) {
	if s.failReleases.Add(-1) >= 0 {
		return false, errNoConnections
	}
	return s.LeaseStore.Release(ctx, key, owner, holdUntil)
}

func (s *lateLeases) Acquire(ctx context.Context, key any, owner string, ttl time.Duration) (store.LeaseInfo, error) {
	s.cut()
	<-ctx.Done()
	go func() {
		time.Sleep(s.lag)
		_, err := s.LeaseStore.Acquire(context.Background(), key, owner, ttl)
		s.done <- err
	}()
	return store.LeaseInfo{}, fmt.Errorf("%w: %w", dialect.ErrOutcomeUnknown, ctx.Err())
}

// TestAcquireFinishedLate: an acquisition cut short whose statement the
// server finishes after Acquire returned, and after its release found no
// hold, does not keep the key from other holders until the TTL: the
// release is tried again until it frees the key. Also when the first
// releases fail with an error that may pass (the first three: the one
// right after the acquisition and the late ones before the server's
// write). Every engine.
func TestAcquireFinishedLate(t *testing.T) {
	for _, e := range testengine.All {
		for _, fail := range []int32{0, 3} {
			t.Run(fmt.Sprintf("%s/failed-releases-%d", e.Name, fail), func(t *testing.T) {
				testAcquireFinishedLate(t, e, fail)
			})
		}
	}
}

func testAcquireFinishedLate(t *testing.T, e testengine.Engine, fail int32) {
	t.Parallel()
	c := testengine.Open(t, e, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, CreateTable(ctx, c.Dialect, "late_leases"))
	cfg := Config{Table: KeyTable("late_leases"), TTL: 30 * time.Second}
	k, err := New(c.Dialect, cfg)
	require.NoError(t, err)
	other, err := New(c.Dialect, cfg)
	require.NoError(t, err)
	require.NoError(t, k.Verify(ctx))
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	late := &lateLeases{LeaseStore: k.ls, lag: 400 * time.Millisecond, cut: acancel, done: make(chan error, 1)}
	late.failReleases.Store(fail)
	k.ls = late
	_, err = k.Acquire(actx, "job")
	require.ErrorIs(t, err, dialect.ErrOutcomeUnknown)
	require.NoError(t, <-late.done, "the server's late acquisition took the key")
	var l *Lease
	require.Eventually(t, func() bool {
		l, err = other.Acquire(ctx, "job")
		return err == nil
	}, 6*time.Second, 20*time.Millisecond, "the late acquisition kept the key (%v)", err)
	_, err = l.Release(ctx)
	require.NoError(t, err)
}

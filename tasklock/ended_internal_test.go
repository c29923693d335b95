package tasklock

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// badConnLeases is a lease store whose renewals, releases and finishes
// report what pgx's stdlib driver and go-sql-driver/mysql report for a
// statement they never sent because its context had ended: a bad
// connection, with no trace of the context.
type badConnLeases struct {
	store.LeaseStore
}

func (badConnLeases) Renew(ctx context.Context, key any, owner string, ttl time.Duration) (store.LeaseInfo, error) {
	<-ctx.Done()
	return store.LeaseInfo{}, driver.ErrBadConn
}

func (badConnLeases) Release(ctx context.Context, key any, owner string, holdUntil time.Time) (bool, error) {
	<-ctx.Done()
	return false, driver.ErrBadConn
}

func (badConnLeases) Finish(ctx context.Context, key any, owner string, status any, holdUntil time.Time) (bool, error) {
	<-ctx.Done()
	return false, driver.ErrBadConn
}

// newTestLocker returns a locker of a new lease table on the first test
// engine, its TTL 30 s.
func newTestLocker(t *testing.T, ctx context.Context, table string) *Locker {
	t.Helper()
	c := testengine.Open(t, testengine.All[0], 0)
	require.NoError(t, CreateTable(ctx, c.Dialect, table))
	k, err := New(c.Dialect, Config{Table: KeyTable(table), TTL: 30 * time.Second})
	require.NoError(t, err)
	return k
}

// TestEndedCallsMatchTheContext: Renew, Release and Finish cut short by
// their context return an error that matches the context's error (so a
// caller that stopped its work can tell that from a failure of the
// server), with the driver's error still reachable, as Acquire does.
func TestEndedCallsMatchTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k := newTestLocker(t, ctx, "ended_leases")
	require.NoError(t, k.Verify(ctx))
	real := k.ls
	k.ls = badConnLeases{real}

	calls := []struct {
		name string
		call func(ctx context.Context, l *Lease) error
	}{
		{"renew", func(ctx context.Context, l *Lease) error { return l.Renew(ctx) }},
		{"release", func(ctx context.Context, l *Lease) error { _, err := l.Release(ctx); return err }},
		{"finish", func(ctx context.Context, l *Lease) error { _, err := l.Finish(ctx, "done"); return err }},
	}
	for i, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("job-%d", i)
			k.ls = real
			l, err := k.Acquire(ctx, key)
			require.NoError(t, err)
			k.ls = badConnLeases{real}
			cctx, ccancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer ccancel()
			err = tc.call(cctx, l)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorIs(t, err, driver.ErrBadConn)
			require.False(t, errors.Is(err, context.Canceled))
			k.ls = real
			_, err = real.Release(ctx, key, l.Owner(), time.Time{})
			require.NoError(t, err)
		})
	}
}

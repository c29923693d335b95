package tasklock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// flakyRenewals wraps a dialect so that the next failNext lease renewals
// fail with a transient error before reaching the database (a dropped
// connection, a statement timeout), and counts the renewals tried.
type flakyRenewals struct {
	dialect.Dialect
	failNext atomic.Int32
	tried    atomic.Int32
}

type flakyRenewalStore struct {
	store.LeaseStore
	f *flakyRenewals
}

func (f *flakyRenewals) WrapLeases(s store.LeaseStore) store.LeaseStore {
	return flakyRenewalStore{LeaseStore: s, f: f}
}

// Inner implements the store's test wrapping.
func (f *flakyRenewals) Inner() dialect.Dialect { return f.Dialect }

func (s flakyRenewalStore) Renew(ctx context.Context, key any, owner string, ttl time.Duration) (store.LeaseInfo, error) {
	s.f.tried.Add(1)
	if s.f.failNext.Add(-1) >= 0 {
		return store.LeaseInfo{}, errors.New("injected: the renewal's connection broke")
	}
	return s.LeaseStore.Renew(ctx, key, owner, ttl)
}

// TestKeepAliveOutlastsTransientFailure: one renewal of KeepAlive fails
// with a transient error (not a loss); the keep-alive tries again with
// backoff and the lease stays held for three TTLs, its local deadline
// moving on. A keep-alive that gave up on the first failure would let
// the lease end at its local deadline, aborting long tasks needlessly.
func TestKeepAliveOutlastsTransientFailure(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		const ttl, interval = time.Second, 200 * time.Millisecond
		f := &flakyRenewals{Dialect: e.open(t)}
		k := keyed(t, f, tasklock.Config{TTL: ttl, RenewInterval: interval})
		ctx := ctxT(t)
		acquired := time.Now()
		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		f.failNext.Store(1) // the first renewal
		defer l.KeepAlive(ctx)()
		first := deadlineOf(l)
		select {
		case <-l.Done():
			t.Fatalf("the lease ended %v after its acquisition, after %d renewals were tried (the first one failed): %v",
				time.Since(acquired).Round(time.Millisecond), f.tried.Load(), l.Err())
		case <-time.After(3 * ttl):
		}
		require.NoError(t, l.Err())
		require.Greater(t, f.tried.Load(), int32(2), "renewed after the failure")
		require.True(t, deadlineOf(l).After(first.Add(ttl)), "the local deadline moved on")
		st, err := k.Inspect(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, l.Owner(), st.Owner)
		ok, err := l.Release(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	})
}

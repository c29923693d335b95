package tasklock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// spyLeases runs check just before each statement that can free the row for
// another holder is sent.
type spyLeases struct {
	store.LeaseStore
	check func()
}

func (s spyLeases) Release(ctx context.Context, key any, owner string, holdUntil time.Time) (bool, error) {
	s.check()
	return s.LeaseStore.Release(ctx, key, owner, holdUntil)
}

func (s spyLeases) Finish(ctx context.Context, key any, owner string, status any, holdUntil time.Time) (bool, error) {
	s.check()
	return s.LeaseStore.Finish(ctx, key, owner, status, holdUntil)
}

type ctxKey struct{}

// TestContextEndsBeforeRowFreed: on every path that ends a lease (release,
// finish, Do's return, a renewal that finds it lost, the local deadline),
// every context from Lease.Context has ended by the time the lease is over,
// before a statement that frees the row is sent, so no other holder can
// start while this one's work still runs.
func TestContextEndsBeforeRowFreed(t *testing.T) {
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			c := testengine.Open(t, e, 0)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, CreateTable(ctx, c.Dialect, "leases"))
			k, err := New(c.Dialect, Config{Table: KeyTable("leases"), TTL: 2 * time.Second})
			require.NoError(t, err)
			require.NoError(t, k.Verify(ctx))
			var live atomic.Pointer[context.Context]
			var violations atomic.Int64
			k.ls = spyLeases{LeaseStore: k.ls, check: func() {
				if p := live.Load(); p != nil && (*p).Err() == nil {
					violations.Add(1)
				}
			}}
			parent := context.WithValue(ctx, ctxKey{}, "v")
			const rounds = 20
			for i := range rounds {
				l, err := k.Acquire(ctx, "k")
				require.NoError(t, err)
				lctx, lcancel := l.Context(parent)
				require.Equal(t, "v", lctx.Value(ctxKey{}), "the parent's values are kept")
				live.Store(&lctx)
				if i%2 == 0 {
					_, err = l.Release(ctx)
				} else {
					_, err = l.Finish(ctx, "DONE") // keyed tables have no status column: refused, after the check
				}
				if i%2 == 0 {
					require.NoError(t, err)
				}
				lcancel()
				live.Store(nil)
				if i%2 == 1 {
					_, err = l.Release(ctx)
					require.NoError(t, err)
				}
			}
			require.Zero(t, violations.Load(), "a free statement was sent while the holder's context was live")

			// Do: fn's context has ended when the lease is released.
			for range rounds {
				require.NoError(t, k.Do(ctx, "k", func(fctx context.Context, l *Lease) error {
					live.Store(&fctx)
					return nil
				}))
				live.Store(nil)
			}
			require.Zero(t, violations.Load(), "Do released the row while fn's context was live")

			// Loss and the local deadline: when the lease is over (Done
			// closed, Renew reports the loss), its contexts have ended.
			var late int
			for i := range rounds {
				l, err := k.Acquire(ctx, "k")
				require.NoError(t, err)
				lctx, lcancel := l.Context(parent)
				if i%2 == 0 {
					_, err := k.ForceRelease(ctx, "k")
					require.NoError(t, err)
					require.Error(t, l.Renew(ctx))
				} else {
					l.end(dialect.ErrLocalDeadline)
				}
				<-l.Done()
				if lctx.Err() == nil {
					late++
				}
				lcancel()
				_, _ = l.Release(ctx)
			}
			require.Zero(t, late, "the lease ended before its contexts did")
		})
	}
}

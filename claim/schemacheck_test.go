package claim_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/internal/store"
)

// checkCounter is a claim store that counts its schema checks, holds each
// until release is closed (nil: not held) or its context ends, and fails
// those fail says to.
type checkCounter struct {
	store.ClaimStore
	n       atomic.Int32
	running chan struct{} // one value per check that started
	release chan struct{}
	fail    func(n int32) bool
}

func (c *checkCounter) VerifySchema(ctx context.Context) error {
	n := c.n.Add(1)
	c.running <- struct{}{}
	if c.release != nil {
		select {
		case <-c.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c.fail != nil && c.fail(n) {
		return errors.New("the schema check failed")
	}
	return c.ClaimStore.VerifySchema(ctx)
}

// TestSchemaCheckedOnce: the workers of a claimer that start together run
// its schema check once between them, the others waiting for it; a check
// that fails is run again by the next caller; a caller whose context ends
// while it waits for another's check returns its context's error.
func TestSchemaCheckedOnce(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e := open(t, en)
			ctx := context.Background()
			setup := func(cc *checkCounter) *claim.Claimer[job] {
				c, _ := jobSetup(t, e, e.d.Capabilities().PreferredStrategy, 3, nil)
				cc.running = make(chan struct{}, 64)
				claim.WrapStore(c, func(cs store.ClaimStore) store.ClaimStore {
					cc.ClaimStore = cs
					return cc
				})
				return c
			}

			t.Run("together", func(t *testing.T) {
				cc := &checkCounter{release: make(chan struct{})}
				c := setup(cc)
				errs := make(chan error, 16)
				var wg sync.WaitGroup
				for range 16 {
					wg.Go(func() { errs <- c.Verify(ctx) })
				}
				<-cc.running
				time.Sleep(50 * time.Millisecond) // the other callers reach the check
				close(cc.release)
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				require.EqualValues(t, 1, cc.n.Load(), "schema checks for 16 callers at once")
				b, err := c.Claim(ctx)
				require.NoError(t, err)
				require.Equal(t, 3, b.Len())
				require.EqualValues(t, 1, cc.n.Load(), "a claim after the check passed checks again")
			})

			t.Run("failed-then-passed", func(t *testing.T) {
				cc := &checkCounter{fail: func(n int32) bool { return n == 1 }}
				c := setup(cc)
				require.Error(t, c.Verify(ctx))
				require.NoError(t, c.Verify(ctx))
				require.NoError(t, c.Verify(ctx))
				require.EqualValues(t, 2, cc.n.Load(), "a failed check runs again, a passed one does not")
			})

			t.Run("waiter-gives-up", func(t *testing.T) {
				cc := &checkCounter{release: make(chan struct{})}
				c := setup(cc)
				first := make(chan error, 1)
				go func() { first <- c.Verify(ctx) }()
				<-cc.running
				wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				require.ErrorIs(t, c.Verify(wctx), context.DeadlineExceeded)
				close(cc.release)
				require.NoError(t, <-first)
				require.EqualValues(t, 1, cc.n.Load())
			})
		})
	}
}

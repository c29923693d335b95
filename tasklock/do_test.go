package tasklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

func TestDo(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		k, _ := setup(t, e, tasklock.Config{TTL: time.Second, RenewInterval: 50 * time.Millisecond})
		ctx := ctxT(t)
		free := func(key string) {
			t.Helper()
			st, err := k.Inspect(ctx, key)
			require.NoError(t, err)
			require.Empty(t, st.Owner, "released after Do")
		}

		t.Run("returns fn's error and releases", func(t *testing.T) {
			boom := errors.New("boom")
			var fence int64
			err := k.Do(ctx, "a", func(ctx context.Context, l *tasklock.Lease) error {
				fence = l.Fence()
				_, err := k.Acquire(ctx, "a")
				require.ErrorIs(t, err, dialect.ErrLeaseHeld, "held during fn")
				return boom
			})
			require.ErrorIs(t, err, boom)
			require.NotErrorIs(t, err, dialect.ErrLeaseLost)
			require.Equal(t, int64(1), fence)
			free("a")
		})

		t.Run("keeps the lease alive past the TTL", func(t *testing.T) {
			err := k.Do(ctx, "b", func(ctx context.Context, l *tasklock.Lease) error {
				time.Sleep(1500 * time.Millisecond)
				return ctx.Err()
			})
			require.NoError(t, err)
			free("b")
		})

		t.Run("held key", func(t *testing.T) {
			l, err := k.Acquire(ctx, "c")
			require.NoError(t, err)
			called := false
			err = k.Do(ctx, "c", func(context.Context, *tasklock.Lease) error { called = true; return nil })
			require.ErrorIs(t, err, dialect.ErrLeaseHeld)
			require.False(t, called)
			_, err = l.Release(ctx)
			require.NoError(t, err)
		})

		t.Run("loss during fn cancels its context and is reported", func(t *testing.T) {
			err := k.Do(ctx, "d", func(fctx context.Context, l *tasklock.Lease) error {
				_, err := k.ForceRelease(ctx, "d")
				require.NoError(t, err)
				select {
				case <-fctx.Done():
					require.ErrorIs(t, context.Cause(fctx), dialect.ErrLeaseLost)
					return fctx.Err()
				case <-time.After(5 * time.Second):
					return errors.New("context not cancelled after loss")
				}
			})
			require.ErrorIs(t, err, dialect.ErrLeaseLost)
			require.ErrorIs(t, err, context.Canceled)
		})

		t.Run("panic releases", func(t *testing.T) {
			require.PanicsWithValue(t, "boom", func() {
				_ = k.Do(ctx, "e", func(context.Context, *tasklock.Lease) error { panic("boom") })
			})
			free("e")
		})

		t.Run("nil fn", func(t *testing.T) {
			require.Error(t, k.Do(ctx, "f", nil))
		})
	})
}

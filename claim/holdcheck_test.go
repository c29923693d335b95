package claim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/hold"
)

// TestHoldCheckAfterFreeze: a worker frozen past its batch's local
// deadline resumes with the deadline's timer not run yet (stopped here):
// ctx.Err() still says nil, while hold.Check, on the batch's context, a
// row's context and a context derived from them, reports the loss at once.
// That is the documented last check before a side effect.
func TestHoldCheckAfterFreeze(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e := open(t, en)
			const timeout, margin = 500 * time.Millisecond, 100 * time.Millisecond
			ctx := ctxT(t)
			c, _ := jobSetup(t, e, e.d.Capabilities().PreferredStrategy, 3, func(cfg *claim.Config) {
				cfg.ReapTimeout, cfg.SafetyMargin = timeout, margin
			})
			require.ErrorIs(t, hold.Check(ctx), hold.ErrNoHold, "a context claimlock did not hand out")
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 3, b.Len())
			claim.FreezeDeadlineTimer(b)
			bctx, cancel := b.Context(ctx)
			defer cancel()
			rctx, rcancel := b.RowContext(ctx, b.IDs()[1])
			defer rcancel()
			deep, dcancel := context.WithTimeout(context.WithValue(rctx, deepKey{}, 1), time.Hour)
			defer dcancel()
			for _, x := range []context.Context{bctx, rctx, deep} {
				require.NoError(t, hold.Check(x), "inside the deadline")
				require.True(t, hold.Carried(x))
			}
			deadline, ok := b.Deadline()
			require.True(t, ok)
			time.Sleep(time.Until(deadline) + 10*time.Millisecond) // frozen past it
			require.NoError(t, deep.Err(), "the context has not heard of the deadline: its timer did not run")
			for _, x := range []context.Context{deep, rctx, bctx} {
				err := hold.Check(x)
				require.ErrorIs(t, err, dialect.ErrClaimLost, "hold.Check right after the deadline, %v late", time.Since(deadline))
				require.ErrorIs(t, err, dialect.ErrLocalDeadline)
			}
		})
	}
}

// deepKey is a context key of the caller's own, between the row's context
// and the send.
type deepKey struct{}

// TestHoldCheckHeld: the context of a held batch (Held.Context, which
// Holder.Run hands to its handler) carries the check too. Frozen past the
// local deadline with the keep-alive not run yet, ctx.Err() still says nil
// while hold.Check reports the loss at once, and the context then ends
// with it.
func TestHoldCheckHeld(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		const limit, margin = 2 * time.Second, 200 * time.Millisecond
		ctx := ctxT(t)
		c, _ := jobSetup(t, e, dialect.StrategySkipLocked, 3, nil)
		h, err := c.Holder(claim.HoldConfig{Limit: limit, SafetyMargin: margin, MaxInFlight: 1})
		require.NoError(t, err)
		b, err := h.Hold(ctx)
		require.NoError(t, err)
		held := time.Now() // the deadline is at most limit - margin after this
		require.Equal(t, 3, b.Len())
		claim.FreezeHeldKeepAlive(b)
		deep, cancel := context.WithTimeout(context.WithValue(b.Context(), deepKey{}, 1), time.Hour)
		defer cancel()
		require.NoError(t, hold.Check(deep), "inside the deadline")
		require.True(t, hold.Carried(deep))
		time.Sleep(time.Until(held.Add(limit - margin + 20*time.Millisecond))) // frozen past it
		require.NoError(t, deep.Err(), "the context has not heard of the deadline: the keep-alive did not run")
		err = hold.Check(deep)
		require.ErrorIs(t, err, dialect.ErrClaimLost)
		require.ErrorIs(t, err, dialect.ErrLocalDeadline)
		require.ErrorIs(t, context.Cause(deep), dialect.ErrLocalDeadline, "the check ended the batch's context")
		_ = b.Rollback(ctx) // the server may have ended the transaction at the limit already
		require.ErrorIs(t, hold.Check(deep), dialect.ErrClaimLost, "a lost batch stays lost")
	})
}

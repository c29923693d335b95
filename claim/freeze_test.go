package claim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// TestErrAfterFreeze: a worker frozen past its batch's local deadline calls
// Batch.Err on resuming, before the deadline's timer has run (stopped here,
// as it would not have run yet): Err compares the deadline with the clock
// itself and reports the loss at once, and the batch's context ends with
// it. A worker that checks Err before each send therefore sends nothing
// after a freeze.
func TestErrAfterFreeze(t *testing.T) {
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
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 3, b.Len())
			claim.FreezeDeadlineTimer(b)
			require.NoError(t, b.Err(), "before the deadline")
			deadline, ok := b.Deadline()
			require.True(t, ok)
			time.Sleep(time.Until(deadline) + 10*time.Millisecond) // frozen past it

			err = b.Err()
			require.ErrorIs(t, err, dialect.ErrClaimLost, "Err right after the deadline, %v late, with its timer not run", time.Since(deadline))
			require.ErrorIs(t, err, dialect.ErrLocalDeadline)
			select {
			case <-b.Done():
			default:
				t.Fatal("Err saw the deadline but the batch's Done channel is open")
			}
			bctx, cancel := b.Context(ctx)
			defer cancel()
			select {
			case <-bctx.Done(): // cancelled from a goroutine of its own
			case <-time.After(time.Second):
				t.Fatal("a context of the ended batch is live a second later")
			}
			require.ErrorIs(t, context.Cause(bctx), dialect.ErrLocalDeadline)
		})
	}
}

package claim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
)

// cutShortAfter returns a context cancelled after d, sweeping d over
// twice span, the time one operation takes, in 300 steps (i is the try).
func cutShortAfter(i int, span time.Duration) (context.Context, context.CancelFunc) {
	d := 2 * span * time.Duration(i%300) / 300
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(d, cancel)
	return ctx, cancel
}

// A claim or hold whose context ends while it runs fails with an error
// that matches context.Canceled, wherever the end falls: also between the
// connection's checkout and the statement, where pgx's stdlib driver says
// "driver: bad connection" of the statement it did not send, and after
// the last statement of a hold, where go-sql-driver/mysql closes the
// connection, and with it the transaction, of a statement it has read the
// reply of. And no row stays processing, with no reaper: a claim cut short
// releases what it marked, also where the server finishes the claim's
// statement after the claim returned and after its first release (MySQL
// does, once go-sql-driver/mysql closed the connection).
func TestClaimAndHoldCutShort(t *testing.T) {
	t.Parallel()
	const tries = 600
	holdable(t, func(t *testing.T, e *env) {
		c, _ := jobSetup(t, e, e.d.Capabilities().PreferredStrategy, 20, func(cfg *claim.Config) { cfg.BatchSize = 5 })
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 1})
		require.NoError(t, err)
		// One hold and one claim first, uncut: the schema check is done,
		// the tries' contexts end in the operations' own statements, and
		// the sweep spans the longer of the two.
		t0 := time.Now()
		hb, err := h.Hold(context.Background())
		require.NoError(t, err)
		require.NoError(t, hb.Rollback(context.Background()))
		t1 := time.Now()
		b, err := c.Claim(context.Background())
		require.NoError(t, err)
		span := max(t1.Sub(t0), time.Since(t1), time.Millisecond)
		_, err = b.Release(context.Background())
		require.NoError(t, err)
		failed := 0
		for i := range tries {
			ctx, cancel := cutShortAfter(i, span)
			// Holds first: they roll back, and leave the rows pending for
			// the next.
			if i < tries/2 {
				b, err := h.Hold(ctx)
				if err == nil {
					require.NoError(t, b.Rollback(context.Background()))
				} else {
					failed++
					require.ErrorIs(t, err, context.Canceled, "try %d: a hold cut short", i)
				}
			} else {
				b, err := c.Claim(ctx)
				if err == nil {
					_, err = b.Release(context.Background())
					require.NoError(t, err)
				} else {
					failed++
					require.ErrorIs(t, err, context.Canceled, "try %d: a claim cut short", i)
				}
			}
			cancel()
		}
		t.Logf("%d of %d tries cut short by their context", failed, tries)
		require.NotZero(t, failed, "no try was cut short: the sweep misses the operations")
		require.Less(t, failed, tries, "every try was cut short: the sweep never lets one finish")
		var st claim.Stats
		require.Eventually(t, func() bool {
			st, err = c.Stats(context.Background())
			return err == nil && st.Processing == 0
		}, 15*time.Second, 50*time.Millisecond, "rows of claims cut short still processing")
		require.EqualValues(t, 20, st.Pending, "every row pending again")
	})
}

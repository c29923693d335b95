package claim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// TestHeldDeadlineWhenPingsHang: once a held batch's pings stop coming
// back (every reply held back longer than the hold limit: a server that
// stopped answering), its context still ends at its local deadline, the
// start of its last statement that succeeded + Limit - SafetyMargin, not
// later: at Limit the server may end the transaction and hand its rows to
// another batch while the handler still works on them.
func TestHeldDeadlineWhenPingsHang(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e, p := openVia(t, en)
			c, _ := jobSetup(t, e, dialect.StrategySkipLocked, 3, nil)
			const limit, margin = 3 * time.Second, time.Second
			h, err := c.Holder(claim.HoldConfig{Limit: limit, SafetyMargin: margin, MaxInFlight: 1})
			if errors.Is(err, dialect.ErrNotSupported) {
				t.Skipf("%s holds no claims: %v", en.kind, err)
			}
			require.NoError(t, err)
			ctx := ctxT(t)
			before := time.Now()
			b, err := h.Hold(ctx)
			require.NoError(t, err)
			require.Equal(t, 3, b.Len())
			// From now on the server's replies (the pings' among them)
			// take longer than the limit; the last statement that
			// succeeded started between before and now.
			p.Delay(limit + time.Second)
			hung := time.Now()
			t.Cleanup(func() { p.Delay(0) })
			select {
			case <-b.Context().Done():
			case <-time.After(2 * limit):
				t.Fatalf("the held batch's context is live %v after its pings stopped answering (limit %v)", 2*limit, limit)
			}
			ended := time.Now()
			cause := context.Cause(b.Context())
			require.ErrorIs(t, cause, dialect.ErrClaimLost)
			// The earliest and latest local deadline; a second of the
			// margin is left for a timer that fires late on a loaded
			// machine (the margin is there for that).
			earliest, latest := before.Add(limit-margin), hung.Add(limit-margin)
			require.False(t, ended.Before(earliest), "ended %v after the hold began, before its local deadline", ended.Sub(before))
			require.True(t, ended.Before(latest.Add(margin/2)),
				"ended %v after the pings stopped answering: past the local deadline (Limit %v - SafetyMargin %v) by %v (cause: %v)",
				ended.Sub(hung), limit, margin, ended.Sub(latest), cause)
			require.ErrorIs(t, cause, dialect.ErrLocalDeadline)
		})
	}
}

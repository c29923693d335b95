package claim_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/claimlock/claimlock/claim"
)

// BenchmarkClaimAckPipelined is BenchmarkClaimAck with each batch acked
// together with the claim of the next (Claimer.AckAllAndClaim). One op is
// one batch of 100 rows. Compare it with BenchmarkClaimAck in the same run.
func BenchmarkClaimAckPipelined(b *testing.B) {
	benchBatches(b, func(ctx context.Context, c *claim.Claimer[struct{}], left *atomic.Int64) error {
		if left.Add(-1) < 0 {
			return nil
		}
		batch, err := c.Claim(ctx)
		for err == nil && batch.Len() > 0 {
			if left.Add(-1) < 0 {
				return batch.AckAll(ctx)
			}
			batch, err = c.AckAllAndClaim(ctx, batch)
		}
		return err
	})
}

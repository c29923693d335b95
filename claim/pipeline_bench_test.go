package claim_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// BenchmarkClaimAckPipelined is BenchmarkClaimAck with each batch acked
// together with the claim of the next (Claimer.AckAllAndClaim). One op is
// one batch of 100 rows. Compare it with BenchmarkClaimAck in the same run.
func BenchmarkClaimAckPipelined(b *testing.B) {
	forEachBench(b, func(b *testing.B, en engine, s dialect.Strategy) {
		for _, workers := range []int{1, 16} {
			b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
				e := open(b, en)
				cfg := overlapConfig(tableName("bench"), s)
				createTable(b, e, cfg)
				insertRows(b, e, cfg.Table, []string{"task_id"}, b.N*100, func(int) []any { return []any{1} })
				c, err := claim.New[struct{}](e.d, cfg, nil)
				require.NoError(b, err)
				ctx := context.Background()
				var left atomic.Int64
				left.Store(int64(b.N))
				var wg sync.WaitGroup
				b.ReportAllocs()
				b.ResetTimer()
				for range workers {
					wg.Go(func() {
						if left.Add(-1) < 0 {
							return
						}
						batch, err := c.Claim(ctx)
						for err == nil && batch.Len() > 0 {
							if left.Add(-1) < 0 {
								err = batch.AckAll(ctx)
								break
							}
							batch, err = c.AckAllAndClaim(ctx, batch)
						}
						if err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	})
}

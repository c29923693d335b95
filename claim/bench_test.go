package claim_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// forEachBench runs fn for every engine and supported strategy.
func forEachBench(b *testing.B, fn func(b *testing.B, en engine, s dialect.Strategy)) {
	for _, en := range engines {
		b.Run(en.kind, func(b *testing.B) {
			for _, s := range engineStrategies(b, en) {
				b.Run(s.String(), func(b *testing.B) { fn(b, en, s) })
			}
		})
	}
}

// BenchmarkClaimAck measures claim + ack of batches of 100 rows with 1 and
// 16 concurrent workers. One op is one batch.
func BenchmarkClaimAck(b *testing.B) {
	benchBatches(b, func(ctx context.Context, c *claim.Claimer[struct{}], left *atomic.Int64) error {
		for left.Add(-1) >= 0 {
			batch, err := c.Claim(ctx)
			if err != nil {
				return err
			}
			if err := batch.AckAll(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

// benchBatches runs loop in 1 and then 16 concurrent workers on every
// engine and strategy, over a table of b.N batches of 100 rows; left counts
// the batches still to process (a worker takes one with left.Add(-1) >= 0).
// One op is one batch; rows/s is reported.
func benchBatches(b *testing.B, loop func(ctx context.Context, c *claim.Claimer[struct{}], left *atomic.Int64) error) {
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
						if err := loop(ctx, c, &left); err != nil {
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

// claimCost remembers ns per claim of the small table, per engine and
// strategy, to log the ratio against the large one.
var claimCost sync.Map

// BenchmarkClaimTableSize measures one claim + ack of 100 rows of a task of
// 2,000 rows in a table of 10,000 rows, and of 1,000,000 rows when
// CLAIMLOCK_BENCH_1M=1 (loading takes a while), and logs the ratio.
func BenchmarkClaimTableSize(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv("CLAIMLOCK_BENCH_1M") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	forEachBench(b, func(b *testing.B, en engine, s dialect.Strategy) {
		for _, size := range sizes {
			b.Run(fmt.Sprintf("rows=%d", size), func(b *testing.B) {
				const task = 2000
				e := open(b, en)
				cfg := overlapConfig(tableName("size"), s)
				createTable(b, e, cfg)
				// Other tasks' rows are pending too: the claim must not wade
				// through them.
				insertRows(b, e, cfg.Table, []string{"task_id"}, size, func(i int) []any {
					if i%(size/task) == 0 {
						return []any{1}
					}
					return []any{2 + i%97}
				})
				c, err := claim.New[struct{}](e.d, cfg, nil)
				require.NoError(b, err)
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					batch, err := c.Claim(ctx)
					require.NoError(b, err)
					if batch.Len() == 0 {
						b.StopTimer()
						e.exec(b, "UPDATE "+cfg.Table+" SET status = 'PENDING', token = NULL WHERE task_id = ?", 1)
						b.StartTimer()
						batch, err = c.Claim(ctx)
						require.NoError(b, err)
					}
					require.NoError(b, batch.AckAll(ctx))
				}
				b.StopTimer()
				per := b.Elapsed() / time.Duration(b.N)
				key := en.kind + "/" + s.String()
				if size == sizes[0] {
					claimCost.Store(key, per)
				} else if small, ok := claimCost.Load(key); ok {
					b.Logf("%s: claim+ack %v at %d rows vs %v at %d rows: ratio %.2f",
						key, per, size, small, sizes[0], float64(per)/float64(small.(time.Duration)))
				}
			})
		}
	})
}

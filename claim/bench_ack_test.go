package claim_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
)

// BenchmarkAckAll100 measures Batch.AckAll of a claimed batch of 100 rows
// (the claim itself is outside the timed region). One op is one ack.
func BenchmarkAckAll100(b *testing.B) {
	forEachBench(b, func(b *testing.B, en engine, s dialect.Strategy) {
		e := open(b, en)
		cfg := overlapConfig(tableName("ackb"), s)
		createTable(b, e, cfg)
		insertRows(b, e, cfg.Table, []string{"task_id"}, b.N*100, func(int) []any { return []any{1} })
		c, err := claim.New[struct{}](e.d, cfg, nil)
		require.NoError(b, err)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			batch, err := c.Claim(ctx)
			require.NoError(b, err)
			require.Equal(b, 100, batch.Len())
			b.StartTimer()
			require.NoError(b, batch.AckAll(ctx))
		}
	})
}

// BenchmarkAckInFlight measures per-row acks of batches of 64 rows, each
// row acked on its own by [claim.Batch.Ack] when it is done: "lone" acks
// the rows one after the other from one goroutine; "8" from 8 goroutines
// at once (8 handlers in flight per batch), whose concurrent acks share
// statements. One op is one batch (its claim outside the timed region).
// Besides ns/op it reports statements/row, the ack statements written per
// acked row (from the Observer), and p99-ms, the 99th percentile of one Ack
// call's duration. Run on each engine's default strategy.
func BenchmarkAckInFlight(b *testing.B) {
	const rows = 64
	for _, en := range engines {
		b.Run(en.kind, func(b *testing.B) {
			for _, workers := range []int{1, 8} {
				name := "lone"
				if workers > 1 {
					name = fmt.Sprint(workers)
				}
				b.Run(name, func(b *testing.B) {
					e := open(b, en)
					cfg := overlapConfig(tableName("ackf"), strategies(e)[0])
					cfg.BatchSize = rows
					var statements atomic.Int64
					watch(&cfg, func(ev observe.Event) {
						if ev.Op == claim.OpAck {
							statements.Add(1)
						}
					})
					createTable(b, e, cfg)
					insertRows(b, e, cfg.Table, []string{"task_id"}, b.N*rows, func(int) []any { return []any{1} })
					c, err := claim.New[struct{}](e.d, cfg, nil)
					require.NoError(b, err)
					ctx := context.Background()
					lat := make([]time.Duration, 0, b.N*rows)
					var mu sync.Mutex
					b.ResetTimer()
					for range b.N {
						b.StopTimer()
						batch, err := c.Claim(ctx)
						require.NoError(b, err)
						require.Equal(b, rows, batch.Len())
						all := batch.Rows()
						var next atomic.Int64
						errs := make(chan error, workers)
						b.StartTimer()
						var wg sync.WaitGroup
						for range workers {
							wg.Go(func() {
								var mine []time.Duration
								for j := next.Add(1) - 1; j < rows; j = next.Add(1) - 1 {
									start := time.Now()
									if err := batch.Ack(ctx, all[j].ID); err != nil {
										errs <- err
										return
									}
									mine = append(mine, time.Since(start))
								}
								mu.Lock()
								lat = append(lat, mine...)
								mu.Unlock()
							})
						}
						wg.Wait()
						b.StopTimer()
						close(errs)
						for err := range errs {
							require.NoError(b, err)
						}
						require.Empty(b, batch.Unacked())
						b.StartTimer()
					}
					b.StopTimer()
					slices.Sort(lat)
					b.ReportMetric(float64(statements.Load())/float64(b.N*rows), "statements/row")
					b.ReportMetric(float64(lat[len(lat)*99/100])/float64(time.Millisecond), "p99-ms")
				})
			}
		})
	}
}

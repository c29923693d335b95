package claim_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
)

// BenchmarkHeld drains b.N held batches of 100 rows with 4 in flight, by a
// hand-written loop over Holder.Hold (AckAll, Commit) and by Holder.Run
// (which also takes a savepoint per batch), with a handler that writes
// nothing: the loop's own cost per batch. One op is one batch.
func BenchmarkHeld(b *testing.B) {
	for _, en := range engines {
		b.Run(en.kind, func(b *testing.B) {
			for _, loop := range []string{"hold-loop", "run"} {
				b.Run(loop, func(b *testing.B) {
					e := open(b, en)
					var commits atomic.Int64
					done := make(chan struct{})
					cfg := overlapConfig(tableName("heldbench"), e.d.Capabilities().PreferredStrategy)
					cfg.Observer = observe.Func(func(_ context.Context, ev observe.Event) {
						if ev.Op == claim.OpCommit && ev.Err == nil && ev.Rows > 0 && commits.Add(1) == int64(b.N) {
							close(done)
						}
					})
					createTable(b, e, cfg)
					c, err := claim.New[struct{}](e.d, cfg, nil)
					require.NoError(b, err)
					h, err := c.Holder(claim.HoldConfig{MaxInFlight: 4})
					if errors.Is(err, dialect.ErrNotSupported) {
						b.Skip("no held claims on this engine")
					}
					require.NoError(b, err)
					insertRows(b, e, cfg.Table, []string{"task_id"}, b.N*100, func(int) []any { return []any{1} })
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					b.ReportAllocs()
					b.ResetTimer()
					var wg sync.WaitGroup
					if loop == "run" {
						wg.Go(func() {
							if err := h.Run(ctx, func(context.Context, *claim.Held[struct{}]) error { return nil }); err != nil {
								b.Error(err)
							}
						})
					} else {
						for range 4 {
							wg.Go(func() {
								for {
									batch, err := h.Hold(ctx)
									if err == nil && batch.Len() == 0 {
										return
									}
									if err == nil {
										err = batch.AckAll(ctx)
									}
									if err == nil {
										err = batch.Commit(ctx)
									}
									if err != nil {
										b.Error(err)
										return
									}
								}
							})
						}
					}
					if loop == "run" {
						<-done // Run goes on until cancelled
						b.StopTimer()
						cancel()
					}
					wg.Wait()
					b.StopTimer()
					b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "rows/s")
				})
			}
		})
	}
}

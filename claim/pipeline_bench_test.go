package claim_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// BenchmarkRunPipeline measures Run draining batches of 100 rows with 16
// loops, with the pipelined ack+claim off and on. One op is one batch;
// rows/s is reported. Compare the two in the same run.
func BenchmarkRunPipeline(b *testing.B) {
	forEachBench(b, func(b *testing.B, en engine, s dialect.Strategy) {
		for _, p := range []claim.Pipeline{claim.PipelineOff, claim.PipelineOn} {
			b.Run(fmt.Sprintf("pipeline=%v", p), func(b *testing.B) {
				e := open(b, en)
				cfg := overlapConfig(tableName("bench"), s)
				createTable(b, e, cfg)
				rows := int64(b.N * 100)
				insertRows(b, e, cfg.Table, []string{"task_id"}, int(rows), func(int) []any { return []any{1} })
				c, err := claim.New[struct{}](e.d, cfg, nil)
				require.NoError(b, err)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var done atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				err = c.Run(ctx, claim.WorkerConfig[struct{}]{
					Workers: 16, Pipeline: p, PollMin: time.Millisecond, PollMax: 10 * time.Millisecond,
					Handler: func(context.Context, claim.Row[struct{}]) error {
						if done.Add(1) == rows {
							cancel()
						}
						return nil
					},
				})
				b.StopTimer()
				require.NoError(b, err)
				b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "rows/s")
			})
		}
	})
}

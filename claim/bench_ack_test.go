package claim_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
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

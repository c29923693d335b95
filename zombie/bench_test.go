package zombie_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/zombie"
)

// envBenchLarge adds the 1,000,000-row case to BenchmarkSweep.
const envBenchLarge = "CLAIMLOCK_BENCH_LARGE"

// BenchmarkSweep measures one sweep over a table of N rows of which 100 are
// stale (the rest done), with the recommended indexes. The per-sweep time
// should barely grow with N: the (status, claimed_at) index means a sweep
// reads the stale rows, not the table.
func BenchmarkSweep(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv(envBenchLarge) == "1" {
		sizes = append(sizes, 1_000_000)
	}
	for _, en := range engines {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/rows=%d", en.kind, n), func(b *testing.B) {
				benchSweep(b, open(b, en), n)
			})
		}
	}
}

func benchSweep(b *testing.B, e *env, n int) {
	const stale = 100
	ctx := context.Background()
	cc := jobsConfig(stale)
	createTable(b, e, cc, false)
	insertRows(b, e, cc.Table, "PENDING", stale, 5000)
	insertRows(b, e, cc.Table, "DONE", n-stale, 5000)
	c, err := claim.New[struct{}](e.d, cc, nil)
	require.NoError(b, err)
	r, err := zombie.New(e.d, cc, zombie.Config{Timeout: time.Millisecond})
	require.NoError(b, err)
	var swept time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		batch, err := c.Claim(ctx) // a dead worker's batch
		require.NoError(b, err)
		require.Equal(b, stale, batch.Len())
		time.Sleep(5 * time.Millisecond) // older than the timeout
		b.StartTimer()
		res, err := r.Sweep(ctx)
		require.NoError(b, err)
		require.EqualValues(b, stale, res.Returned)
		swept += res.Elapsed
	}
	b.ReportMetric(float64(swept.Microseconds())/1000/float64(b.N), "ms/sweep")
}

package scaleout

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/internal/store"
)

// BenchmarkGaleraClaimAck measures claim+ack of batches of 10 rows on the
// Galera cluster by 8 concurrent workers: on one node, with and without
// causal reads, and from all three nodes (a pool per node, with the
// default token-update claims and with SKIP LOCKED; one pool over all
// nodes). One op is one batch (or a claim that failed after the retry
// policy's attempts, which a worker would simply repeat). It reports rows/s,
// the library's retries (certification conflicts and deadlocks) per op and
// the claims that exhausted them per op:
//
//	go test -run '^$' -bench BenchmarkGaleraClaimAck -benchtime 1000x ./internal/scaleout/
func BenchmarkGaleraClaimAck(b *testing.B) {
	dsns := benchGaleraDSNs(b)
	type mode struct {
		name  string
		pools func(b *testing.B) []*pool
	}
	one := func(suffix string) func(b *testing.B) []*pool {
		return func(b *testing.B) []*pool { return []*pool{benchOpen(b, "node1", dsns[0]+suffix)} }
	}
	modes := []mode{
		{"one-node/sync-wait=3", one("")},
		{"one-node/sync-wait=0", one("?wsrep_sync_wait=0")},
		{"pool-per-node/sync-wait=3", func(b *testing.B) []*pool {
			return []*pool{benchOpen(b, "node1", dsns[0]), benchOpen(b, "node2", dsns[1]), benchOpen(b, "node3", dsns[2])}
		}},
		{"pool-per-node/sync-wait=3/skip-locked", func(b *testing.B) []*pool {
			return []*pool{benchOpen(b, "node1", dsns[0]), benchOpen(b, "node2", dsns[1]), benchOpen(b, "node3", dsns[2])}
		}},
		{"one-pool-all-nodes/sync-wait=3", func(b *testing.B) []*pool {
			db, err := mysql.OpenCluster(context.Background(), dsns)
			if err != nil {
				b.Fatal(err)
			}
			return []*pool{benchPool(b, "cluster", db)}
		}},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			pools := m.pools(b)
			table := "so_bench"
			seedBench(b, pools[0], table, b.N*10+1000)
			claimers := make([]*claim.Claimer[struct{}], len(pools))
			var retries0 int64
			for i, p := range pools {
				cc := itemsConfig(table, 10)
				if strings.HasSuffix(m.name, "/skip-locked") {
					cc.Strategy = dialect.StrategySkipLocked
				}
				c, err := claim.New(p.d, cc, noFields)
				if err != nil {
					b.Fatal(err)
				}
				claimers[i] = c
				retries0 += store.Retries(p.d)
			}
			var next atomic.Int64
			var rows, claimErrs atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := claimers[int(next.Add(1))%len(claimers)]
				ctx := context.Background()
				for pb.Next() {
					batch, err := c.Claim(ctx)
					if err != nil && dialect.IsRetryable(err) {
						// Conflicts past the retry policy: a worker loop
						// claims again after a pause; so does this one.
						claimErrs.Add(1)
						continue
					}
					if err != nil {
						b.Error(err)
						return
					}
					if err := batch.AckAll(ctx); err != nil {
						b.Error(err)
						return
					}
					rows.Add(int64(batch.Len()))
				}
			})
			b.StopTimer()
			var retries int64
			for _, p := range pools {
				retries += store.Retries(p.d)
			}
			b.ReportMetric(float64(rows.Load())/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(retries-retries0)/float64(b.N), "retries/op")
			b.ReportMetric(float64(claimErrs.Load())/float64(b.N), "claim-errors/op")
		})
	}
}

// benchGaleraDSNs is galeraDSNs for benchmarks.
func benchGaleraDSNs(b *testing.B) []string {
	b.Helper()
	dsns := strings.Split(os.Getenv(envGaleraDSNs), ",")
	if len(dsns) != 3 {
		b.Skipf("SKIPPED: %s must list the 3 Galera node DSNs", envGaleraDSNs)
	}
	return dsns
}

func benchOpen(b *testing.B, label, dsn string) *pool {
	b.Helper()
	db, err := mysql.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	return benchPool(b, label, db)
}

func benchPool(b *testing.B, label string, sdb *sql.DB) *pool {
	b.Helper()
	sdb.SetMaxOpenConns(12)
	sdb.SetMaxIdleConns(12)
	b.Cleanup(func() { sdb.Close() })
	rc := newOpCounter()
	d, err := mysql.New(context.Background(), sdb, rc.options())
	if err != nil {
		b.Fatal(err)
	}
	return &pool{label: label, d: d, db: sdb, retries: rc}
}

// seedBench (re)creates the benchmark's table with n pending rows.
func seedBench(b *testing.B, p *pool, table string, n int) {
	b.Helper()
	ctx := context.Background()
	if _, err := p.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
		b.Fatal(err)
	}
	spec, err := itemsConfig(table, 1).Resolve()
	if err != nil {
		b.Fatal(err)
	}
	ddl, err := store.CreateTableDDL(p.d, store.ClaimTableDef(spec))
	if err != nil {
		b.Fatal(err)
	}
	if err := store.ExecDDL(ctx, p.d, ddl); err != nil {
		b.Fatal(err)
	}
	c, err := claim.New(p.d, itemsConfig(table, 1), noFields)
	if err != nil {
		b.Fatal(err)
	}
	missing, err := c.MissingIndexes(ctx)
	if err == nil {
		err = store.ExecDDL(ctx, p.d, missing)
	}
	if err != nil {
		b.Fatal(err)
	}
	for start := 0; start < n; start += 5000 {
		q := fmt.Sprintf("INSERT INTO %s (task_id, status) SELECT %d, 'PENDING' FROM seq_1_to_%d", table, taskID, min(5000, n-start))
		if _, err := p.db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}

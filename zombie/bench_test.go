package zombie_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/zombie"
)

// envBenchLarge adds the 1,000,000-row tables to BenchmarkSweep.
const envBenchLarge = "CLAIMLOCK_BENCH_LARGE"

// BenchmarkSweep measures one sweep (park, then return: MaxAttempts is set)
// of a table of N rows with the recommended indexes, in the shape of issue
// #20: a tenth of the rows processing under live claims (claimed at the
// load, so not stale), the rest done but for 100 pending rows, statistics
// taken after the load. "empty" sweeps find nothing stale, the common case;
// "stale=100" sweeps return the 100 rows a dead worker claimed an hour ago.
//
// Each engine runs in both of its plan modes: PostgreSQL with custom and
// with generic plans (plan_cache_mode, through pgx's prepared statements),
// MariaDB with arguments interpolated by the driver (mysql.Open) and with
// server-side prepared statements. The time per sweep should not depend on
// N: the reap statements read the stale rows through the (status,
// claimed_at) index, not the table.
func BenchmarkSweep(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv(envBenchLarge) == "1" {
		sizes = append(sizes, 1_000_000)
	}
	for _, en := range engines {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/rows=%d", en.kind, n), func(b *testing.B) {
				dsn := en.dsn(b)
				modes := benchModes(b, en.kind, dsn)
				cc := jobsConfig(100)
				loadSweepTable(b, modes[0].e, cc, n)
				for _, m := range modes {
					for _, stale := range []int{0, 100} {
						name := "empty"
						if stale > 0 {
							name = fmt.Sprintf("stale=%d", stale)
						}
						b.Run(m.name+"/"+name, func(b *testing.B) { benchSweep(b, m.e, cc, stale) })
					}
				}
			})
		}
	}
}

type benchMode struct {
	name string
	e    *env
}

// benchModes opens the engine's database at dsn once per plan mode.
func benchModes(b *testing.B, kind, dsn string) []benchMode {
	b.Helper()
	ctx := context.Background()
	connect := func(dsn string) *env {
		c, closeFn, err := testengine.Connect(ctx, kind, dsn, 4, dialect.Options{})
		require.NoError(b, err)
		b.Cleanup(closeFn)
		return &env{kind: kind, dsn: dsn, d: c.Dialect, raw: c.DB, dollar: c.Dollar}
	}
	switch kind {
	case testengine.Postgres:
		withMode := func(mode string) string {
			u, err := url.Parse(dsn)
			require.NoError(b, err)
			q := u.Query()
			q.Set("plan_cache_mode", mode)
			u.RawQuery = q.Encode()
			return u.String()
		}
		return []benchMode{{"custom", connect(withMode("force_custom_plan"))}, {"generic", connect(withMode("force_generic_plan"))}}
	case testengine.MySQL:
		e := connect(dsn)
		cfg, err := gomysql.ParseDSN(dsn)
		require.NoError(b, err)
		cfg.InterpolateParams = false
		mysql.ConfigureDSN(cfg, e.d.(*mysql.Dialect).Version())
		conn, err := gomysql.NewConnector(cfg)
		require.NoError(b, err)
		db := sql.OpenDB(conn)
		b.Cleanup(func() { db.Close() })
		d, err := mysql.New(ctx, db, dialect.Options{})
		require.NoError(b, err)
		return []benchMode{{"interpolated", e}, {"prepared", &env{kind: kind, dsn: dsn, d: d, raw: db}}}
	}
	return []benchMode{{"-", connect(dsn)}}
}

// loadSweepTable creates cc's table with the recommended indexes and n
// rows: ids 1..100 pending, then a tenth of n processing under live claims,
// the rest done; then it takes statistics.
func loadSweepTable(b *testing.B, e *env, cc claim.Config, n int) {
	b.Helper()
	createTable(b, e, cc, false)
	processingTo := 100 + n/10
	status := fmt.Sprintf(`CASE WHEN g <= 100 THEN '%s' WHEN g <= %d THEN '%s' ELSE '%s' END`,
		"PENDING", processingTo, "PROCESSING", "DONE")
	token := fmt.Sprintf(`CASE WHEN g > 100 AND g <= %d THEN 'live-' || ((g - 1) / 100) END`, processingTo)
	var load, analyze string
	switch e.kind {
	case testengine.Postgres:
		load = fmt.Sprintf(`INSERT INTO %s (id, status, token, claimed_at, attempts) SELECT g, %s, %s, CASE WHEN g > 100 THEN now() END, 1 FROM generate_series(1, %d) g`,
			cc.Table, status, token, n)
		analyze = "ANALYZE " + cc.Table
	case testengine.MySQL:
		digits := "(SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
		seq := fmt.Sprintf("(SELECT 1 + a.n + 10 * b.n + 100 * c.n + 1000 * d.n + 10000 * e.n + 100000 * f.n AS g FROM %[1]s a, %[1]s b, %[1]s c, %[1]s d, %[1]s e, %[1]s f) AS s", digits)
		load = fmt.Sprintf(`INSERT INTO %s (id, status, token, claimed_at, attempts) SELECT g, %s, %s, IF(g > 100, UTC_TIMESTAMP(6), NULL), 1 FROM %s WHERE g <= %d ORDER BY g`,
			cc.Table, status, `IF(g > 100 AND g <= `+fmt.Sprint(processingTo)+`, CONCAT('live-', (g - 1) DIV 100), NULL)`, seq, n)
		analyze = "ANALYZE TABLE " + cc.Table
	default:
		load = fmt.Sprintf(`INSERT INTO %s (id, status, token, claimed_at, attempts) WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %d)
			SELECT g, %s, %s, CASE WHEN g > 100 THEN CAST(unixepoch('subsec') * 1000 AS INTEGER) END, 1 FROM s`, cc.Table, n, status, token)
		analyze = "ANALYZE"
	}
	e.exec(b, load)
	e.exec(b, analyze)
}

// BenchmarkStatements measures the claim store's other statements on the
// tables of BenchmarkSweep, in the same plan modes: a claim of the 100
// pending rows (the engine's preferred strategy; on MySQL/MariaDB with its
// read-back), a heartbeat, an ack and a release of those 100 rows, and
// unscoped Stats, which counts the whole table by design (its time grows
// with N). Only the statement is timed; the rows are put back untimed.
func BenchmarkStatements(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv(envBenchLarge) == "1" {
		sizes = append(sizes, 1_000_000)
	}
	for _, en := range engines {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/rows=%d", en.kind, n), func(b *testing.B) {
				modes := benchModes(b, en.kind, en.dsn(b))
				cc := jobsConfig(100)
				loadSweepTable(b, modes[0].e, cc, n)
				for _, m := range modes {
					for _, op := range []string{"claim", "heartbeat", "ack", "release", "stats"} {
						b.Run(m.name+"/"+op, func(b *testing.B) { benchStatement(b, m.e, cc, op) })
					}
				}
			})
		}
	}
}

func benchStatement(b *testing.B, e *env, cc claim.Config, op string) {
	ctx := context.Background()
	spec, err := cc.Resolve()
	require.NoError(b, err)
	cs, err := store.OpenClaims(e.d, spec)
	require.NoError(b, err)
	strategy, err := e.d.Capabilities().Resolve(dialect.StrategyAuto)
	require.NoError(b, err)
	take := func() (string, []any) {
		tok := store.NewToken()
		var ids []any
		n, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 100, Strategy: strategy}, func(r store.Scanner) error {
			var id int64
			err := r.Scan(&id, new(any)) // key, attempts
			ids = append(ids, id)
			return err
		})
		require.NoError(b, err)
		require.Equal(b, 100, n)
		return tok, ids[len(ids)-n:]
	}
	var took time.Duration
	timed := func(fn func()) {
		b.StartTimer()
		start := time.Now()
		fn()
		took += time.Since(start)
		b.StopTimer()
	}
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		switch op {
		case "claim":
			var tok string
			timed(func() { tok, _ = take() })
			_, err = cs.Release(ctx, tok, nil)
		case "heartbeat":
			tok, _ := take()
			timed(func() {
				var held []any
				held, err = cs.Heartbeat(ctx, tok)
				require.Len(b, held, 100)
			})
			require.NoError(b, err)
			_, err = cs.Release(ctx, tok, nil)
		case "ack":
			tok, ids := take()
			timed(func() {
				var res store.AckResult
				res, err = cs.Ack(ctx, &store.AckParams{Token: tok, IDs: ids, Outcome: store.OutcomeDone})
				require.Empty(b, res.Lost)
			})
			require.NoError(b, err)
			e.exec(b, fmt.Sprintf("UPDATE %s SET status = '%s' WHERE id <= 100", cc.Table, "PENDING"))
		case "release":
			tok, _ := take()
			timed(func() {
				var n int64
				n, err = cs.Release(ctx, tok, nil)
				require.EqualValues(b, 100, n)
			})
		case "stats":
			timed(func() { _, err = cs.Stats(ctx, nil) })
		}
		require.NoError(b, err)
	}
	b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "ms/op")
}

func benchSweep(b *testing.B, e *env, cc claim.Config, stale int) {
	ctx := context.Background()
	c, err := claim.New[struct{}](e.d, cc, nil)
	require.NoError(b, err)
	cc.MaxAttempts = 5
	r, err := zombie.New(e.d, cc, zombie.Config{Timeout: 10 * time.Minute})
	require.NoError(b, err)
	res, err := r.Sweep(ctx) // verifies the table
	require.NoError(b, err)
	require.Zero(b, res.Returned+res.Parked)
	backdate := map[string]string{
		testengine.Postgres: "UPDATE %s SET claimed_at = now() - interval '1 hour', attempts = 1 WHERE id <= 100",
		testengine.MySQL:    "UPDATE %s SET claimed_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, attempts = 1 WHERE id <= 100",
		testengine.SQLite:   "UPDATE %s SET claimed_at = claimed_at - 3600000, attempts = 1 WHERE id <= 100",
	}[e.kind]
	var swept time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if stale > 0 {
			b.StopTimer()
			batch, err := c.Claim(ctx) // a dead worker's batch, claimed an hour ago
			require.NoError(b, err)
			require.Equal(b, stale, batch.Len())
			e.exec(b, fmt.Sprintf(backdate, cc.Table))
			b.StartTimer()
		}
		res, err := r.Sweep(ctx)
		require.NoError(b, err)
		require.EqualValues(b, stale, res.Returned)
		require.Zero(b, res.Parked)
		swept += res.Elapsed
	}
	b.ReportMetric(float64(swept.Microseconds())/1000/float64(b.N), "ms/sweep")
}

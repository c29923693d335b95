package claimprom_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	claimprom "github.com/claimlock/claimlock/contrib/prometheus"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
)

// The package doc's snippet, verbatim between the "snippet" markers, on
// SQLite: the default registry then gathers the watched table's series.
func TestSnippetPackageDoc(t *testing.T) {
	d, cfg, lockCfg := snippetSetup(t)

	// snippet: godoc-prometheus
	m := claimprom.New()
	err := errors.Join(
		m.Watch(d, cfg),             // cfg's scope: task_id=42
		m.WatchTable(d, cfg),        // the whole table
		m.InitLeases(lockCfg.Table), // a lease table
	)
	prometheus.MustRegister(m)
	cfg.Observer = m // and tasklock.Config / zombie.Config Observer
	// end snippet
	require.NoError(t, err)
	defer prometheus.Unregister(m)
	n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, "claimlock_rows")
	require.NoError(t, err)
	require.Equal(t, 10, n, "five statuses for the scope and for the whole table")
	require.NotNil(t, cfg.Observer)
}

// snippetSetup opens a SQLite database with a jobs table scoped by task.
func snippetSetup(t *testing.T) (dialect.Dialect, claim.Config, tasklock.Config) {
	ctx := context.Background()
	db, err := sqlite.Open(t.TempDir() + "/app.db")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}}, ScopeValues: []any{42}}
	require.NoError(t, claim.CreateTable(ctx, d, cfg))
	for range 3 {
		_, err := db.ExecContext(ctx, "INSERT INTO jobs (task_id) VALUES (42)")
		require.NoError(t, err)
	}
	return d, cfg, tasklock.Config{Table: tasklock.TaskTableNoOwner("xxx_task"), TTL: time.Minute}
}

// The operations guide's counter made with observe.Func: a claim and
// an ack of the scope's rows count the acked rows per table.
func TestSnippetObserverFunc(t *testing.T) {
	ctx := context.Background()
	d, cfg, _ := snippetSetup(t)
	acked := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "app_rows_acked_total"}, []string{"table"})
	c := claim.Config{
		ClaimTable: cfg.ClaimTable, ScopeValues: cfg.ScopeValues,
		// snippet: docs-observer-func
		Observer: observe.Func(func(ctx context.Context, e observe.Event) {
			if e.Op == claim.OpAck {
				acked.WithLabelValues(e.Table).Add(float64(e.Acked))
			}
		}),
		// end snippet
	}
	claimer, err := claim.New[struct{}](d, c, nil)
	require.NoError(t, err)
	b, err := claimer.Claim(ctx)
	require.NoError(t, err)
	require.NoError(t, b.AckAll(ctx))
	require.Equal(t, 3.0, testutil.ToFloat64(acked.WithLabelValues("jobs")))
}

package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

// The NotifyStatement doc's snippet, verbatim between the "snippet"
// markers, on a *sql.Tx of pgx's stdlib driver: the dialect's listener
// wakes the scope's claimers when the transaction commits.
func TestSnippetNotifyStatement(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := dbtest.PostgresPool(t)
	d, err := postgres.New(ctx, pool, dialect.Options{})
	require.NoError(t, err)
	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}}, ScopeValues: []any{1}}
	spec, err := cfg.Resolve()
	require.NoError(t, err)
	dialecttest.CreateClaimTable(t, d, spec)
	var wakes atomic.Int64
	defer store.NotifierOf(d).Subscribe(spec, []any{1}, func() { wakes.Add(1) })()
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = d.Listen(lctx, postgres.ListenConfig{}) }()
	require.Eventually(t, func() bool { return d.Listening() && wakes.Load() == 1 }, 30*time.Second, 5*time.Millisecond)

	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	// snippet: godoc-notify-statement
	q, args, err := postgres.NotifyStatement(cfg.ClaimTable, cfg.ScopeValues...)
	if err == nil {
		_, err = tx.ExecContext(ctx, q, args...)
	}
	// end snippet
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.Eventually(t, func() bool { return wakes.Load() == 2 }, 30*time.Second, 5*time.Millisecond, "the notification woke the subscriber")
}

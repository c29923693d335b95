// Package obstest builds the tables that the tests of the observability
// adapters (contrib/otel, contrib/prometheus) and of claimctl run their
// scripted workloads on: a claim table in the shape of the cron story's
// target table, with every optional column an operator looks at, on a fresh
// database of each engine of internal/testkit/testengine.
package obstest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// Table is the claim table every fixture creates.
const Table = "jobs"

// Fixture is a fresh database with the claim table created, its
// recommended indexes included.
type Fixture struct {
	*testengine.Conn
	// Config describes the table (scope task_id, attempts, run_at,
	// last_error and created_at columns, a payload column) and claims task
	// 42 with batches of 10 and MaxAttempts 3.
	Config claim.Config
}

// Config returns the fixture's claim configuration.
func Config() claim.Config {
	return claim.Config{
		ClaimTable: dialect.ClaimTable{
			Table: Table, Scope: []string{"task_id"}, Attempts: "attempts", RunAt: "run_at",
			Error: "last_error", CreatedAt: "created_at", Columns: []string{"payload"},
		},
		ScopeValues: []any{42}, BatchSize: 10, MaxAttempts: 3,
	}
}

// New opens a fresh database of e and creates the table with n pending
// rows of task 42 and m of task 7, created 1, 2, ... seconds ago on the
// database clock.
func New(t testing.TB, e testengine.Engine, n, m int) *Fixture {
	t.Helper()
	f := &Fixture{Conn: testengine.Open(t, e, 8), Config: Config()}
	require.NoError(t, claim.CreateTable(context.Background(), f.Dialect, f.Config))
	for i := range n + m {
		task := 42
		if i >= n {
			task = 7
		}
		f.Exec(t, fmt.Sprintf("INSERT INTO jobs (task_id, payload, created_at) VALUES (?, ?, %s)", f.Ago(i+1)), task, fmt.Sprintf("p%d", i))
	}
	return f
}

// Ago is an SQL expression for the database clock's now minus seconds, in
// the engine's time representation.
func (f *Fixture) Ago(seconds int) string {
	switch f.Engine {
	case testengine.SQLite:
		return fmt.Sprintf("(CAST(unixepoch('subsec') * 1000 AS INTEGER) - %d)", seconds*1000)
	case testengine.MySQL:
		return fmt.Sprintf("(UTC_TIMESTAMP(6) - INTERVAL %d SECOND)", seconds)
	default:
		return fmt.Sprintf("(now() - interval '%d seconds')", seconds)
	}
}

// Exec runs q with ? placeholders (rewritten to $n for PostgreSQL).
func (f *Fixture) Exec(t testing.TB, q string, args ...any) {
	t.Helper()
	_, err := f.DB.ExecContext(context.Background(), f.Rebind(q), args...)
	require.NoError(t, err, q)
}

// Rebind rewrites ? placeholders to $n where the engine needs it.
func (f *Fixture) Rebind(q string) string { return testengine.Rebind(q, f.Dollar) }

// Count returns the number of rows of the table matching where (SQL with ?
// placeholders).
func (f *Fixture) Count(t testing.TB, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, f.DB.QueryRowContext(context.Background(), f.Rebind("SELECT COUNT(*) FROM jobs WHERE "+where), args...).Scan(&n))
	return n
}

// TakeFrom returns rows of the batch with token to pending behind the
// batch's back, as a reaper would: the batch's later ack of them fails
// with dialect.ErrClaimLost.
func (f *Fixture) TakeFrom(t testing.TB, token string, ids ...any) {
	t.Helper()
	spec, err := f.Config.Resolve()
	require.NoError(t, err)
	cs, err := store.OpenClaims(f.Dialect, spec)
	require.NoError(t, err)
	n, err := cs.Release(context.Background(), token, ids)
	require.NoError(t, err)
	require.EqualValues(t, len(ids), n, "rows taken from the batch")
}

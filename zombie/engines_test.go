package zombie_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/zombie"
)

// env is one engine connection under test: the dialect, plus a plain
// *sql.DB standing in for the user's own code (seeding rows, the sends log).
type env struct {
	kind   string // engine, also how a child process reopens it
	dsn    string // file path or DSN, for child processes
	d      dialect.Dialect
	raw    *sql.DB
	dollar bool // $n placeholders in raw SQL
}

// engine opens fresh, isolated databases of one kind.
type engine struct {
	kind string
	dsn  func(t testing.TB) string
}

// engines is every engine the tests run on.
var engines = func() []engine {
	var out []engine
	for _, e := range testengine.All {
		out = append(out, engine{e.Name, e.DSN})
	}
	return out
}()

// openDSN opens kind at dsn; the parent test and the child processes of the
// multi-process test both use it.
func openDSN(ctx context.Context, kind, dsn string) (*env, func(), error) {
	c, closeFn, err := testengine.Connect(ctx, kind, dsn, 24, dialect.Options{})
	if err != nil {
		return nil, nil, err
	}
	return &env{kind: kind, dsn: dsn, d: c.Dialect, raw: c.DB, dollar: c.Dollar}, closeFn, nil
}

func open(t testing.TB, en engine) *env {
	t.Helper()
	e, closeFn, err := openDSN(context.Background(), en.kind, en.dsn(t))
	require.NoError(t, err)
	t.Cleanup(closeFn)
	return e
}

// strategies lists the claim strategies e's server supports.
func strategies(e *env) []dialect.Strategy { return e.d.Capabilities().Strategies() }

// engineStrategies lists the strategies en's server supports, read through
// a connection closed at once: a probe kept open until a parent test's
// parallel subtests end holds idle connections by the dozen over a
// package's tests, beyond a default PostgreSQL's max_connections (100).
func engineStrategies(t testing.TB, en engine) []dialect.Strategy {
	t.Helper()
	e, closeFn, err := openDSN(context.Background(), en.kind, en.dsn(t))
	require.NoError(t, err)
	defer closeFn()
	return strategies(e)
}

// forEachEngine runs fn in a parallel subtest per engine.
func forEachEngine(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			fn(t, open(t, en))
		})
	}
}

// rebind turns ? placeholders into $n for PostgreSQL.
func (e *env) rebind(q string) string { return testengine.Rebind(q, e.dollar) }

func (e *env) exec(t testing.TB, q string, args ...any) {
	t.Helper()
	_, err := e.raw.ExecContext(context.Background(), e.rebind(q), args...)
	require.NoError(t, err, q)
}

var tableSeq atomic.Int64

// jobsConfig is a claim config for a fresh table with an attempts column and
// the default string statuses.
func jobsConfig(batch int) claim.Config {
	return claim.Config{
		ClaimTable: dialect.ClaimTable{Table: fmt.Sprintf("jobs_%d", tableSeq.Add(1)), Attempts: "attempts"},
		BatchSize:  batch,
	}
}

// createTable creates cc's table, with the recommended indexes unless
// noIndexes.
func createTable(t testing.TB, e *env, cc claim.Config, noIndexes bool) store.ClaimStore {
	t.Helper()
	ctx := context.Background()
	spec, err := cc.Resolve()
	require.NoError(t, err)
	ddl, err := store.CreateTableDDL(e.d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, e.d, ddl))
	cs, err := store.OpenClaims(e.d, spec)
	require.NoError(t, err)
	if !noIndexes {
		require.NoError(t, store.ExecDDL(ctx, e.d, cs.IndexDDL()))
	}
	return cs
}

// insertRows inserts n rows with the given status (ids 1..n on a fresh
// table) in multi-row statements of chunk rows, as a user's application
// would.
func insertRows(t testing.TB, e *env, table, status string, n, chunk int) {
	t.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += chunk {
		end := min(start+chunk, n)
		vals := strings.TrimSuffix(strings.Repeat("(?), ", end-start), ", ")
		args := make([]any, end-start)
		for i := range args {
			args[i] = status
		}
		_, err := e.raw.ExecContext(ctx, e.rebind(fmt.Sprintf("INSERT INTO %s (status) VALUES %s", table, vals)), args...)
		require.NoError(t, err)
	}
}

// rowState reads one row's status and attempts.
func rowState(t testing.TB, e *env, table string, id int64) (status string, attempts int64) {
	t.Helper()
	err := e.raw.QueryRowContext(context.Background(),
		e.rebind(fmt.Sprintf("SELECT status, attempts FROM %s WHERE id = ?", table)), id).Scan(&status, &attempts)
	require.NoError(t, err)
	return status, attempts
}

// resultOf is the sweep result an event reports.
func resultOf(e observe.Event) zombie.Result {
	return zombie.Result{Returned: int64(e.Returned), Parked: int64(e.Parked), Statements: e.Statements, Elapsed: e.Duration}
}

// sweeps returns an Observer that calls onSweep with the result of every
// sweep (also a failed one) and onErr, when not nil, with its error.
func sweeps(onSweep func(zombie.Result), onErr func(error)) observe.Observer {
	return observe.Func(func(_ context.Context, e observe.Event) {
		if e.Op != zombie.OpSweep && e.Op != zombie.OpLeaseSweep {
			return
		}
		onSweep(resultOf(e))
		if e.Err != nil && onErr != nil {
			onErr(e.Err)
		}
	})
}

package claim_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/observe"
)

// env is one engine connection under test: the dialect, plus a plain
// *sql.DB standing in for the user's own application code (seeding rows,
// the legacy cron algorithm, a writer bumping versions).
type env struct {
	kind   string // engine variant, also how a child process reopens it
	dsn    string // file path or DSN, for child processes
	d      dialect.Dialect
	raw    *sql.DB
	dollar bool // $n placeholders in raw SQL
}

// engine opens a fresh, isolated database of one kind.
type engine struct {
	kind string
	dsn  func(t testing.TB) string
}

var engines = []engine{
	{testengine.SQLite, func(t testing.TB) string { return dbtest.SQLitePath(t) }},
	{testengine.Postgres, func(t testing.TB) string { return dbtest.PostgresDSN(t) }},
	{testengine.PostgresStdlib, func(t testing.TB) string { return dbtest.PostgresDSN(t) }},
	{testengine.MySQL, func(t testing.TB) string { return dbtest.MySQLDSN(t) }},
}

// openDSN opens kind at dsn; the parent test and the child processes of the
// multi-process tests both use it.
func openDSN(ctx context.Context, kind, dsn string, opts dialect.Options) (*env, func(), error) {
	max := 24
	if kind == testengine.SQLite {
		max = 8
	}
	c, closeFn, err := testengine.Connect(ctx, kind, dsn, max, opts)
	if err != nil {
		return nil, nil, err
	}
	return &env{kind: kind, dsn: dsn, d: c.Dialect, raw: c.DB, dollar: c.Dollar}, closeFn, nil
}

func open(t testing.TB, en engine) *env {
	t.Helper()
	dsn := en.dsn(t)
	e, closeFn, err := openDSN(context.Background(), en.kind, dsn, dialect.Options{})
	require.NoError(t, err)
	t.Cleanup(closeFn)
	return e
}

// strategies lists the strategies e's server supports.
func strategies(e *env) []dialect.Strategy { return e.d.Capabilities().Strategies() }

// engineStrategies lists the strategies en's server supports, read through
// a connection closed at once: a probe kept open until a parent test's
// parallel subtests end holds idle connections by the dozen over a
// package's tests, beyond a default PostgreSQL's max_connections (100).
func engineStrategies(t testing.TB, en engine) []dialect.Strategy {
	t.Helper()
	e, closeFn, err := openDSN(context.Background(), en.kind, en.dsn(t), dialect.Options{})
	require.NoError(t, err)
	defer closeFn()
	return strategies(e)
}

// forEach runs fn, in parallel subtests, on a fresh database of every engine
// with every strategy that engine supports.
func forEach(t *testing.T, fn func(t *testing.T, e *env, s dialect.Strategy)) {
	t.Helper()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			for _, s := range engineStrategies(t, en) {
				t.Run(s.String(), func(t *testing.T) {
					t.Parallel()
					fn(t, open(t, en), s)
				})
			}
		})
	}
}

// rebind turns ? placeholders into $n for PostgreSQL.
func (e *env) rebind(q string) string { return testengine.Rebind(q, e.dollar) }

func (e *env) exec(t testing.TB, q string, args ...any) int64 {
	t.Helper()
	r, err := e.raw.ExecContext(context.Background(), e.rebind(q), args...)
	require.NoError(t, err, q)
	n, err := r.RowsAffected()
	require.NoError(t, err)
	return n
}

// createTable creates cfg's table with the recommended indexes.
func createTable(t testing.TB, e *env, cfg claim.Config, extra ...store.ColumnDef) {
	t.Helper()
	ctx := context.Background()
	spec, err := cfg.Resolve()
	require.NoError(t, err)
	ddl, err := store.CreateTableDDL(e.d, store.ClaimTableDef(spec, extra...))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, e.d, ddl))
	cs, err := store.OpenClaims(e.d, spec)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, e.d, cs.IndexDDL()))
}

// insertRows inserts rows (values for cols) in multi-row statements inside
// transactions, as a user's application would.
func insertRows(t testing.TB, e *env, table string, cols []string, n int, row func(i int) []any) {
	t.Helper()
	ctx := context.Background()
	const chunk = 500
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	for start := 0; start < n; start += chunk {
		end := min(start+chunk, n)
		var args []any
		vals := make([]string, 0, end-start)
		for i := start; i < end; i++ {
			vals = append(vals, one)
			args = append(args, row(i)...)
		}
		q := fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", table, strings.Join(cols, ", "), strings.Join(vals, ", "))
		_, err := e.raw.ExecContext(ctx, e.rebind(q), args...)
		require.NoError(t, err)
	}
}

// tableSeq gives each test table in a database a distinct name.
var tableSeq struct {
	sync.Mutex
	n int
}

func tableName(prefix string) string {
	tableSeq.Lock()
	defer tableSeq.Unlock()
	tableSeq.n++
	return fmt.Sprintf("%s_%d", prefix, tableSeq.n)
}

// watch adds f to cfg's observer: f sees every event of the claimer, after
// the observers already set.
func watch(cfg *claim.Config, f func(e observe.Event)) {
	prev := cfg.Observer
	cfg.Observer = observe.Func(func(ctx context.Context, e observe.Event) {
		if prev != nil {
			prev.Observe(ctx, e)
		}
		f(e)
	})
}

// onClaim calls f with the rows of every claim that succeeded (possibly
// none).
func onClaim(cfg *claim.Config, f func(n int)) {
	watch(cfg, func(e observe.Event) {
		if e.Op == claim.OpClaim && e.Err == nil {
			f(e.Claimed)
		}
	})
}

// onAck calls f with the rows every ack statement set to done, when it set
// any.
func onAck(cfg *claim.Config, f func(n int)) {
	watch(cfg, func(e observe.Event) {
		if e.Op == claim.OpAck && e.Err == nil && e.Acked > 0 {
			f(e.Acked)
		}
	})
}

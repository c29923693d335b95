package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

// bouncerModes are pgx's exec modes that work through PgBouncer in
// transaction mode: each sends a statement and its parameters in one
// round trip and prepares nothing under a name. Not among them:
// cache_statement, pgx's default, prepares named statements a later
// transaction may not find on the server connection it is lent
// (TestPgBouncerDefaultExecMode), and describe_exec describes a statement
// in one round trip and binds the server's unnamed statement in a second,
// which PgBouncer may send to another server connection.
var bouncerModes = []pgx.QueryExecMode{
	pgx.QueryExecModeSimpleProtocol,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeCacheDescribe,
}

// TestPgBouncerConformance runs the shared suite through PgBouncer in
// transaction mode, on the pgx-native path and on database/sql, in each
// exec mode of bouncerModes. Each test gets a database of its own
// (dbtest.PostgresDatabase), which PgBouncer reaches through its "* ="
// fallback entry: the search_path startup parameter the direct suites
// isolate tests with is not kept by transaction pooling.
func TestPgBouncerConformance(t *testing.T) {
	dsn := pgBouncerDSN(t)
	for _, mode := range bouncerModes {
		t.Run("pgxpool/"+mode.String(), func(t *testing.T) {
			t.Parallel()
			dialecttest.Run(t, dialecttest.Harness{
				Name:      "postgres-pgxpool-pgbouncer-" + mode.String(),
				TimeTypes: timeTypes,
				Open: func(t *testing.T) (dialect.Dialect, *sql.DB) {
					return openBouncerPool(t, dsn, mode, nil)
				},
				OpenVia: func(t *testing.T, via func(string) string) (dialect.Dialect, *sql.DB) {
					return openBouncerPool(t, dsn, mode, via)
				},
			})
		})
		t.Run("stdlib/"+mode.String(), func(t *testing.T) {
			t.Parallel()
			dialecttest.Run(t, dialecttest.Harness{
				Name:      "postgres-stdlib-pgbouncer-" + mode.String(),
				TimeTypes: timeTypes,
				Open: func(t *testing.T) (dialect.Dialect, *sql.DB) {
					return openBouncerStdlib(t, dsn, mode, nil)
				},
				OpenVia: func(t *testing.T, via func(string) string) (dialect.Dialect, *sql.DB) {
					return openBouncerStdlib(t, dsn, mode, via)
				},
			})
		})
	}
}

// bouncerConfig is the pgx config of a connection through PgBouncer (dsn)
// to a database of t's own, in exec mode, rerouted by via unless nil. It
// checks that PgBouncer leads to that database.
func bouncerConfig(t *testing.T, dsn string, mode pgx.QueryExecMode, via func(string) string) *pgx.ConnConfig {
	t.Helper()
	name := dbtest.PostgresDatabase(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err, "parse %s", envPgBouncer)
	u.Path = "/" + name
	cfg, err := pgx.ParseConfig(u.String())
	require.NoError(t, err)
	cfg.DefaultQueryExecMode = mode
	c, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err, "connect through PgBouncer to database %s: its config needs a \"* =\" fallback entry (scripts/pgbouncer.sh writes one)", name)
	var got string
	err = c.QueryRow(context.Background(), "SELECT current_database()").Scan(&got)
	c.Close(context.Background())
	require.NoError(t, err)
	require.Equal(t, name, got, "%s must lead to CLAIMLOCK_POSTGRES_DSN's server", envPgBouncer)
	if via != nil {
		reroute(t, cfg, via)
	}
	return cfg
}

func openBouncerPool(t *testing.T, dsn string, mode pgx.QueryExecMode, via func(string) string) (dialect.Dialect, *sql.DB) {
	t.Helper()
	cc := bouncerConfig(t, dsn, mode, via)
	cfg, err := pgxpool.ParseConfig("")
	require.NoError(t, err)
	cfg.ConnConfig = cc
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { dbtest.ClosePool(pool) })
	d, err := postgres.New(context.Background(), pool, dialect.Options{})
	require.NoError(t, err, fmt.Sprintf("exec mode %v", mode))
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	return d, db
}

func openBouncerStdlib(t *testing.T, dsn string, mode pgx.QueryExecMode, via func(string) string) (dialect.Dialect, *sql.DB) {
	t.Helper()
	db := stdlib.OpenDB(*bouncerConfig(t, dsn, mode, via))
	db.SetMaxIdleConns(32) // as dbtest.Postgres
	t.Cleanup(func() { db.Close() })
	d, err := postgres.NewStdlib(context.Background(), db, dialect.Options{})
	require.NoError(t, err, fmt.Sprintf("exec mode %v", mode))
	return d, db
}

package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	"net"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

// TestConformancePool runs the shared suite on the pgx-native fast path.
func TestConformancePool(t *testing.T) {
	t.Parallel()
	dialecttest.Run(t, dialecttest.Harness{
		Name:      "postgres-pgxpool",
		TimeTypes: timeTypes,
		Open: func(t *testing.T) (dialect.Dialect, *sql.DB) {
			pool := dbtest.PostgresPool(t)
			d, err := postgres.New(context.Background(), pool, dialect.Options{})
			require.NoError(t, err)
			db := stdlib.OpenDBFromPool(pool)
			t.Cleanup(func() { db.Close() })
			return d, db
		},
		OpenVia: func(t *testing.T, via func(string) string) (dialect.Dialect, *sql.DB) {
			cfg, err := pgxpool.ParseConfig(dbtest.PostgresDSN(t))
			require.NoError(t, err)
			reroute(t, cfg.ConnConfig, via)
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			require.NoError(t, err)
			t.Cleanup(func() { dbtest.ClosePool(pool) })
			d, err := postgres.New(context.Background(), pool, dialect.Options{})
			require.NoError(t, err)
			db := stdlib.OpenDBFromPool(pool)
			t.Cleanup(func() { db.Close() })
			return d, db
		},
	})
}

// reroute points cfg at the address via returns for its server.
func reroute(t *testing.T, cfg *pgx.ConnConfig, via func(string) string) {
	host, port, err := net.SplitHostPort(via(net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))))
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	cfg.Host, cfg.Port, cfg.Fallbacks = host, uint16(p), nil
}

// TestConformanceStdlib runs the shared suite on a database/sql handle.
func TestConformanceStdlib(t *testing.T) {
	t.Parallel()
	dialecttest.Run(t, dialecttest.Harness{
		Name:      "postgres-stdlib",
		TimeTypes: timeTypes,
		Open: func(t *testing.T) (dialect.Dialect, *sql.DB) {
			db := dbtest.Postgres(t)
			d, err := postgres.NewStdlib(context.Background(), db, dialect.Options{})
			require.NoError(t, err)
			return d, db
		},
		OpenVia: func(t *testing.T, via func(string) string) (dialect.Dialect, *sql.DB) {
			cfg, err := pgx.ParseConfig(dbtest.PostgresDSN(t))
			require.NoError(t, err)
			reroute(t, cfg, via)
			db := stdlib.OpenDB(*cfg)
			t.Cleanup(func() { db.Close() })
			d, err := postgres.NewStdlib(context.Background(), db, dialect.Options{})
			require.NoError(t, err)
			return d, db
		},
	})
}

// timeTypes are the time column types users' PostgreSQL tables have:
// those that hold a point in time are supported in their format, the
// others refused (dialecttest.TimeType).
var timeTypes = []dialecttest.TimeType{
	{DDL: "timestamptz"}, {DDL: "timestamptz(0)"}, {DDL: "timestamptz(3)"},
	{DDL: "integer", Format: dialect.UnixSeconds}, {DDL: "bigint", Format: dialect.UnixSeconds},
	{DDL: "bigint", Format: dialect.UnixMillis},
	{DDL: "date", Refused: true}, {DDL: "time", Refused: true}, {DDL: "timetz", Refused: true, Says: "time with time zone"},
	{DDL: "timestamp", Refused: true, Says: "without time zone"}, {DDL: "text", Refused: true},
	{DDL: "varchar(64)", Refused: true, Says: "character varying"}, {DDL: "interval", Refused: true},
	{DDL: "integer", Refused: true, Says: "unixseconds"}, {DDL: "bigint", Refused: true, Says: "unixseconds"},
	{DDL: "integer", Format: dialect.UnixMillis, Refused: true}, {DDL: "smallint", Format: dialect.UnixSeconds, Refused: true},
	{DDL: "numeric", Format: dialect.UnixSeconds, Refused: true}, {DDL: "double precision", Format: dialect.UnixMillis, Refused: true},
	{DDL: "timestamptz", Format: dialect.UnixSeconds, Refused: true, Says: "timestamp with time zone"},
	{DDL: "text", Format: dialect.UnixSeconds, Refused: true},
}

package mysql_test

import (
	"context"
	"database/sql"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

// TestConformance runs the shared suite on a pool in the server's default
// isolation (REPEATABLE READ): the dialect's READ COMMITTED transaction
// fallback.
func TestConformance(t *testing.T) {
	t.Parallel()
	dialecttest.Run(t, dialecttest.Harness{
		Name:      "mysql-default-isolation",
		TimeTypes: timeTypes,
		Open: func(t *testing.T) (dialect.Dialect, *sql.DB) {
			db := dbtest.MySQL(t)
			d, err := mysql.New(context.Background(), db, dialect.Options{})
			require.NoError(t, err)
			return d, db
		},
		OpenVia: func(t *testing.T, via func(string) string) (dialect.Dialect, *sql.DB) {
			cfg, err := gomysql.ParseDSN(dbtest.MySQLDSN(t))
			require.NoError(t, err)
			cfg.Addr = via(cfg.Addr)
			db, err := sql.Open("mysql", cfg.FormatDSN())
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			d, err := mysql.New(context.Background(), db, dialect.Options{})
			require.NoError(t, err)
			return d, db
		},
	})
}

// TestConformanceReadCommitted runs the shared suite on a pool from
// mysql.Open, whose sessions are READ COMMITTED.
func TestConformanceReadCommitted(t *testing.T) {
	t.Parallel()
	dialecttest.Run(t, dialecttest.Harness{
		Name:      "mysql-read-committed",
		TimeTypes: timeTypes,
		Open: func(t *testing.T) (dialect.Dialect, *sql.DB) {
			db, err := mysql.Open(context.Background(), dbtest.MySQLDSN(t))
			require.NoError(t, err)
			db.SetMaxIdleConns(32) // no connection churn in the contention cases
			t.Cleanup(func() { db.Close() })
			d, err := mysql.New(context.Background(), db, dialect.Options{})
			require.NoError(t, err)
			require.True(t, d.ReadCommittedSession())
			return d, db
		},
	})
}

// timeTypes are the time column types users' MySQL and MariaDB tables
// have: those that hold a point in time are supported in their format
// (TIMESTAMP here because the test server's sessions run in UTC: see
// TestTimestampOutsideUTC), the others refused (dialecttest.TimeType).
var timeTypes = []dialecttest.TimeType{
	{DDL: "DATETIME"}, {DDL: "DATETIME(3)"}, {DDL: "DATETIME(6)"}, {DDL: "TIMESTAMP(6)"},
	{DDL: "INT", Format: dialect.UnixSeconds}, {DDL: "INT UNSIGNED", Format: dialect.UnixSeconds},
	{DDL: "BIGINT", Format: dialect.UnixSeconds}, {DDL: "BIGINT", Format: dialect.UnixMillis},
	{DDL: "BIGINT UNSIGNED", Format: dialect.UnixMillis},
	{DDL: "DATE", Refused: true}, {DDL: "TIME", Refused: true}, {DDL: "YEAR", Refused: true},
	{DDL: "VARCHAR(64)", Refused: true}, {DDL: "TEXT", Refused: true},
	{DDL: "INT", Refused: true, Says: "unixseconds"}, {DDL: "BIGINT", Refused: true, Says: "unixseconds"},
	{DDL: "INT", Format: dialect.UnixMillis, Refused: true}, {DDL: "SMALLINT", Format: dialect.UnixSeconds, Refused: true},
	{DDL: "DECIMAL(20,6)", Format: dialect.UnixSeconds, Refused: true}, {DDL: "DOUBLE", Format: dialect.UnixMillis, Refused: true},
	{DDL: "DATETIME(6)", Format: dialect.UnixSeconds, Refused: true}, {DDL: "VARCHAR(64)", Format: dialect.UnixSeconds, Refused: true},
}

// Package dbtest gives each test an isolated database on a real server.
//
// Servers are found in this order:
//  1. the DSN in CLAIMLOCK_POSTGRES_DSN / CLAIMLOCK_MYSQL_DSN;
//  2. a testcontainers-go container (PostgreSQL 16, MySQL 8), started once
//     per test binary, when a Docker engine answers, by the command in
//     ../containers (a module of its own: see containers.go);
//  3. otherwise the test is skipped with a message naming the variables, or
//     fails when CLAIMLOCK_REQUIRE_DB=1.
//
// Each call creates a fresh schema (PostgreSQL) or database (MySQL/MariaDB)
// with a random name and drops it when the test ends, so parallel tests never
// see each other's rows. SQLite needs no server: [SQLite] opens a file in the
// test's temporary directory. Tests that reach PostgreSQL through a pooler
// in transaction mode, which does not keep search_path, lease a database of
// their own instead ([PostgresDatabase]).
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect/sqlite"
)

// Environment variables read by this package.
const (
	EnvPostgres = "CLAIMLOCK_POSTGRES_DSN"
	EnvMySQL    = "CLAIMLOCK_MYSQL_DSN"
	EnvRequire  = "CLAIMLOCK_REQUIRE_DB"
)

// Required reports whether CLAIMLOCK_REQUIRE_DB=1: unreachable databases
// fail tests instead of skipping them.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

func unavailable(t testing.TB, engine, env string, why error) {
	t.Helper()
	msg := fmt.Sprintf("no %s server: set %s to a DSN, or run a Docker engine for testcontainers (%v)", engine, env, why)
	if Required() {
		t.Fatalf("%s; %s=1 makes this a failure", msg, EnvRequire)
	}
	countSkip(engine)
	t.Skipf("SKIPPING: %s", msg)
}

func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// SQLite opens a fresh SQLite database file in t.TempDir() with the
// settings of sqlite.Open, closed when the test ends.
func SQLite(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sqlite.Open(t.TempDir() + "/test.db")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// SQLitePath returns a path for a SQLite file in t.TempDir(), for tests that
// hand a database to other processes.
func SQLitePath(t testing.TB) string { return t.TempDir() + "/test.db" }

var (
	pgOnce, myOnce       sync.Once
	pgBase, myBase       string
	pgBaseErr, myBaseErr error
)

func postgresBase() (string, error) {
	pgOnce.Do(func() {
		if dsn := os.Getenv(EnvPostgres); dsn != "" {
			pgBase = dsn
			return
		}
		pgBase, pgBaseErr = startContainer("postgres")
	})
	return pgBase, pgBaseErr
}

func mysqlBase() (string, error) {
	myOnce.Do(func() {
		if dsn := os.Getenv(EnvMySQL); dsn != "" {
			myBase = dsn
			return
		}
		myBase, myBaseErr = startContainer("mysql")
	})
	return myBase, myBaseErr
}

// PostgresDSN creates a fresh schema on the PostgreSQL server and returns a
// DSN whose search_path is that schema. The schema is dropped when the test
// ends.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	base, err := postgresBase()
	if err != nil {
		unavailable(t, "PostgreSQL", EnvPostgres, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := sql.Open("pgx", base)
	require.NoError(t, err)
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		unavailable(t, "PostgreSQL", EnvPostgres, err)
	}
	schema := randomName("cl_")
	_, err = admin.ExecContext(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if db, err := sql.Open("pgx", base); err == nil {
			_, _ = db.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			db.Close()
		}
	})
	return withPostgresParam(base, "search_path", schema)
}

func withPostgresParam(dsn, key, value string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " " + key + "=" + value
}

// Postgres returns a database/sql handle (pgx's stdlib driver) on a fresh
// schema, closed when the test ends.
func Postgres(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", PostgresDSN(t))
	require.NoError(t, err)
	keepIdle(db)
	t.Cleanup(func() { db.Close() })
	return db
}

// PostgresPool returns a pgxpool on a fresh schema, closed when the test
// ends.
func PostgresPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), PostgresDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() {
		if !ClosePool(pool) && !t.Failed() {
			t.Errorf("dbtest: %d connections of the pool were still in use %v after the test: a held claim or transaction was left open",
				pool.Stat().AcquiredConns(), PoolCloseWait)
		}
	})
	return pool
}

// PoolCloseWait bounds how long [ClosePool] waits for connections still in
// use.
const PoolCloseWait = 10 * time.Second

// ClosePool closes pool and reports whether it closed within
// [PoolCloseWait]. pgxpool's Close waits for every connection in use to
// come back, so a test that failed while it held one (a held claim, an
// open transaction) would otherwise hang in its clean-up until the
// package's timeout instead of reporting its failure; after the wait the
// pool is left to close in the background.
func ClosePool(pool *pgxpool.Pool) bool {
	done := make(chan struct{})
	go func() {
		pool.Close()
		close(done)
	}()
	t := time.NewTimer(PoolCloseWait)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// MySQLDSN creates a fresh database on the MySQL/MariaDB server and returns
// a DSN naming it. The database is dropped when the test ends.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	base, err := mysqlBase()
	if err != nil {
		unavailable(t, "MySQL/MariaDB", EnvMySQL, err)
	}
	cfg, err := mysql.ParseDSN(base)
	require.NoError(t, err, "parse %s", EnvMySQL)
	adminCfg := cfg.Clone()
	adminCfg.DBName = ""
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := sql.Open("mysql", adminCfg.FormatDSN())
	require.NoError(t, err)
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		unavailable(t, "MySQL/MariaDB", EnvMySQL, err)
	}
	name := randomName("cl_")
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if db, err := sql.Open("mysql", adminCfg.FormatDSN()); err == nil {
			_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
			db.Close()
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// MySQL returns a database/sql handle on a fresh MySQL/MariaDB database,
// closed when the test ends.
func MySQL(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", MySQLDSN(t))
	require.NoError(t, err)
	keepIdle(db)
	t.Cleanup(func() { db.Close() })
	return db
}

// keepIdle raises database/sql's idle-connection limit (2 by default) so
// that a contention test's goroutines reuse connections instead of opening
// and closing one per statement: with every test package running at once,
// that churn can make the server's accept queue overflow and connects time
// out.
func keepIdle(db *sql.DB) { db.SetMaxIdleConns(32) }

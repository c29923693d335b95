// Package testengine opens claimlock dialects on the real test databases of
// internal/testkit/dbtest, for the test suites of the orchestration packages and
// for their child processes (which reopen a database from its DSN).
package testengine

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// Engine names. PostgresStdlib is PostgreSQL through database/sql and
// pgx's stdlib driver (postgres.NewStdlib); it is not in [All], for suites
// that want both PostgreSQL paths.
const (
	SQLite         = "sqlite"
	Postgres       = "postgres"
	PostgresStdlib = "postgres-stdlib"
	MySQL          = "mysql"
)

// Engine is one database engine the suites run on.
type Engine struct {
	// Name is SQLite, Postgres or MySQL.
	Name string
	// DSN creates a fresh, isolated database (file, schema or database)
	// for the test and returns how to reach it; without a server it skips
	// or fails as internal/testkit/dbtest decides.
	DSN func(t testing.TB) string
}

// All lists every engine.
var All = []Engine{
	{SQLite, func(t testing.TB) string { return dbtest.SQLitePath(t) }},
	{Postgres, func(t testing.TB) string { return dbtest.PostgresDSN(t) }},
	{MySQL, func(t testing.TB) string { return dbtest.MySQLDSN(t) }},
}

// ByName returns the engine called name.
func ByName(name string) (Engine, bool) {
	for _, e := range All {
		if e.Name == name {
			return e, true
		}
	}
	return Engine{}, false
}

// Conn is an open test database: the dialect, and a database/sql handle on
// the same database for the test's own statements (seeding rows, reading
// them back), which use $n placeholders when Dollar is set and ? otherwise.
type Conn struct {
	Engine  string
	DSN     string
	Dialect dialect.Dialect
	DB      *sql.DB
	Dollar  bool
}

// Connect opens engine name at dsn with at most maxConns connections (0
// keeps the driver's default) and the dialect options opts. PostgreSQL goes
// through pgxpool (the native path) or, for PostgresStdlib, database/sql;
// MySQL/MariaDB through mysql.Open (READ COMMITTED sessions).
func Connect(ctx context.Context, name, dsn string, maxConns int, opts dialect.Options) (*Conn, func(), error) {
	c := &Conn{Engine: name, DSN: dsn}
	switch name {
	case SQLite:
		db, err := sqlite.Open(dsn)
		if err != nil {
			return nil, nil, err
		}
		if maxConns > 0 {
			db.SetMaxOpenConns(maxConns)
		}
		d, err := sqlite.New(ctx, db, opts)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		c.Dialect, c.DB = d, db
		return c, func() { db.Close() }, nil
	case Postgres:
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, nil, err
		}
		if maxConns > 0 {
			cfg.MaxConns = int32(maxConns)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		d, err := postgres.New(ctx, pool, opts)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		raw := stdlib.OpenDBFromPool(pool)
		c.Dialect, c.DB, c.Dollar = d, raw, true
		return c, func() {
			raw.Close()
			if !dbtest.ClosePool(pool) {
				fmt.Fprintf(os.Stderr, "testengine: %d connections of the pool still in use %v after the test (a held claim or transaction left open); not waiting for them\n",
					pool.Stat().AcquiredConns(), dbtest.PoolCloseWait)
			}
		}, nil
	case PostgresStdlib:
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, nil, err
		}
		if maxConns > 0 {
			db.SetMaxOpenConns(maxConns)
		}
		db.SetMaxIdleConns(max(maxConns, 32))
		d, err := postgres.NewStdlib(ctx, db, opts)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		c.Dialect, c.DB, c.Dollar = d, db, true
		return c, func() { db.Close() }, nil
	case MySQL:
		db, err := mysql.Open(ctx, dsn)
		if err != nil {
			return nil, nil, err
		}
		if maxConns > 0 {
			db.SetMaxOpenConns(maxConns)
		}
		db.SetMaxIdleConns(max(maxConns, 32))
		d, err := mysql.New(ctx, db, opts)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		c.Dialect, c.DB = d, db
		return c, func() { db.Close() }, nil
	}
	return nil, nil, fmt.Errorf("testengine: unknown engine %q", name)
}

// Open creates a fresh database of e and connects to it; everything is
// closed when the test ends.
func Open(t testing.TB, e Engine, maxConns int) *Conn {
	t.Helper()
	c, closeFn, err := Connect(context.Background(), e.Name, e.DSN(t), maxConns, dialect.Options{})
	require.NoError(t, err)
	t.Cleanup(closeFn)
	return c
}

// Rebind rewrites the ? placeholders of q to $1, $2, ... when dollar is set
// (PostgreSQL), for tests that write one statement for every engine.
func Rebind(q string, dollar bool) string {
	if !dollar {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Reroute returns dsn of engine name with its server's host:port replaced
// by the address via returns for it (a proxy to the server, say), and false
// for SQLite, which has no network to go through.
func Reroute(name, dsn string, via func(server string) string) (string, bool, error) {
	switch name {
	case Postgres, PostgresStdlib:
		u, err := url.Parse(dsn)
		if err != nil || u.Host == "" {
			return "", false, fmt.Errorf("testengine: reroute needs a postgres:// URL: %q", dsn)
		}
		host := u.Host
		if u.Port() == "" {
			host += ":5432"
		}
		u.Host = via(host)
		return u.String(), true, nil
	case MySQL:
		cfg, err := gomysql.ParseDSN(dsn)
		if err != nil {
			return "", false, err
		}
		cfg.Addr = via(cfg.Addr)
		return cfg.FormatDSN(), true, nil
	}
	return dsn, false, nil
}

// Listen runs d's listener (postgres.Dialect.Listen, default ListenConfig)
// until the test ends, and then checks that it returned nil. Wait for
// d.Listening before relying on a notification.
func Listen(t testing.TB, d *postgres.Dialect) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Listen(ctx, postgres.ListenConfig{}) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done, "the listener")
	})
}

// Package exdb opens a database and its claimlock dialect from the
// -driver/-dsn flags shared by the example programs.
package exdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/dialect/sqlite"
)

// DB is an open example database: the dialect for the library and a
// database/sql handle for the example's own statements (the part a user's
// program writes itself).
type DB struct {
	Driver  string
	Dialect dialect.Dialect
	SQL     *sql.DB
	// Path is the SQLite file (empty for servers).
	Path  string
	close func()
}

// Close releases the handles (and removes a temporary SQLite directory).
func (d *DB) Close() { d.close() }

// Ph returns the n-th (1-based) placeholder of the driver.
func (d *DB) Ph(n int) string {
	if d.Driver == "postgres" {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// Q quotes an identifier: the names are constants of the example (letters,
// digits and underscores), so quoting is all they need.
func (d *DB) Q(name string) string {
	if d.Driver == "postgres" {
		return `"` + name + `"`
	}
	return "`" + name + "`"
}

// Open connects to driver ("sqlite", "mysql" or "postgres") at dsn. An empty
// SQLite dsn creates a database file in a new temporary directory, removed
// by Close unless keep is set.
func Open(ctx context.Context, driver, dsn string, keep bool) (*DB, error) {
	return OpenWith(ctx, driver, dsn, keep, dialect.Options{})
}

// OpenWith is Open with the dialect's options (a retry policy whose
// OnRetry counts retries, say).
func OpenWith(ctx context.Context, driver, dsn string, keep bool, opts dialect.Options) (*DB, error) {
	switch driver {
	case "sqlite":
		var tmp string
		if dsn == "" {
			dir, err := os.MkdirTemp("", "claimlock-example-")
			if err != nil {
				return nil, err
			}
			tmp, dsn = dir, filepath.Join(dir, "example.db")
		}
		db, err := sqlite.Open(dsn)
		if err != nil {
			return nil, err
		}
		d, err := sqlite.New(ctx, db, opts)
		if err != nil {
			db.Close()
			return nil, err
		}
		return &DB{Driver: driver, Dialect: d, SQL: db, Path: dsn, close: func() {
			db.Close()
			if tmp != "" && !keep {
				os.RemoveAll(tmp)
			}
		}}, nil
	case "mysql", "mariadb":
		if dsn == "" {
			return nil, fmt.Errorf("-driver mysql needs -dsn, e.g. 'root@tcp(127.0.0.1:3306)/test'")
		}
		db, err := mysql.Open(ctx, dsn)
		if err != nil {
			return nil, err
		}
		d, err := mysql.New(ctx, db, opts)
		if err != nil {
			db.Close()
			return nil, err
		}
		return &DB{Driver: "mysql", Dialect: d, SQL: db, close: func() { db.Close() }}, nil
	case "postgres", "postgresql", "pgx":
		if dsn == "" {
			return nil, fmt.Errorf("-driver postgres needs -dsn, e.g. 'postgres://postgres@127.0.0.1:5432/test'")
		}
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			return nil, err
		}
		d, err := postgres.New(ctx, pool, opts)
		if err != nil {
			pool.Close()
			return nil, err
		}
		db := stdlib.OpenDBFromPool(pool)
		return &DB{Driver: "postgres", Dialect: d, SQL: db, close: func() { db.Close(); pool.Close() }}, nil
	}
	return nil, fmt.Errorf("unknown -driver %q (want sqlite, mysql or postgres)", driver)
}

// In renders "(ph, ph, ...)" for n values starting at placeholder first.
func (d *DB) In(n, first int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = d.Ph(first + i)
	}
	return "(" + strings.Join(ps, ", ") + ")"
}

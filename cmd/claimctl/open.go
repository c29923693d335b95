package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/dialect/sqlite"
)

// connect opens the dialect o names and the database/sql handle of its
// database (for PostgreSQL, over the dialect's pool: package coalesce
// reads through one). Failures are connection errors; a missing SQLite
// file is one too (opening it would create it).
func connect(ctx context.Context, o *options) (dialect.Dialect, *sql.DB, func(), error) {
	if o.DSN == "" {
		return nil, nil, nil, usageErr("-dsn is required (or set CLAIMCTL_DSN)")
	}
	conn := func(err error) error { return &exitError{code: exitConnect, err: err} }
	switch o.Driver {
	case "postgres", "postgresql":
		cfg, err := pgxpool.ParseConfig(o.DSN)
		if err != nil {
			return nil, nil, nil, usageErr("-dsn: %v", err)
		}
		cfg.MaxConns = 2
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, nil, conn(err)
		}
		d, err := postgres.New(ctx, pool, dialect.Options{})
		if err != nil {
			pool.Close()
			return nil, nil, nil, conn(err)
		}
		db := stdlib.OpenDBFromPool(pool)
		return d, db, func() { db.Close(); pool.Close() }, nil
	case "mysql", "mariadb":
		db, err := mysql.Open(ctx, o.DSN)
		if err != nil {
			if errors.Is(err, dialect.ErrInvalidConfig) {
				return nil, nil, nil, usageErr("-dsn: %v", err)
			}
			return nil, nil, nil, conn(err)
		}
		db.SetMaxOpenConns(2)
		d, err := mysql.New(ctx, db, dialect.Options{})
		if err != nil {
			db.Close()
			return nil, nil, nil, conn(err)
		}
		return d, db, func() { db.Close() }, nil
	case "sqlite":
		if o.DSN != ":memory:" {
			if _, err := os.Stat(o.DSN); errors.Is(err, fs.ErrNotExist) {
				return nil, nil, nil, conn(fmt.Errorf("sqlite: no database file %s (claimctl does not create one)", o.DSN))
			}
		}
		db, err := sqlite.Open(o.DSN)
		if err != nil {
			return nil, nil, nil, conn(err)
		}
		d, err := sqlite.New(ctx, db, dialect.Options{})
		if err != nil {
			db.Close()
			return nil, nil, nil, conn(err)
		}
		return d, db, func() { db.Close() }, nil
	case "":
		return nil, nil, nil, usageErr("-driver is required: postgres, mysql or sqlite")
	}
	return nil, nil, nil, usageErr("-driver %q: want postgres, mysql or sqlite", o.Driver)
}

// schemaErr classifies an error of a catalog check: a mismatch of the
// description and the database is a schema error, anything else a failure.
func schemaErr(err error) error {
	if errors.Is(err, dialect.ErrInvalidConfig) {
		return &exitError{code: exitSchema, err: err}
	}
	return err
}

// oneLine folds an error message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

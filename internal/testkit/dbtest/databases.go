package dbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mainRunning is set by Main: only Main can drop the leased databases when
// the test binary ends.
var mainRunning atomic.Bool

// databases is the test binary's PostgreSQL databases for
// [PostgresDatabase]: every one it created, and those free for a lease.
var databases = struct {
	sync.Mutex
	all, free []string
}{}

// PostgresDatabase leases t an empty database of its own on the
// PostgreSQL server of CLAIMLOCK_POSTGRES_DSN and returns its name: no
// other test uses it until t ends.
//
// It is the isolation for tests that reach the server through a pooler in
// transaction mode (PgBouncer pool_mode = transaction), which does not keep
// the search_path startup parameter [PostgresDSN] isolates a test with but
// routes a connection by its database name. Creating and dropping a
// database costs a checkpoint, seconds on a busy server, so the databases
// are created on first demand and reused: when t ends, every server
// session on its database is ended (a pooler's idle server connections
// included, so that they hold no server slot), every schema in it is
// dropped and an empty public schema created, and it goes back to the free
// list. A database that does not come back empty is dropped instead. [Main]
// drops them all when the test binary ends, so a package that calls this
// must run its tests through Main; otherwise the test fails.
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	if !mainRunning.Load() {
		t.Fatal("dbtest.PostgresDatabase needs the package's TestMain to call dbtest.Main, which drops the databases when the tests end")
	}
	base, err := postgresBase()
	if err != nil {
		unavailable(t, "PostgreSQL", EnvPostgres, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("pgx", base)
	require.NoError(t, err)
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		unavailable(t, "PostgreSQL", EnvPostgres, err)
	}
	databases.Lock()
	var name string
	if n := len(databases.free); n > 0 {
		name, databases.free = databases.free[n-1], databases.free[:n-1]
	}
	databases.Unlock()
	if name == "" {
		name = randomName("cl_db_")
		_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name)
		require.NoError(t, err)
		databases.Lock()
		databases.all = append(databases.all, name)
		databases.Unlock()
	}
	t.Cleanup(func() {
		if err := resetDatabase(base, name); err != nil {
			t.Logf("dbtest: database %s not reused: %v", name, err)
			if err := dropDatabase(base, name); err != nil {
				t.Logf("dbtest: %v", err)
			}
			return
		}
		databases.Lock()
		databases.free = append(databases.free, name)
		databases.Unlock()
	})
	return name
}

// resetDatabase ends every session on database name, drops every schema in
// it, creates an empty public schema and checks that no relation is left.
func resetDatabase(base, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name); err != nil {
		return fmt.Errorf("end the sessions on %s: %w", name, err)
	}
	db, err := sql.Open("pgx", withPostgresDatabase(base, name))
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT nspname FROM pg_namespace
WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\_%'`)
	if err != nil {
		return err
	}
	var schemas []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return err
		}
		schemas = append(schemas, s)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, s := range schemas {
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+quoteIdent(s)+" CASCADE"); err != nil {
			return err
		}
	}
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA public"); err != nil {
		return err
	}
	var left int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'`).Scan(&left); err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("%d relations left in %s after dropping its schemas", left, name)
	}
	return nil
}

// dropDatabase drops database name, ending its sessions (PostgreSQL 13+).
func dropDatabase(base, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// dropDatabases drops every database PostgresDatabase created, in
// parallel: each drop waits for a checkpoint.
func dropDatabases() error {
	databases.Lock()
	all := databases.all
	databases.all, databases.free = nil, nil
	databases.Unlock()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, name := range all {
		wg.Go(func() { errs[i] = dropDatabase(pgBase, name) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func quoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}

// withPostgresDatabase is dsn with its database replaced by name.
func withPostgresDatabase(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path = "/" + name
			return u.String()
		}
	}
	return dsn + " dbname=" + name
}

// Command migrate applies the cron story's schema changes for claimlock the
// way a migration tool does: numbered SQL files, each applied once and
// recorded in a schema_migrations table. 0001 is the story's schema as it
// was; 0002 is exactly what `claimctl ddl -config claimctl.json` printed
// for that schema on the engine (the claim and lease columns the tables
// lack and the recommended indexes), so goose, golang-migrate or atlas can
// take the same files. It uses database/sql only, so the example adds no
// dependency.
//
// 0002 builds its indexes online, for tables in use (see
// store.IndexOptions): on PostgreSQL with CREATE INDEX CONCURRENTLY,
// which does not block writes but cannot run inside a transaction block,
// so a migration tool must run that file outside one, statement by
// statement (goose: a "-- +goose NO TRANSACTION" annotation), as this
// program does; on MySQL and MariaDB with ALGORITHM=INPLACE LOCK=NONE. A
// CONCURRENTLY build that fails or is interrupted leaves an INVALID index
// that IF NOT EXISTS skips when the file runs again: run `claimctl ddl`
// again, which prints the DROP INDEX that removes it before its CREATE
// INDEX.
//
//	go run ./examples/migrate -driver sqlite -dsn cron.db
//	go run ./examples/migrate -driver postgres -dsn postgres://...
//	go run ./examples/migrate -driver mysql -dsn 'user:pw@tcp(host:3306)/db'
package main

import (
	"context"
	"database/sql"
	"embed"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/dialect/sqlite"
)

//go:embed migrations
var migrations embed.FS

func main() {
	driver := flag.String("driver", "sqlite", "postgres, mysql or sqlite")
	dsn := flag.String("dsn", "cron.db", "data source name")
	flag.Parse()
	if err := run(context.Background(), *driver, *dsn, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, driver, dsn string, out io.Writer) error {
	db, err := open(ctx, driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return apply(ctx, db, driver, out)
}

func open(ctx context.Context, driver, dsn string) (*sql.DB, error) {
	switch driver {
	case "postgres":
		return sql.Open("pgx", dsn)
	case "mysql":
		return mysql.Open(ctx, dsn)
	case "sqlite":
		return sqlite.Open(dsn)
	}
	return nil, fmt.Errorf("unknown driver %q", driver)
}

// apply runs every migration of driver not yet recorded, in file order.
func apply(ctx context.Context, db *sql.DB, driver string, out io.Writer) error {
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS schema_migrations (version VARCHAR(255) PRIMARY KEY)"); err != nil {
		return err
	}
	dir := path.Join("migrations", driver)
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	mark := "?"
	if driver == "postgres" {
		mark = "$1"
	}
	for _, name := range names {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations WHERE version = "+mark, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		src, err := fs.ReadFile(migrations, path.Join(dir, name))
		if err != nil {
			return err
		}
		// MySQL commits each DDL statement on its own, so a migration is
		// applied statement by statement everywhere; its record is written
		// last, so a failed one is retried whole (its statements are
		// written to be re-run where the engine allows: IF NOT EXISTS).
		for _, stmt := range statements(string(src)) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO schema_migrations (version) VALUES ("+mark+")", name); err != nil {
			return err
		}
		fmt.Fprintln(out, "applied", name)
	}
	return nil
}

// statements splits a migration file into statements: they end with ";"
// at the end of a line, and lines starting with "--" are comments.
func statements(src string) []string {
	var out []string
	var cur []string
	for _, l := range strings.Split(src, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur = append(cur, l)
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.Join(cur, "\n"), ";"))
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, "\n"))
	}
	return out
}

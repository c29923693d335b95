// Package sqlite is claimlock's dialect for SQLite through modernc.org/sqlite,
// the pure-Go driver (no cgo): the embedded default of the examples and the
// engine of the fast unit tests.
//
// SQLite has one writer at a time, so there is no SKIP LOCKED: every claim is
// a single UPDATE ... WHERE pk IN (SELECT ... ORDER BY pk LIMIT ?) ...
// RETURNING, which SQLite runs as an immediate write transaction. Multi-
// statement operations take BEGIN IMMEDIATE on a dedicated connection so they
// never hit SQLITE_BUSY_SNAPSHOT. Times are stored as integer milliseconds
// since the Unix epoch (UTC), read from SQLite's own clock.
//
// Open the database with [Open] (WAL, busy_timeout, synchronous=NORMAL), or
// pass your own *sql.DB to [New]; New warns through the logger when the
// journal mode is not WAL or busy_timeout is zero.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/claimlock/claimlock/dialect"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// nowMS is SQLite's clock in integer milliseconds since the epoch.
const nowMS = "CAST(unixepoch('subsec') * 1000 AS INTEGER)"

// Dialect is the SQLite implementation of [dialect.Dialect].
type Dialect struct {
	db     *sql.DB
	caps   dialect.Capabilities
	retry  *dialect.Retrier
	logger *slog.Logger
}

var _ dialect.Dialect = (*Dialect)(nil)

// Open opens (creating if needed) the SQLite database at path with the
// settings claimlock wants: WAL journal, a 10 s busy_timeout, synchronous
// NORMAL and foreign keys on. path ":memory:" gives a private in-memory
// database limited to one connection (each connection of an in-memory
// database would otherwise see its own empty database).
func Open(path string) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: sqlite: empty path", dialect.ErrInvalidConfig)
	}
	q := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"
	memory := path == ":memory:"
	dsn := "file:" + path + "?" + q
	if memory {
		dsn = "file::memory:?" + q
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if memory {
		db.SetMaxOpenConns(1)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return db, nil
}

// New returns the dialect for db, a database/sql handle opened with the
// "sqlite" driver of modernc.org/sqlite. It reads the SQLite version (3.35+
// is required for RETURNING) and checks the journal mode and busy timeout.
func New(ctx context.Context, db *sql.DB, opts dialect.Options) (*Dialect, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqlite: nil *sql.DB", dialect.ErrInvalidConfig)
	}
	if err := opts.Retry.Validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&version); err != nil {
		return nil, fmt.Errorf("sqlite: read version: %w", err)
	}
	if !atLeast(version, 3, 42) {
		return nil, fmt.Errorf("%w: sqlite: version %s is older than 3.42 (RETURNING and unixepoch('subsec') are needed)", dialect.ErrNotSupported, version)
	}
	var mode string
	var busy int
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err == nil && !strings.EqualFold(mode, "wal") && !strings.EqualFold(mode, "memory") {
		logger.Warn("claimlock: sqlite journal_mode is not WAL; readers will block the writer", "journal_mode", mode)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err == nil && busy == 0 {
		logger.Warn("claimlock: sqlite busy_timeout is 0; concurrent writers will see SQLITE_BUSY at once (open with sqlite.Open or add _pragma=busy_timeout(10000))")
	}
	return &Dialect{
		db: db,
		caps: dialect.Capabilities{
			Engine: dialect.EngineSQLite, Version: version,
			SkipLocked: false, Returning: true,
			PreferredStrategy: dialect.StrategyTokenUpdate,
			ClaimConcurrency:  claimConcurrency,
		},
		retry:  dialect.NewRetrier(opts.Retry),
		logger: logger,
	}, nil
}

// claimConcurrency is [dialect.Capabilities.ClaimConcurrency] on SQLite: no
// bound. SQLite runs one writer at a time and makes the others poll through
// the busy handler, which sleeps in growing steps and is not fair. Measured
// with examples/claimbench (2 cores, batch 100, 100,000 rows, three runs),
// one claim in flight per claimer cut the p99 claim latency of 16 workers in
// one process from 0.46-0.74 s to 55-77 ms for a median throughput 5-10%
// lower; but with three processes sharing the file (claim's TestNeverOverlap
// under the race detector) it made the run 2-3x slower and once left a
// process without a single claim: the one claim a process lets through
// sleeps in the busy handler while the process's other workers wait behind
// it, and the processes that are not sleeping take the lock. Cross-process
// fairness decides.
const claimConcurrency = 0

func atLeast(version string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(version, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// Capabilities implements [dialect.Dialect].
func (d *Dialect) Capabilities() dialect.Capabilities { return d.caps }

// Retries implements [dialect.Dialect].
func (d *Dialect) Retries() int64 { return d.retry.Retries() }

// QuoteIdent implements [dialect.Dialect] with double quotes.
func (d *Dialect) QuoteIdent(field, name string) (string, error) {
	return dialect.Quote(field, name, '"')
}

func quote(name string) string {
	s, _ := dialect.Quote("", name, '"')
	return s
}

// ExecDDL implements [dialect.Dialect].
func (d *Dialect) ExecDDL(ctx context.Context, stmts []string) error {
	for _, s := range stmts {
		if _, err := d.db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sqlite: ddl %q: %w", s, interpretError(err))
		}
	}
	return nil
}

// CreateTableDDL implements [dialect.Dialect].
func (d *Dialect) CreateTableDDL(def dialect.TableDef) ([]string, error) {
	if err := def.Validate(); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (", quote(def.Table))
	serialPK := false
	for i, c := range def.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(c.Name))
		switch c.Type {
		case dialect.TypeSerial:
			b.WriteString(" INTEGER PRIMARY KEY AUTOINCREMENT")
			serialPK = true
			continue
		case dialect.TypeInt, dialect.TypeTime:
			b.WriteString(" INTEGER")
		case dialect.TypeText:
			b.WriteString(" TEXT")
		}
		if c.NotNull {
			b.WriteString(" NOT NULL")
		}
		if c.Default != nil {
			b.WriteString(" DEFAULT " + c.Default.Literal())
		}
	}
	if len(def.PrimaryKey) > 0 && !serialPK {
		pk := make([]string, len(def.PrimaryKey))
		for i, c := range def.PrimaryKey {
			pk[i] = quote(c)
		}
		fmt.Fprintf(&b, ", PRIMARY KEY (%s)", strings.Join(pk, ", "))
	}
	b.WriteString(")")
	out := []string{b.String()}
	for _, ix := range def.Indexes {
		cols := make([]string, len(ix.Columns))
		for i, c := range ix.Columns {
			cols[i] = quote(c)
		}
		u := ""
		if ix.Unique {
			u = "UNIQUE "
		}
		out = append(out, fmt.Sprintf("CREATE %sINDEX IF NOT EXISTS %s ON %s (%s)", u, quote(ix.Name), quote(def.Table), strings.Join(cols, ", ")))
	}
	return out, nil
}

// IsRetryable reports whether err is SQLITE_BUSY or SQLITE_LOCKED (any
// extended code), the errors claimlock retries.
func IsRetryable(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

// interpretError marks retryable engine errors; others pass through.
func interpretError(err error) error {
	if err == nil || dialect.IsRetryable(err) {
		return err
	}
	if IsRetryable(err) {
		return &dialect.RetryableError{Err: err}
	}
	return err
}

// immediate runs fn inside BEGIN IMMEDIATE on one connection, committing on
// success and rolling back otherwise.
func (d *Dialect) immediate(ctx context.Context, fn func(*sql.Conn) error) (err error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return interpretError(err)
	}
	defer func() {
		if err != nil {
			// A context cancelled mid-transaction must not leave the
			// connection inside it: roll back without the caller's context.
			if _, rbErr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil {
				// Never return a connection that may still be inside a
				// transaction to the pool.
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}
	}()
	if err := fn(conn); err != nil {
		return interpretError(err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return interpretError(err)
	}
	return nil
}

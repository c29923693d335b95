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
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// handle carries the engine inside Dialect; its field name is unexported,
// so users cannot reach it.
type handle = store.Handle

// Dialect is the SQLite implementation of [dialect.Dialect].
type Dialect struct {
	handle
	b *store.Base // the engine the handle carries
}

var _ dialect.Dialect = (*Dialect)(nil)

func init() { errclass.Register(classify) }

// Open opens (creating if needed) the SQLite database at path with the
// settings claimlock wants: WAL journal, a 10 s busy_timeout, synchronous
// NORMAL and foreign keys on. path ":memory:" gives a private in-memory
// database limited to one connection (each connection of an in-memory
// database would otherwise see its own empty database).
//
// Transactions begun on the handle (BeginTx) are write transactions, BEGIN
// IMMEDIATE (modernc's _txlock=immediate): one that reads and then writes,
// such as a handler's effect with its ack (claim's Batch.AckTx),
// waits for the write lock at BEGIN, up to the busy timeout, instead of
// failing with SQLITE_BUSY when another connection wrote first (waiting
// cannot help a deferred transaction that read an older snapshot). Begin
// read-only transactions with sql.TxOptions{ReadOnly: true}: they stay
// deferred and do not wait for writers.
func Open(path string) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("sqlite: %w: empty path", dialect.ErrInvalidConfig)
	}
	q := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"
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
		return nil, fmt.Errorf("sqlite: %w: nil *sql.DB", dialect.ErrInvalidConfig)
	}
	logger, err := store.CheckOptions("sqlite", opts)
	if err != nil {
		return nil, err
	}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&version); err != nil {
		return nil, fmt.Errorf("sqlite: read version: %w", err)
	}
	if !atLeast(version, 3, 42) {
		return nil, fmt.Errorf("sqlite: %w: version %s is older than 3.42 (RETURNING and unixepoch('subsec') are needed)", dialect.ErrNotSupported, version)
	}
	var mode string
	var busy int
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err == nil && !strings.EqualFold(mode, "wal") && !strings.EqualFold(mode, "memory") {
		logger.Warn("claimlock: sqlite journal_mode is not WAL; readers will block the writer", "journal_mode", mode)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err == nil && busy == 0 {
		logger.Warn("claimlock: sqlite busy_timeout is 0; concurrent writers will see SQLITE_BUSY at once (open with sqlite.Open or add _pragma=busy_timeout(10000))")
	}
	return build(db, version, opts, logger), nil
}

// build assembles the dialect for a database of the given version.
func build(db *sql.DB, version string, opts dialect.Options, logger *slog.Logger) *Dialect {
	d := &Dialect{b: &store.Base{}}
	d.handle = store.NewHandle(d.b)
	// Multi-statement operations run in BEGIN IMMEDIATE transactions,
	// which take the write lock at once and so never fail later with
	// SQLITE_BUSY_SNAPSHOT.
	d.b.E = &store.Engine{
		Name: "sqlite", DB: store.ConnDB{DB: db, BeginSQL: []string{"BEGIN IMMEDIATE"}}, Classify: classify, Returning: true, FoldCase: true,
		Dialect: store.Dialect{TimeUnit: store.Milliseconds},
		Quote:   quote,
		Retry:   store.NewRetrier(opts.Retry),
		Logger:  logger,
		Caps: dialect.Capabilities{
			Engine: dialect.EngineSQLite, Version: version,
			SkipLocked: false, Returning: true,
			PreferredStrategy: dialect.StrategyTokenUpdate,
			ClaimConcurrency:  claimConcurrency,
			PipelineAckClaim:  pipelineAckClaim,
		},
		CheckTime: checkTime, TextTimes: true, WideInts: true, IntTimes: true,
		DDL: store.DDL{Int: "INTEGER", Time: "INTEGER", TimeSeconds: "INTEGER", Text: "TEXT", Serial: "INTEGER PRIMARY KEY AUTOINCREMENT", SerialIsKey: true},
	}
	d.b.Claims, d.b.Leases, d.b.Schedules = claimSQL, leaseSQL, scheduleSQL
	return d
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

// quote quotes one identifier part that was validated already. SQLite
// takes a double-quoted name it cannot resolve to a column for a string
// literal (its "double-quoted string literal" compatibility rule): a column
// dropped or misspelt after verification would then read as its own name,
// and `WHERE "status" = 'PENDING'` would compare two strings. A
// backquoted name is always an identifier, so a missing column fails the
// statement instead.
var quote = store.QuoteWith('`')

// checkTime keeps the two time conventions apart: a column declared as a
// date or text type holds text dates in the application's code, and gets
// claimlock's text dates only with TextTimes (ClaimTable.TextTimes,
// LeaseTable.TextTimes); any other column gets integer milliseconds.
func checkTime(c store.ColumnInfo, f dialect.TimeFormat, textTimes bool) (string, error) {
	t := strings.ToUpper(c.Type)
	textual := strings.Contains(t, "DATE") || strings.Contains(t, "TIME") || strings.Contains(t, "CHAR") ||
		strings.Contains(t, "TEXT") || strings.Contains(t, "CLOB")
	switch {
	case f.IsUnix() && textual:
		return "", fmt.Errorf("is declared %s, for text dates, but %s writes integers into it: declare it INTEGER, or describe it with TextTimes", c.Type, f)
	case f.IsUnix():
		return "", nil // INTEGER or no type: the store checked it
	case textual && !textTimes:
		return "", fmt.Errorf("is declared %s, for text dates, and claimlock would write integer milliseconds into it: set TextTimes (ClaimTable.TextTimes, LeaseTable.TextTimes) or declare it INTEGER", c.Type)
	case !textual && textTimes && t != "":
		return "", fmt.Errorf("is declared %s, not a date or text type, but TextTimes writes text dates into it", c.Type)
	}
	return "", nil
}

// classify sorts modernc's errors: SQLITE_BUSY and SQLITE_LOCKED (any
// extended code) are busy, SQLITE_CANTOPEN and driver.ErrBadConn
// unreachable (nothing ran), constraint violations of a unique key or primary
// key duplicates, SQLITE_READONLY read-only.
func classify(err error) errclass.Class {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		if errors.Is(err, driver.ErrBadConn) {
			// database/sql's contract: a driver returns it only when
			// nothing was done.
			return errclass.Unreachable
		}
		return errclass.Other
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return errclass.Busy
	case sqlite3.SQLITE_CANTOPEN:
		// The file could not be opened: nothing ran.
		return errclass.Unreachable
	case sqlite3.SQLITE_READONLY:
		return errclass.ReadOnly
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return errclass.Duplicate
	}
	switch se.Code() & 0xff {
	// SQLITE_ERROR is a statement SQLite refuses as written (no such table
	// or column, a syntax error); the others refuse the data or the access.
	case sqlite3.SQLITE_ERROR, sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return errclass.Permanent
	}
	return errclass.Other
}

// Package store is claimlock's engine-neutral store: everything about
// running claim and lease operations that is not SQL, and the contract the
// engine packages implement (the dialect package doc says why it is
// internal). It validates parameters, runs statements under the shared
// retry policy, opens and rolls back transactions, turns results into lost
// / requeued / parked keys, checks schemas and indexes against the catalog,
// and wraps errors once.
//
// An engine package (dialect/mysql, dialect/postgres, dialect/sqlite)
// supplies an [Engine]: a handle to run statements on ([DB]), its error
// classifier, its placeholder style, and its statements as text/template
// sources ([ClaimSQL], [LeaseSQL]) rendered once when a store is built,
// placeholder names checked then (see [Stmt]). Only where an engine's
// protocol truly differs does it override a step (MySQL's claim without
// RETURNING, SQLite's immediate transactions through its [DB]).
//
// This package is not for users: its API changes whenever the engines need
// it to.
package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
)

// Rows is the part of a result set the store reads (pgx.Rows and *sql.Rows
// both fit, the latter through [ConnDB]).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Querier runs statements: a pool or a transaction.
type Querier interface {
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	Query(ctx context.Context, q string, args ...any) (Rows, error)
}

// Tx is a transaction started by [DB.Begin].
type Tx interface {
	Querier
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// DB is the engine's connection pool. Begin starts the transaction claimlock
// runs multi-statement operations in: READ COMMITTED on MySQL and
// PostgreSQL, BEGIN IMMEDIATE on SQLite.
type DB interface {
	Querier
	Begin(ctx context.Context) (Tx, error)
}

// Engine is what one engine package supplies to the store.
type Engine struct {
	// Name is the engine package's name, for messages ("mysql").
	Name string
	// DB runs the statements.
	DB DB
	// Dialect is the placeholder style, key lists and time unit.
	Dialect Dialect
	// Quote quotes one validated identifier part.
	Quote func(part string) string
	// Classify sorts an engine error into a class; it must recognise the
	// driver's own error types (errors.As).
	Classify func(error) errclass.Class
	// Returning is true where UPDATE ... RETURNING exists: claims and acks
	// read their rows from the writing statement.
	Returning bool
	// FoldCase is true where column names are case-insensitive (MySQL,
	// SQLite): catalog names are compared in lower case.
	FoldCase bool
	// Retry is the dialect's retrier.
	Retry *Retrier
	// Logger receives warnings; never nil.
	Logger *slog.Logger
	// Caps are the server's capabilities.
	Caps dialect.Capabilities
	// DDL is how the engine renders portable table definitions.
	DDL DDL
	// IsolateWrites runs reap statements in a [DB.Begin] transaction
	// (MySQL sessions that are not READ COMMITTED).
	IsolateWrites bool
	// CheckTime, if set, refuses a time column whose type the engine cannot
	// compare safely with its clock in format f, or that holds another
	// convention than the one configured (textTimes: ClaimTable.TextTimes),
	// with an error that completes "column t.c ..." and says what to use;
	// a warning, if not "", is logged (a type that works with limits). The
	// store itself checks the integer range of unix-time columns.
	CheckTime func(c ColumnInfo, f dialect.TimeFormat, textTimes bool) (warning string, err error)
	// IntTimes is true where the engine's own time convention is an
	// integer (SQLite's milliseconds), so that an integer column described
	// as a native time is not refused.
	IntTimes bool
	// TextTimes is true where ClaimTable.TextTimes and LeaseTable.TextTimes
	// are supported (SQLite).
	TextTimes bool
	// WideInts is true where every integer column holds any 64-bit value
	// whatever its declared width (SQLite); otherwise the catalog's type
	// names bound them (TINYINT, smallint, INT UNSIGNED, ...).
	WideInts bool
	// KeyHint is true where the statements that find rows by a list of
	// keys (acks, their row locks, releases of listed rows) are also
	// rendered with Names.KeyHint, naming the primary key: they are used
	// once VerifySchema found that the key column is the primary key
	// (MySQL, whose optimizer otherwise scans a small table whole and
	// locks every row it reads in a REPEATABLE READ transaction).
	KeyHint bool
	// CallerTx, if set, adapts a transaction of the engine's own driver
	// that the caller passes to the ...Tx operations, reporting false for
	// another type; a *sql.Tx is always taken. TxType names what it takes,
	// for errors.
	CallerTx func(tx any) (Querier, bool)
	TxType   string
	// Notify, if set, is sent after a statement of a claim store returned
	// rows to pending (release, retried fail, requeued ack, reap).
	Notify NotifyFunc
}

// Slack is the margin added to every expiry and staleness comparison
// before a store has read its time columns' precision from the catalog:
// one second, the coarsest precision a user's column commonly has. A column
// that holds whole seconds stores a time up to a second early (MariaDB
// truncates fractional seconds; MySQL and PostgreSQL round them), so an
// expiry computed from it can come up to a second early. Comparisons add the
// column's resolution, erring towards "still held": a lease or claim is
// never taken over before its true expiry, at the price of a takeover up to
// one resolution step late. After VerifySchema the slack is the columns'
// actual resolution (zero for microsecond columns).
const Slack = time.Second

// TextSlack is the margin of every expiry test on text dates
// (LeaseTable.TextTimes): the application's own text dates hold whole
// seconds (SQLite's datetime('now') and CURRENT_TIMESTAMP), whatever the
// column's declared type says.
const TextSlack = time.Second

// QuoteName quotes a validated, possibly schema-qualified name.
func (e *Engine) QuoteName(name string) string {
	schema, table := SplitName(name)
	if schema == "" {
		return e.Quote(table)
	}
	return e.Quote(schema) + "." + e.Quote(table)
}

// SplitName splits schema.table; schema is "" for a one-part name.
func SplitName(name string) (schema, table string) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i], name[i+1:]
		}
	}
	return "", name
}

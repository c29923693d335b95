package store

import (
	"context"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store/render"
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

// Driver is what one engine package supplies to the store: a pool to run
// statements on, its statements and how it writes them, how it classifies
// its errors, and what its catalog and column types allow. Everything that
// is not SQL (parameter checks, retries, transactions, result
// interpretation, schema verification) is the store's. An engine package
// implements it once, on an unexported type, and passes it to
// [NewBackend]; the store reads its statements and settings once, there.
//
// Where an engine's protocol truly differs, its Driver also implements an
// optional interface: [ClaimOverride] (a claim that is not one statement
// with RETURNING), [TxAdapter] (the caller's transactions of the engine's
// own driver), [PendingNotifier] (notifications of pending rows).
type Driver interface {
	// Name is the engine package's name, for messages ("mysql").
	Name() string
	// DB runs the statements.
	DB() DB
	// Capabilities are the server's. Capabilities().Returning says that
	// UPDATE ... RETURNING exists: claims and acks then read their rows from
	// the writing statement.
	Capabilities() dialect.Capabilities
	// Style is how the engine writes placeholders, key lists and durations.
	Style() render.Style
	// Quote quotes one validated identifier part.
	Quote(part string) string
	// Classify sorts an engine error into a class; it must recognise the
	// driver's own error types (errors.As).
	Classify(err error) errclass.Class
	// ClaimSQL, LeaseSQL and ScheduleSQL are the engine's statements as
	// text/template sources.
	ClaimSQL() ClaimSQL
	LeaseSQL() LeaseSQL
	ScheduleSQL() ScheduleSQL
	// DDL is how the engine renders portable table definitions.
	DDL() DDL
	// CheckTime refuses a time column whose type the engine cannot compare
	// safely with its clock in format f, or that holds another convention
	// than the one configured (textTimes: ClaimTable.TextTimes), with an
	// error that completes "column t.c ..." and says what to use; a
	// warning, if not "", is logged (a type that works with limits). The
	// store itself checks the integer range of unix-time columns.
	CheckTime(c ColumnInfo, f dialect.TimeFormat, textTimes bool) (warning string, err error)
	// FoldsCase reports column names that are case-insensitive (MySQL,
	// SQLite): catalog names are compared in lower case.
	FoldsCase() bool
	// IsolatesWrites reports sessions that are not READ COMMITTED (MySQL
	// opened without it): reap statements then run in a [DB.Begin]
	// transaction, which is.
	IsolatesWrites() bool
	// IntTimes reports an engine whose own time convention is an integer
	// (SQLite's milliseconds), so that an integer column described as a
	// native time is not refused.
	IntTimes() bool
	// SupportsTextTimes reports support for ClaimTable.TextTimes and
	// LeaseTable.TextTimes (SQLite).
	SupportsTextTimes() bool
	// WideInts reports an engine where every integer column holds any
	// 64-bit value whatever its declared width (SQLite); otherwise the
	// catalog's type names bound them (TINYINT, smallint, INT UNSIGNED, ...).
	WideInts() bool
	// HintsKeys reports an engine whose statements that find rows by a list
	// of keys (acks, their row locks, releases of listed rows) are also
	// rendered with ClaimVariant.KeyHint, naming the primary key: they are
	// used once VerifySchema found that the key column is the primary key
	// (MySQL, whose optimizer otherwise scans a small table whole and
	// locks every row it reads in a REPEATABLE READ transaction).
	HintsKeys() bool
}

// TxAdapter is the optional interface of a [Driver] that takes a
// transaction of its engine's own driver in the ...Tx operations
// (PostgreSQL on a pgxpool: a pgx.Tx). A *sql.Tx is always taken.
type TxAdapter interface {
	// CallerTx adapts tx, reporting false for another type.
	CallerTx(tx any) (Querier, bool)
	// CallerTxType names the type CallerTx takes, for errors ("" when it
	// takes none).
	CallerTxType() string
}

// PendingNotifier is the optional interface of a [Driver] that tells the
// claimers of other processes when rows become pending (PostgreSQL's
// NOTIFY) and those of this process when another one made them pending
// (its listener: [Notifier]).
type PendingNotifier interface {
	Notifier
	// NotifyPending tells the claimers of other processes that rows of
	// spec's table became pending: those of the scope scopeValues, or of
	// any scope when scopeValues is nil. The store calls it after a
	// statement that returned rows to pending committed (a release, a
	// retried fail, a requeued ack, a reap).
	NotifyPending(ctx context.Context, spec dialect.ClaimTable, scopeValues []any) error
}

package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/seal"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/store/render"
)

// MinVersionNum is the oldest server_version_num this package accepts:
// PostgreSQL 9.5, the first with FOR UPDATE SKIP LOCKED and ON CONFLICT.
const MinVersionNum = 90500

// backendRef carries the engine's store inside Dialect; its field name is
// unexported, so users cannot reach it.
type backendRef = store.BackendRef

// Dialect is the PostgreSQL implementation of [dialect.Dialect]. It is safe
// for concurrent use.
type Dialect struct {
	backendRef
	versionNum int
	n          *notifier // subscribed claimers and the listener (notify.go)
}

var _ dialect.Dialect = (*Dialect)(nil)

func init() { errclass.Register(classify) }

// New returns the dialect for pool, using pgx's native protocol (the fast
// path: no database/sql in between). It reads the server version once.
// A nil pool is an error wrapping [dialect.ErrInvalidConfig]; a server older
// than 9.5 is one wrapping [dialect.ErrNotSupported].
func New(ctx context.Context, pool *pgxpool.Pool, opts dialect.Options) (*Dialect, error) {
	if pool == nil {
		return nil, fmt.Errorf("postgres: %w: nil *pgxpool.Pool", dialect.ErrInvalidConfig)
	}
	d, err := newDialect(ctx, pgxPool{pool}, opts)
	if err != nil {
		return nil, err
	}
	d.n.connect = connectPool(pool)
	return d, nil
}

// NewStdlib returns the dialect for db, a database/sql handle opened with
// pgx's stdlib driver (driver name "pgx", or stdlib.OpenDB /
// stdlib.OpenDBFromPool). Handles of other drivers are rejected with an
// error wrapping [dialect.ErrInvalidConfig], because claimlock passes typed
// arrays that only pgx encodes. It reads the server version once.
func NewStdlib(ctx context.Context, db *sql.DB, opts dialect.Options) (*Dialect, error) {
	if db == nil {
		return nil, fmt.Errorf("postgres: %w: nil *sql.DB", dialect.ErrInvalidConfig)
	}
	if _, ok := db.Driver().(*stdlib.Driver); !ok {
		return nil, fmt.Errorf("postgres: %w: *sql.DB uses driver %T; open it with pgx's stdlib driver (\"pgx\")", dialect.ErrInvalidConfig, db.Driver())
	}
	d, err := newDialect(ctx, store.ConnDB{DB: db, BeginSQL: []string{"BEGIN ISOLATION LEVEL READ COMMITTED"}, Open: stdlibOpen}, opts)
	if err != nil {
		return nil, err
	}
	d.n.connect = connectDB(db)
	return d, nil
}

func newDialect(ctx context.Context, h store.DB, opts dialect.Options) (*Dialect, error) {
	logger, err := store.CheckOptions("postgres", opts)
	if err != nil {
		return nil, err
	}
	var num int
	var version string
	if _, err := store.QueryRow(ctx, h, render.Style{}, render.Stmt{SQL: "SELECT current_setting('server_version_num')::int, current_setting('server_version')"}, &render.Args{}, &num, &version); err != nil {
		return nil, fmt.Errorf("postgres: read server version: %w", err)
	}
	if num < MinVersionNum {
		return nil, fmt.Errorf("postgres: %w: server %s is older than 9.5 (SKIP LOCKED and ON CONFLICT are needed)", dialect.ErrNotSupported, version)
	}
	return build(h, num, version, opts, logger), nil
}

// build assembles the dialect for a server of the given version.
func build(h store.DB, num int, version string, opts dialect.Options, logger *slog.Logger) *Dialect {
	d := &Dialect{versionNum: num, n: newNotifier(logger)}
	_, pgx := h.(pgxPool)
	drv := &storeDriver{db: h, num: num, version: version, pgx: pgx, n: d.n}
	d.backendRef = store.NewBackend(drv, opts, logger).Ref()
	d.n.probe = func(ctx context.Context, channel string) error {
		_, err := h.Exec(ctx, probeSQL, channel)
		return err
	}
	return d
}

// checkTime accepts timestamptz, the one type that holds a point in time
// natively, and refuses every other with what to use instead. A timestamp
// without time zone is refused: now() is a timestamptz, and comparing or
// storing it there converts it through the session's TimeZone setting, so
// sessions with different settings would disagree about expiries. (The
// store checks unix-time columns, which must be integers, and refuses
// integer columns described as native times.)
func checkTime(c store.ColumnInfo, f dialect.TimeFormat, _ bool) (string, error) {
	const fix = "use timestamptz, or integer unix time (bigint) described as such in the table description"
	if f.IsUnix() {
		return "", nil
	}
	switch {
	case c.Type == "timestamp with time zone":
		return "", nil
	case c.Type == "timestamp without time zone":
		return "", errors.New("is timestamp without time zone; sessions with different TimeZone settings would disagree about expiries (use timestamptz: ALTER TABLE ... ALTER COLUMN ... TYPE timestamptz USING ... AT TIME ZONE 'UTC')")
	case c.Type == "date":
		return "", errors.New("has type date, which holds no time of day: every claim or lease would look up to a day old (" + fix + ")")
	case strings.HasPrefix(c.Type, "time "):
		return "", fmt.Errorf("has type %s, a time of day without a date (%s)", c.Type, fix)
	case c.IsText():
		return "", fmt.Errorf("has type %s: claimlock would overwrite its text with times (%s)", c.Type, fix)
	}
	return "", fmt.Errorf("has type %s, which does not hold a point in time (%s)", c.Type, fix)
}

// quote quotes one identifier part that was validated already.
var quote = store.QuoteWith('"')

// PostgreSQL error codes claimlock classifies.
const (
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
	codeReadOnly             = "25006"
	codeUniqueViolation      = "23505"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	codeTooManyConnections   = "53300"
)

// permanentCode reports the SQLSTATEs of statements that fail the same way
// until the schema, grants or data change: class 42 (syntax error or access
// rule violation: undefined table or column, insufficient privilege), class
// 22 (data exception: a value out of its column's range, too long, of the
// wrong type), 0A (feature not supported), and the integrity violations
// other than a duplicate key (a NULL into a NOT NULL column, a check
// constraint).
func permanentCode(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "42", "22", "0A":
		return true
	}
	switch code {
	case "23502", "23503", "23514":
		return true
	}
	return false
}

// stdlibOpen reports whether a connection of pgx's stdlib driver is open,
// for [store.ConnDB.Open]: its ErrBadConn after a statement sent on the
// simple protocol may hide a statement the server ran (see
// brokenAfterSend).
func stdlibOpen(dc any) bool {
	c, ok := dc.(*stdlib.Conn)
	return ok && !c.Conn().IsClosed()
}

// classify sorts pgx errors by whether anything reached the server. A
// statement pgx never wrote is unreachable: a failed connect (a refused or
// timed-out dial, a name that does not resolve, a server that refused the
// session with 53300 "too many clients" or 57P03 "cannot connect now"), a
// pool that could not hand out a connection, or an error pgx reports as
// safe to retry. A connection that broke once the statement was written is
// a connection error: the statement may have run.
func classify(err error) errclass.Class {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeSerializationFailure:
			return errclass.Serialization
		case codeDeadlockDetected:
			return errclass.Deadlock
		case codeLockNotAvailable:
			return errclass.LockTimeout
		case codeReadOnly:
			return errclass.ReadOnly
		case codeUniqueViolation:
			return errclass.Duplicate
		case codeTooManyConnections, codeCannotConnectNow:
			return errclass.Unreachable
		case codeAdminShutdown, codeCrashShutdown:
			return errclass.Connection
		}
		if permanentCode(pe.Code) {
			return errclass.Permanent
		}
		return errclass.Other
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.Is(err, driver.ErrBadConn) || store.IsDialError(err) {
		return errclass.Unreachable
	}
	var ne net.Error
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, &ne) {
		return errclass.Connection
	}
	return errclass.Other
}

// PgxTx returns the [dialect.Tx] of a pgx transaction begun on the pool the
// dialect was made with ([New]), for completing rows in it
// (claim.AckTx, Batch.AckTx, Batch.FailTx). A *sql.Tx of pgx's stdlib
// driver goes through [dialect.SQLTx] instead.
func PgxTx(tx pgx.Tx) dialect.Tx { return seal.NewTx(tx).(dialect.Tx) }

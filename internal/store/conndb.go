package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
)

// ConnDB runs statements on a database/sql pool, and transactions on one
// pooled connection with plain statements: BeginSQL, then the operation's
// statements, then COMMIT or ROLLBACK. COMMIT is then a statement like any
// other and honours the context (database/sql's Tx.Commit takes none, and
// go-sql-driver/mysql waits for ever for a COMMIT reply that does not come).
type ConnDB struct {
	DB *sql.DB
	// BeginSQL are the statements that start a transaction, in order (for
	// example "BEGIN IMMEDIATE", or "SET TRANSACTION ISOLATION LEVEL READ
	// COMMITTED" then "START TRANSACTION").
	BeginSQL []string
	// Open, if set, reports whether a driver connection (the value
	// sql.Conn.Raw hands out) is open. A statement that fails with
	// driver.ErrBadConn ("nothing was sent") on a connection that was open
	// when it began is then marked [MaybeSent]: pgx's stdlib driver reports
	// a simple-protocol statement whose connection broke after it was
	// written that way.
	Open func(driverConn any) bool
}

// guard returns how to mark an error of the next statement on conn: see
// [ConnDB.Open].
func (h ConnDB) guard(conn *sql.Conn) func(error) error {
	open := false
	if h.Open != nil {
		_ = conn.Raw(func(dc any) error { open = h.Open(dc); return nil })
	}
	return func(err error) error {
		if open && errors.Is(err, driver.ErrBadConn) {
			return MaybeSent(err)
		}
		return err
	}
}

// Exec implements [Querier]. It takes the connection from the pool itself,
// so that a pool that hands out none (a failed connect, or the context
// ending while every connection is busy) is told apart from a statement
// that broke on the way: nothing was sent ([NotSent]). A connection the
// driver finds dead before writing (driver.ErrBadConn) is retried by the
// retrier, as database/sql would.
func (h ConnDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	conn, err := h.DB.Conn(ctx)
	if err != nil {
		return 0, NotSent(err)
	}
	defer conn.Close()
	mark := h.guard(conn)
	r, err := conn.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, mark(err)
	}
	return r.RowsAffected()
}

// Query implements [Querier]; the connection goes back to the pool when
// the rows are closed.
func (h ConnDB) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	conn, err := h.DB.Conn(ctx)
	if err != nil {
		return nil, NotSent(err)
	}
	mark := h.guard(conn)
	r, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		conn.Close()
		return nil, mark(err)
	}
	return connRows{sqlRows{r}, conn}, nil
}

// Begin implements [DB].
func (h ConnDB) Begin(ctx context.Context) (Tx, error) {
	conn, err := h.DB.Conn(ctx)
	if err != nil {
		return nil, NotSent(err)
	}
	for _, s := range h.BeginSQL {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			// The connection may be half inside a transaction: never
			// return it to the pool.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			conn.Close()
			return nil, err
		}
	}
	return connTx{conn, h}, nil
}

// connTx is a transaction on one connection.
type connTx struct {
	conn *sql.Conn
	h    ConnDB
}

func (t connTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	mark := t.h.guard(t.conn)
	r, err := t.conn.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, mark(err)
	}
	return r.RowsAffected()
}

func (t connTx) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	mark := t.h.guard(t.conn)
	r, err := t.conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, mark(err)
	}
	return sqlRows{r}, nil
}

// Commit sends COMMIT. A failed COMMIT leaves the transaction to the
// rollback that follows it, and only then is the connection returned.
func (t connTx) Commit(ctx context.Context) error {
	mark := t.h.guard(t.conn)
	if _, err := t.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return mark(err)
	}
	return t.conn.Close()
}

// Rollback ends the transaction and returns the connection. A connection
// that may still be inside the transaction is never returned to the pool.
func (t connTx) Rollback(ctx context.Context) error {
	_, err := t.conn.ExecContext(ctx, "ROLLBACK")
	if err != nil {
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	t.conn.Close()
	return err
}

// sqlRows drops the error of Close, which Err already reports.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// connRows gives its connection back to the pool when closed.
type connRows struct {
	sqlRows
	conn *sql.Conn
}

func (r connRows) Close() {
	r.sqlRows.Close()
	r.conn.Close()
}

package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"

	"github.com/claimlock/claimlock/dialect/internal/core"
)

// immediateDB runs statements on the pool and multi-statement operations in
// BEGIN IMMEDIATE transactions on one connection, which take the write lock
// at once and so never fail later with SQLITE_BUSY_SNAPSHOT.
type immediateDB struct{ db *sql.DB }

func (h immediateDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return core.SQLDB{DB: h.db}.Exec(ctx, q, args...)
}

func (h immediateDB) Query(ctx context.Context, q string, args ...any) (core.Rows, error) {
	return core.SQLDB{DB: h.db}.Query(ctx, q, args...)
}

func (h immediateDB) Begin(ctx context.Context) (core.Tx, error) {
	conn, err := h.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		conn.Close()
		return nil, err
	}
	return immediateTx{conn}, nil
}

type immediateTx struct{ conn *sql.Conn }

func (t immediateTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	r, err := t.conn.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (t immediateTx) Query(ctx context.Context, q string, args ...any) (core.Rows, error) {
	r, err := t.conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

func (t immediateTx) Commit(ctx context.Context) error {
	_, err := t.conn.ExecContext(ctx, "COMMIT")
	if err != nil {
		// A failed COMMIT leaves the transaction open; the store rolls back
		// next, and only then is the connection returned.
		return err
	}
	return t.conn.Close()
}

// Rollback ends the transaction and returns the connection. A connection
// that may still be inside the transaction is never returned to the pool.
func (t immediateTx) Rollback(ctx context.Context) error {
	_, err := t.conn.ExecContext(ctx, "ROLLBACK")
	if err != nil {
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return t.conn.Close()
}

// rows drops the error of Close, which Err already reports.
type rows struct{ *sql.Rows }

func (r rows) Close() { _ = r.Rows.Close() }

package postgres

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// querier is what every statement of this package runs on: a pool, a
// database/sql handle, or a transaction of either. Statements are written
// once against it; the two adapters below translate to pgx and database/sql.
type querier interface {
	exec(ctx context.Context, q string, args ...any) (int64, error)
	query(ctx context.Context, q string, args ...any) (rows, error)
}

// handle is a querier that can also start a READ COMMITTED transaction.
type handle interface {
	querier
	begin(ctx context.Context) (txn, error)
}

// txn is a transaction started by [handle.begin].
type txn interface {
	querier
	commit(ctx context.Context) error
	rollback(ctx context.Context) error
}

// rows is the part of pgx.Rows and *sql.Rows this package uses.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// queryRow runs q and scans its first row into dest, reporting whether there
// was one. It never returns a "no rows" error.
func queryRow(ctx context.Context, db querier, q string, args []any, dest ...any) (bool, error) {
	r, err := db.query(ctx, q, args...)
	if err != nil {
		return false, err
	}
	defer r.Close()
	if !r.Next() {
		return false, r.Err()
	}
	if err := r.Scan(dest...); err != nil {
		return false, err
	}
	// Drain so that errors raised after the first row (there are none for
	// single-row statements, but a constraint failure would surface here)
	// are not lost.
	for r.Next() {
	}
	return true, r.Err()
}

// pgxPool is the fast path: pgx's own protocol, no database/sql.
type pgxPool struct{ p *pgxpool.Pool }

func (h pgxPool) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := h.p.Exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (h pgxPool) query(ctx context.Context, q string, args ...any) (rows, error) {
	return h.p.Query(ctx, q, args...)
}

func (h pgxPool) begin(ctx context.Context) (txn, error) {
	tx, err := h.p.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, err
	}
	return pgxTx{tx}, nil
}

type pgxTx struct{ tx pgx.Tx }

func (t pgxTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (t pgxTx) query(ctx context.Context, q string, args ...any) (rows, error) {
	return t.tx.Query(ctx, q, args...)
}

func (t pgxTx) commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgxTx) rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

// stdDB adapts a database/sql handle opened with pgx's stdlib driver.
type stdDB struct{ db *sql.DB }

func (h stdDB) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return stdExec(h.db.ExecContext(ctx, q, args...))
}

func (h stdDB) query(ctx context.Context, q string, args ...any) (rows, error) {
	return stdQuery(h.db.QueryContext(ctx, q, args...))
}

func (h stdDB) begin(ctx context.Context) (txn, error) {
	tx, err := h.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	return stdTx{tx}, nil
}

type stdTx struct{ tx *sql.Tx }

func (t stdTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return stdExec(t.tx.ExecContext(ctx, q, args...))
}

func (t stdTx) query(ctx context.Context, q string, args ...any) (rows, error) {
	return stdQuery(t.tx.QueryContext(ctx, q, args...))
}

func (t stdTx) commit(context.Context) error   { return t.tx.Commit() }
func (t stdTx) rollback(context.Context) error { return t.tx.Rollback() }

func stdExec(r sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func stdQuery(r *sql.Rows, err error) (rows, error) {
	if err != nil {
		return nil, err
	}
	return stdRows{r}, nil
}

// stdRows drops the error of Close, which Err already reports.
type stdRows struct{ *sql.Rows }

func (r stdRows) Close() { _ = r.Rows.Close() }

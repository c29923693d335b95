package core

import (
	"context"
	"database/sql"
)

// SQLDB adapts a database/sql pool. Begin starts a transaction with
// TxOptions (nil: the session's defaults).
type SQLDB struct {
	DB        *sql.DB
	TxOptions *sql.TxOptions
}

// Exec implements [Querier].
func (h SQLDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return sqlExec(h.DB.ExecContext(ctx, q, args...))
}

// Query implements [Querier].
func (h SQLDB) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	return sqlQuery(h.DB.QueryContext(ctx, q, args...))
}

// Begin implements [DB].
func (h SQLDB) Begin(ctx context.Context) (Tx, error) {
	tx, err := h.DB.BeginTx(ctx, h.TxOptions)
	if err != nil {
		return nil, err
	}
	return SQLTx{tx}, nil
}

// SQLTx adapts a database/sql transaction.
type SQLTx struct{ Tx *sql.Tx }

// Exec implements [Querier].
func (t SQLTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return sqlExec(t.Tx.ExecContext(ctx, q, args...))
}

// Query implements [Querier].
func (t SQLTx) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	return sqlQuery(t.Tx.QueryContext(ctx, q, args...))
}

// Commit implements [Tx].
func (t SQLTx) Commit(context.Context) error { return t.Tx.Commit() }

// Rollback implements [Tx].
func (t SQLTx) Rollback(context.Context) error { return t.Tx.Rollback() }

func sqlExec(r sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func sqlQuery(r *sql.Rows, err error) (Rows, error) {
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

// sqlRows drops the error of Close, which Err already reports.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

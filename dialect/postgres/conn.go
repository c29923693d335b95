package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/claimlock/claimlock/internal/store"
)

// pgxPool runs statements on pgx's own protocol, without database/sql.
// Transactions are READ COMMITTED. It takes each connection from the pool
// itself, so that a pool that hands out none (a failed connect, or the
// context ending while every connection is busy) is told apart from a
// statement that broke on the way: nothing was sent
// ([store.NotSent]).
type pgxPool struct{ p *pgxpool.Pool }

func (h pgxPool) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	c, err := h.p.Acquire(ctx)
	if err != nil {
		return 0, store.NotSent(err)
	}
	defer c.Release()
	open := !c.Conn().IsClosed()
	tag, err := c.Exec(ctx, q, args...)
	return tag.RowsAffected(), poolerHint(brokenAfterSend(c.Conn(), open, err))
}

func (h pgxPool) Query(ctx context.Context, q string, args ...any) (store.Rows, error) {
	c, err := h.p.Acquire(ctx)
	if err != nil {
		return nil, store.NotSent(err)
	}
	open := !c.Conn().IsClosed()
	r, err := c.Query(ctx, q, args...)
	if err != nil {
		err = brokenAfterSend(c.Conn(), open, err)
		c.Release()
		return nil, poolerHint(err)
	}
	return &pooledRows{Rows: r, c: c}, nil
}

// MaxConns is the pool's size, for the bound on held claims
// (store.Claims.PoolSize).
func (h pgxPool) MaxConns() int { return int(h.p.Config().MaxConns) }

func (h pgxPool) Begin(ctx context.Context) (store.Tx, error) {
	c, err := h.p.Acquire(ctx)
	if err != nil {
		return nil, store.NotSent(err)
	}
	tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		c.Release()
		return nil, poolerHint(err)
	}
	return &pgxTx{tx: tx, c: c}, nil
}

// pooledRows gives its connection back to the pool when closed.
type pooledRows struct {
	pgx.Rows
	c *pgxpool.Conn
}

func (r *pooledRows) Close() {
	r.Rows.Close()
	if r.c != nil {
		r.c.Release()
		r.c = nil
	}
}

type pgxTx struct {
	tx pgx.Tx
	c  *pgxpool.Conn // given back once, when the transaction ends
}

func (t *pgxTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	open := !t.tx.Conn().IsClosed()
	tag, err := t.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), poolerHint(brokenAfterSend(t.tx.Conn(), open, err))
}

func (t *pgxTx) Query(ctx context.Context, q string, args ...any) (store.Rows, error) {
	open := !t.tx.Conn().IsClosed()
	r, err := t.tx.Query(ctx, q, args...)
	return r, poolerHint(brokenAfterSend(t.tx.Conn(), open, err))
}

// Commit ends the transaction either way (pgx rolls back a transaction
// whose COMMIT failed), so the connection goes back to the pool.
func (t *pgxTx) Commit(ctx context.Context) error {
	defer t.release()
	conn := t.tx.Conn()
	open := !conn.IsClosed()
	return brokenAfterSend(conn, open, t.tx.Commit(ctx))
}

func (t *pgxTx) Rollback(ctx context.Context) error {
	defer t.release()
	return t.tx.Rollback(ctx)
}

func (t *pgxTx) release() {
	if t.c != nil {
		t.c.Release()
		t.c = nil
	}
}

// brokenAfterSend corrects pgx's report of a statement sent on the simple
// protocol whose connection broke before the reply: pgx (v5.12) drops the
// read error and returns the "conn closed" it meets next, an error it calls
// safe to retry (pgconn.SafeToRetry), as if nothing had been sent. pgx uses
// the simple protocol in its simple_protocol exec mode (the mode for
// poolers in transaction mode) and, in every mode, for a statement without
// arguments, COMMIT included. Taken at its word, the store would retry a
// write, or a whole transaction, that may have been applied. A connection
// that was open when the call began and is closed when it failed may have
// run the statement: the error is marked so ([store.MaybeSent]).
func brokenAfterSend(c *pgx.Conn, open bool, err error) error {
	if err == nil || !open || !c.IsClosed() || !pgconn.SafeToRetry(err) {
		return err
	}
	return store.MaybeSent(err)
}

// poolerHint explains the errors of pgx's statement cache behind a pooler
// in transaction mode: pgx's default exec mode prepares statements under
// names derived from their text (stmtcache_...) on the server connection of
// the moment, and a transaction pooler lends the next transaction another
// one, where the name is unknown (26000) or already another client's
// (42P05). Other errors are returned as they are.
func poolerHint(err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) || (pe.Code != "42P05" && pe.Code != "26000") || !strings.Contains(pe.Message, "stmtcache_") {
		return err
	}
	return &poolerError{err}
}

// poolerError is an error of pgx's statement cache behind a pooler.
type poolerError struct{ err error }

func (e *poolerError) Error() string {
	return e.err.Error() + " (pgx's cached prepared statements do not survive a pooler in transaction mode, such as PgBouncer's pool_mode = transaction: add default_query_exec_mode=simple_protocol to the DSN)"
}

func (e *poolerError) Unwrap() error { return e.err }

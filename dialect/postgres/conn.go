package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/claimlock/claimlock/internal/store"
)

// pgxPool runs statements on pgx's own protocol, without database/sql.
// Transactions are READ COMMITTED.
type pgxPool struct{ p *pgxpool.Pool }

func (h pgxPool) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := h.p.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (h pgxPool) Query(ctx context.Context, q string, args ...any) (store.Rows, error) {
	return h.p.Query(ctx, q, args...)
}

// MaxConns is the pool's size, for the bound on held claims
// ([store.PoolSize]).
func (h pgxPool) MaxConns() int { return int(h.p.Config().MaxConns) }

func (h pgxPool) Begin(ctx context.Context) (store.Tx, error) {
	tx, err := h.p.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, err
	}
	return pgxTx{tx}, nil
}

type pgxTx struct{ tx pgx.Tx }

func (t pgxTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (t pgxTx) Query(ctx context.Context, q string, args ...any) (store.Rows, error) {
	return t.tx.Query(ctx, q, args...)
}

func (t pgxTx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgxTx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

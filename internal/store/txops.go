package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/claimlock/claimlock/dialect"
)

// callerTx adapts the caller's transaction, or refuses its type.
func (b *Backend) callerTx(t dialect.Tx) (Querier, error) {
	tx, err := txOf(t)
	if err != nil {
		return nil, err
	}
	ad, adapts := b.drv.(TxAdapter)
	if adapts {
		if q, ok := ad.CallerTx(tx); ok {
			return q, nil
		}
	}
	if t, ok := tx.(*sql.Tx); ok && t != nil {
		return sqlTx{t}, nil
	}
	want := "*sql.Tx"
	if adapts && ad.CallerTxType() != "" {
		want = ad.CallerTxType() + " or a *sql.Tx"
	}
	return nil, fmt.Errorf("%w: %s takes a %s, got %T", dialect.ErrInvalidConfig, b.drv.Name(), want, tx)
}

// sqlTx runs statements in a caller's *sql.Tx.
type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	r, err := t.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (t sqlTx) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	r, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

// AckTx implements [ClaimStore]: the ack of [Claims.Ack] inside the
// caller's transaction, with the same token and version conditions. It
// never retries (a conflict aborts the caller's transaction, which the
// caller runs again) and never commits or rolls back. On an engine without
// RETURNING it decides row by row (lock, decide, update), since the
// all-or-nothing shortcut of Ack would need a transaction of its own.
func (s *Claims) AckTx(ctx context.Context, tx dialect.Tx, p *AckParams) (AckResult, error) {
	var res AckResult
	q, err := s.b.callerTx(tx)
	if err != nil {
		return res, err
	}
	if len(p.IDs) == 0 {
		return res, nil
	}
	// The Error column's width is read outside the caller's transaction,
	// if not known yet.
	keys, idx, a, err := s.ackPrep(ctx, p)
	if err != nil {
		return res, err
	}
	// Without RETURNING the one statement's partial match could only be
	// undone by rolling back the caller's transaction: decide row by row.
	if st, ok := s.oneStatement(p); ok && s.b.caps.Returning {
		err = s.ackReturning(ctx, q, st, a, idx, len(keys), &res)
	} else {
		err = s.ackByRow(ctx, q, p, a, keys, idx, &res)
	}
	if err != nil {
		return AckResult{}, s.b.interpret(err)
	}
	return res, nil
}

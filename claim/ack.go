package claim

import (
	"context"
	"fmt"

	"github.com/claimlock/claimlock/dialect"
)

// Ack marks the given rows done in one statement conditioned on the batch's
// token. ids are keys from [Row.ID] (any Go integer type is accepted for
// integer keys).
//
// Rows the token no longer held (reaped, then maybe re-claimed) are left
// untouched and reported by an error matching [ErrClaimLost], with a
// [*LostError] listing them reachable by errors.As; the other rows were still
// acked. With a VersionColumn, a row whose version moved since the claim
// goes back to pending instead of done: that is not an error, and
// [Batch.Requeued] lists it. An id the batch does not hold gives
// [ErrNotHeld] and nothing is written. On any other error nothing is known to
// be acked and the rows stay held, so the call can be repeated.
func (b *Batch[T]) Ack(ctx context.Context, ids ...any) error {
	if len(ids) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup(ids)
	if err != nil {
		return fmt.Errorf("claim: ack: %w", err)
	}
	return b.ack(ctx, idx)
}

// AckAll acks every row the batch still holds, in one statement, like
// [Batch.Ack].
func (b *Batch[T]) AckAll(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ack(ctx, b.openIndexes())
}

func (b *Batch[T]) ack(ctx context.Context, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	k := b.core
	p := &dialect.AckParams{Token: b.Token, IDs: b.openIDs(idx), Outcome: dialect.OutcomeDone}
	if k.spec.Version != "" {
		p.Versions = make([]int64, len(idx))
		for j, i := range idx {
			p.Versions[j] = b.Rows[i].Version
		}
	}
	res, err := k.store.Ack(ctx, p)
	if err != nil {
		return fmt.Errorf("claim: ack: %w", err)
	}
	b.close(idx)
	for _, j := range res.Requeued {
		b.requeued = append(b.requeued, p.IDs[j])
	}
	k.hooks.ack(len(idx) - len(res.Lost) - len(res.Requeued))
	k.hooks.requeue(len(res.Requeued))
	return b.lost("ack", p.IDs, res.Lost)
}

func (b *Batch[T]) lost(op string, ids []any, lost []int) error {
	if len(lost) == 0 {
		return nil
	}
	e := &LostError{IDs: make([]any, len(lost))}
	for j, i := range lost {
		e.IDs[j] = ids[i]
	}
	b.core.hooks.lost(len(lost))
	b.core.logger.Warn("claimlock: claim lost: rows were reaped or released before "+op, "token", b.Token, "rows", len(lost))
	return e
}

// Fail records that processing a row failed with cause (logged, not
// stored). With [FailRetry] (the default) the row goes back to pending to be
// claimed again, or is parked with the failed status once its attempts
// reached Config.MaxAttempts; with [FailPark] it is parked at once. Like
// [Batch.Ack] it is conditioned on the token and reports a lost row with a
// [*LostError].
func (b *Batch[T]) Fail(ctx context.Context, id any, cause error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup([]any{id})
	if err != nil {
		return fmt.Errorf("claim: fail: %w", err)
	}
	return b.fail(ctx, idx, cause)
}

func (b *Batch[T]) fail(ctx context.Context, idx []int, cause error) error {
	if len(idx) == 0 {
		return nil
	}
	k := b.core
	p := &dialect.AckParams{Token: b.Token, IDs: b.openIDs(idx), Outcome: dialect.OutcomeRetry, MaxAttempts: k.maxAttempts}
	if k.failMode == FailPark {
		p.Outcome, p.MaxAttempts = dialect.OutcomeFailed, 0
	}
	res, err := k.store.Ack(ctx, p)
	if err != nil {
		return fmt.Errorf("claim: fail: %w", err)
	}
	b.close(idx)
	failed := len(idx) - len(res.Lost)
	k.hooks.fail(failed)
	if failed > 0 {
		parked := len(res.Parked)
		if p.Outcome == dialect.OutcomeFailed {
			parked = failed
		}
		k.logger.Warn("claimlock: processing failed", "token", b.Token, "rows", failed, "parked", parked, "err", cause)
	}
	return b.lost("fail", p.IDs, res.Lost)
}

package claim

import (
	"context"
	"fmt"
	"slices"
)

// AckTx acks ids in the caller's transaction tx, so that the caller's own
// writes (a result row, a send log, a snapshot) and the ack commit or roll
// back together: after a crash either both happened or neither, and the row
// is processed again only in the second case. tx is a *sql.Tx on the
// claimer's database, or a pgx.Tx for the PostgreSQL dialect on a pgxpool.
//
// The ack has the conditions of [Batch.Ack] (the token, and the version
// with a Version column) and holds the acked rows locked until tx ends.
// Rows the token no longer held are reported before the caller commits, by
// an error matching [ErrClaimLost] with a [*LostError] listing them; the
// caller should then roll back, since another worker may be processing
// those rows. AckTx neither retries nor commits: an error aborts the
// caller's transaction, which the caller runs again, with the rows still
// held.
//
// On success the batch considers the rows acked, as if tx will commit. If
// the caller rolls back instead, the rows stay processing under the token;
// [Batch.Release] (which [Claimer.Run] calls last) returns them to pending,
// so they are claimed again without waiting for a reaper. End tx before
// calling Release. Heartbeats never wait for tx while holding the batch, so
// the other methods stay usable while tx is open.
func (b *Batch[T]) AckTx(ctx context.Context, tx any, ids ...any) error {
	if len(ids) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup("ack", ids)
	if err != nil {
		return err
	}
	p := b.doneParams(idx)
	res, err := b.core.store.AckTx(ctx, tx, p)
	if err != nil {
		return fmt.Errorf("claim: ack: %w", err)
	}
	lost := b.recordTx(idx, res.Lost)
	for _, j := range res.Requeued {
		b.requeued = append(b.requeued, p.IDs[j])
	}
	k := b.core
	k.hooks.ack(len(idx) - len(res.Lost) - len(res.Requeued))
	k.hooks.requeue(len(res.Requeued))
	return lostError("ack", lost)
}

// FailTx is [Batch.Fail] in the caller's transaction tx (see
// [Batch.AckTx]): the row is retried after the backoff or parked, with its
// error stored, only if tx commits.
func (b *Batch[T]) FailTx(ctx context.Context, tx any, id any, cause error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup("fail", []any{id})
	if err != nil {
		return err
	}
	k := b.core
	p := k.failParams(b.token, b.idsOf(idx), cause, k.retryDelay(b.rows[idx[0]].Attempts), k.failMode)
	res, err := k.store.AckTx(ctx, tx, p)
	if err != nil {
		return fmt.Errorf("claim: fail: %w", err)
	}
	lost := b.recordTx(idx, res.Lost)
	k.hooks.fail(len(idx) - len(res.Lost))
	return lostError("fail", lost)
}

// ReleaseTx is the release of ids ([Batch.Release]) in the caller's
// transaction tx (see [Batch.AckTx]): the rows go back to pending, their
// attempt undone, only if tx commits. A row the token no longer held is
// reported with a [*LostError].
func (b *Batch[T]) ReleaseTx(ctx context.Context, tx any, ids ...any) error {
	if len(ids) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup("release", ids)
	if err != nil {
		return err
	}
	n, err := b.core.store.ReleaseTx(ctx, tx, b.token, b.idsOf(idx))
	if err != nil {
		return fmt.Errorf("claim: release: %w", err)
	}
	b.recordTx(idx, nil)
	if int(n) == len(idx) {
		return nil
	}
	// A count does not say which rows were lost; the batch considers them
	// all released.
	b.end(fmt.Errorf("claim: release: token holds %d of %d rows: %w", n, len(idx), ErrClaimLost))
	b.core.hooks.lost(len(idx) - int(n))
	return fmt.Errorf("claim: release: token held %d of %d rows: %w", n, len(idx), ErrClaimLost)
}

// recordTx records, with b.mu held, that rows idx were completed in a
// caller's transaction (positions lost among them were not held): they are
// closed, and remembered so that Release can return them if the
// transaction rolled back. It returns the lost rows' keys.
func (b *Batch[T]) recordTx(idx []int, lostPos []int) []any {
	var lost []any
	if len(lostPos) > 0 {
		for _, j := range lostPos {
			lost = append(lost, b.rows[idx[j]].ID)
		}
		b.end(fmt.Errorf("claim: lost %d rows: %w", len(lostPos), ErrClaimLost)) // before closeRows ends it as done
		b.core.hooks.lost(len(lostPos))
		b.core.logger.Warn("claimlock: claim lost: rows were reaped or released before a transactional ack", "token", b.token, "rows", len(lostPos))
	}
	for j, i := range idx {
		if !slices.Contains(lostPos, j) {
			b.inTx = append(b.inTx, i)
		}
	}
	b.closeRows(idx)
	return lost
}

// batchKey is the context key under which [Claimer.Run] passes the batch to
// its handlers.
type batchKey struct{}

// BatchOf returns the batch of the row a [Claimer.Run] handler is
// processing, from the context Run passed to it, so that the handler can
// complete its row itself ([Batch.AckTx], [Batch.FailTx], [Batch.Snooze],
// ...). Run then leaves that row alone when the handler returns. ok is
// false for any other context.
func BatchOf[T any](ctx context.Context) (b *Batch[T], ok bool) {
	b, ok = ctx.Value(batchKey{}).(*Batch[T])
	return b, ok
}

// AckTx acks row r in the caller's transaction tx from a [Claimer.Run]
// handler: [Batch.AckTx] on the handler's batch. A handler that records its
// effect in tx and acks with AckTx before committing makes a duplicate
// effect row impossible, even when its process is killed at any point:
//
//	Handler: func(ctx context.Context, r claim.Row[Msg]) error {
//		tx, err := db.BeginTx(ctx, nil)
//		if err != nil {
//			return err
//		}
//		defer tx.Rollback()
//		if _, err := tx.ExecContext(ctx, "INSERT INTO send_log (msg_id) VALUES (?)", r.ID); err != nil {
//			return err
//		}
//		if err := claim.AckTx(ctx, tx, r); err != nil {
//			return err // lost: someone else has the row now; roll back
//		}
//		return tx.Commit()
//	}
//
// If the transaction rolls back (or the commit fails), Run releases the row
// when the batch ends, to be claimed again. ctx must be the handler's
// context (else an error wrapping [ErrInvalidConfig]).
func AckTx[T any](ctx context.Context, tx any, r Row[T]) error {
	b, ok := BatchOf[T](ctx)
	if !ok {
		return fmt.Errorf("claim: ack: %w: ctx is not a Run handler's context (use Batch.AckTx)", ErrInvalidConfig)
	}
	return b.AckTx(ctx, tx, r.ID)
}

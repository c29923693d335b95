package claim

import (
	"context"
	"fmt"
	"slices"

	"github.com/claimlock/claimlock/internal/store"
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
	res, err := b.core.cs.AckTx(ctx, tx, p)
	if err != nil {
		return storeError("ack", err)
	}
	lostPos := b.recordDone(idx, p, res)
	b.rememberTx(idx, lostPos)
	if len(lostPos) < len(idx) {
		b.detachHandler(ctx)
	}
	lost := make([]any, len(lostPos))
	for j, i := range lostPos {
		lost[j] = p.IDs[i]
	}
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
	err = b.failWith(ctx, idx, cause, k.retryDelay(b.rows[idx[0]].Attempts), k.failMode,
		func(ctx context.Context, p *store.AckParams) (store.AckResult, error) {
			return k.cs.AckTx(ctx, tx, p)
		})
	if err == nil {
		b.rememberTx(idx, nil)
		b.detachHandler(ctx)
	}
	return err
}

// ReleaseTx is the release of ids ([Batch.Release]) in the caller's
// transaction tx (see [Batch.AckTx]): the rows go back to pending, their
// attempt undone, only if tx commits. A row the token no longer held is
// reported with an error matching [ErrClaimLost].
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
	n, err := b.core.cs.ReleaseTx(ctx, tx, b.token, b.idsOf(idx))
	if err != nil {
		return storeError("release", err)
	}
	if int(n) < len(idx) {
		// A count does not say which rows were lost; the batch considers
		// them all released.
		err = fmt.Errorf("claim: release: token held %d of %d rows: %w", n, len(idx), ErrClaimLost)
		b.end(err) // before closeRows ends it as done
		b.core.hooks.lost(len(idx) - int(n))
	}
	b.closeRows(idx)
	b.rememberTx(idx, nil)
	if n > 0 {
		b.detachHandler(ctx)
	}
	return err
}

// rememberTx records, with b.mu held, that rows idx (but the positions
// lostPos, which were not held) were completed in a caller's transaction,
// so that Release returns them if that transaction rolled back. A failed
// row that was lost is not held either; remembering it costs Release
// nothing (its statement is conditioned on the token).
func (b *Batch[T]) rememberTx(idx []int, lostPos []int) {
	for j, i := range idx {
		if !slices.Contains(lostPos, j) {
			b.inTx = append(b.inTx, i)
		}
	}
}

// batchKey is the context key under which [Claimer.Run] passes a
// *handlerScope to its handlers.
type batchKey struct{}

// handlerScope is what one handler call of [Claimer.Run] carries in its
// context: its batch, and how to stop the batch's loss and Run's shutdown
// from cancelling that context.
type handlerScope struct {
	batch  any // *Batch[T]
	detach func()
}

// handlerContext returns the context of one handler call of b: parent's
// values, cancelled when parent ends (Run's shutdown, unless it finishes
// rows) or when b's rows are lost, until the handler completes its row in
// its own transaction ([Batch.AckTx], [Batch.FailTx], [Batch.ReleaseTx]).
// From then on the row is written in that transaction and locked by it, so
// no other worker can take it; cancelling the context would only roll the
// transaction back (database/sql and pgx end a transaction when the context
// it began with ends) and have the row processed again. end releases the
// context.
func (b *Batch[T]) handlerContext(parent context.Context) (ctx context.Context, end func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stopParent := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	stopLoss := b.onLoss(func(cause error) { cancel(cause) })
	detach := func() {
		stopParent()
		stopLoss()
	}
	ctx = context.WithValue(ctx, batchKey{}, &handlerScope{batch: b, detach: detach})
	return ctx, func() {
		detach()
		cancel(context.Canceled)
	}
}

// detachHandler stops the batch's loss and Run's shutdown from cancelling
// ctx, when ctx is the context of a handler call of b: the handler has just
// completed a row in the transaction it began on ctx.
func (b *Batch[T]) detachHandler(ctx context.Context) {
	if hs, ok := ctx.Value(batchKey{}).(*handlerScope); ok && hs.batch == any(b) {
		hs.detach()
	}
}

// BatchOf returns the batch of the row a [Claimer.Run] handler is
// processing, from the context Run passed to it, so that the handler can
// complete its row itself ([Batch.AckTx], [Batch.FailTx], [Batch.Snooze],
// ...). Run then leaves that row alone when the handler returns. ok is
// false for any other context.
func BatchOf[T any](ctx context.Context) (b *Batch[T], ok bool) {
	hs, ok := ctx.Value(batchKey{}).(*handlerScope)
	if !ok {
		return nil, false
	}
	b, ok = hs.batch.(*Batch[T])
	return b, ok
}

// AckTx acks row r in the caller's transaction tx from a [Claimer.Run]
// handler: [Batch.AckTx] on the handler's batch. A handler that records its
// effect in tx and acks with AckTx before committing makes a duplicate
// effect row impossible, even when its process is killed at any point
// (insertLog is "INSERT INTO send_log (msg_id) VALUES (?)", with $1 on
// PostgreSQL):
//
//	Handler: func(ctx context.Context, r claim.Row[Msg]) error {
//		tx, err := db.BeginTx(ctx, nil)
//		if err != nil {
//			return err
//		}
//		defer tx.Rollback()
//		if _, err := tx.ExecContext(ctx, insertLog, r.ID); err != nil {
//			return err
//		}
//		if err := claim.AckTx(ctx, tx, r); err != nil {
//			return err // lost: someone else has the row now; roll back
//		}
//		return tx.Commit()
//	}
//
// Once AckTx has written the ack in tx, neither the batch's loss nor Run's
// shutdown cancels ctx any more: the row is locked by tx, so no other
// worker can take it, and tx (begun on ctx) can still commit. If the
// transaction rolls back (or the commit fails), Run releases the row when
// the batch ends, to be claimed again, and logs the handler's error. ctx
// must be the handler's context (else an error wrapping
// [ErrInvalidConfig]).
func AckTx[T any](ctx context.Context, tx any, r Row[T]) error {
	b, ok := BatchOf[T](ctx)
	if !ok {
		return fmt.Errorf("claim: ack: %w: ctx is not a Run handler's context (use Batch.AckTx)", ErrInvalidConfig)
	}
	return b.AckTx(ctx, tx, r.ID)
}

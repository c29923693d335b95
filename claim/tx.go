package claim

import (
	"context"
	"slices"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/holdctx"
)

// AckTx acks ids in the caller's transaction tx, so that the caller's own
// writes (a result row, a send log, a snapshot) and the ack commit or roll
// back together: after a crash either both happened or neither, and the row
// is processed again only in the second case. tx is [dialect.SQLTx] of a
// *sql.Tx on the claimer's database, or postgres.PgxTx of a pgx.Tx for the
// PostgreSQL dialect on a pgxpool.
//
// The ack has the conditions of [Batch.Ack] (the token, and the version
// with a Version column) and holds the acked rows locked until tx ends.
// Rows the token no longer held are reported before the caller commits, by
// an error matching [dialect.ErrClaimLost] with a [*LostError] listing them;
// the caller should then roll back, since another worker may be processing
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
func (b *Batch[T]) AckTx(ctx context.Context, tx dialect.Tx, ids ...any) error {
	return b.ack(ctx, &tx, ids)
}

// ackTxLocked acks rows idx in tx, with b.mu held.
func (b *Batch[T]) ackTxLocked(ctx context.Context, tx dialect.Tx, idx []int) error {
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
// error stored, only if tx commits. A [SnoozeFor] error is refused here
// (dialect.ErrInvalidConfig): a snooze runs on the store's own connection.
func (b *Batch[T]) FailTx(ctx context.Context, tx dialect.Tx, id any, err error) error {
	return b.fail(ctx, &tx, id, err)
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

// handlerContext returns the context of one handler call of row i of b:
// parent's values, cancelled when parent ends (Run's shutdown, unless it
// finishes rows) or when row i is lost (alone or with the batch: see
// [Batch.RowContext]), until the handler completes its row in its own
// transaction ([Batch.AckTx], [Batch.FailTx]).
// From then on the row is written in that transaction and locked by it, so
// no other worker can take it; cancelling the context would only roll the
// transaction back (database/sql and pgx end a transaction when the context
// it began with ends) and have the row processed again. end releases the
// context.
func (b *Batch[T]) handlerContext(parent context.Context, i int) (ctx context.Context, end func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stopParent := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	stopLoss := b.onRowLoss(i, func(cause error) { cancel(cause) })
	detach := func() {
		stopParent()
		stopLoss()
	}
	ctx = context.WithValue(holdctx.With(ctx, b.rowHoldErr(i)), batchKey{}, &handlerScope{batch: b, detach: detach})
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
// complete its row itself, typically in its own transaction. ok is false
// for any other context, or for a T other than the claimer's. Run leaves a
// row the handler completed alone when the handler returns.
//
// A handler that records its effect in a transaction and acks in it before
// committing makes a duplicate effect row impossible, even when its process
// is killed at any point (insertLog is "INSERT INTO send_log (msg_id)
// VALUES (?)", with $1 on PostgreSQL; with pgx's own transactions, pass
// postgres.PgxTx(tx)):
//
//	Handler: func(ctx context.Context, r claim.Row[Msg]) error {
//		b, _ := claim.BatchOf[Msg](ctx) // always there in a Run handler
//		tx, err := db.BeginTx(ctx, nil)
//		if err != nil {
//			return err
//		}
//		defer tx.Rollback()
//		if _, err := tx.ExecContext(ctx, insertLog, r.ID); err != nil {
//			return err
//		}
//		if err := b.AckTx(ctx, dialect.SQLTx(tx), r.ID); err != nil {
//			return err // lost: someone else has the row now; roll back
//		}
//		return tx.Commit()
//	}
//
// Once AckTx (or FailTx) has written in tx, neither the batch's loss nor
// Run's shutdown cancels the handler's ctx any more: the row is locked by
// tx, so no other worker can take it, and tx (begun on ctx) can still
// commit. If the transaction rolls back (or the commit fails), Run releases
// the row when the batch ends, to be claimed again, and logs the handler's
// error.
func BatchOf[T any](ctx context.Context) (b *Batch[T], ok bool) {
	hs, ok := ctx.Value(batchKey{}).(*handlerScope)
	if !ok {
		return nil, false
	}
	b, ok = hs.batch.(*Batch[T])
	return b, ok
}

package claim

import (
	"context"
	"time"

	"github.com/claimlock/claimlock/internal/detach"
	"github.com/claimlock/claimlock/internal/holdctx"
)

// Partial loss: a heartbeat or an ack that finds some rows of a batch no
// longer held under its token (reaped, released, reset or deleted by an
// operator, changed by another writer) loses those rows only. They are
// closed (never acked, failed or released by the batch), listed by
// [Batch.Lost], and their row contexts ([Batch.RowContext]) end; the rest of
// the batch goes on, its context ([Batch.Context]) live and its local
// deadline still moving with heartbeats. The batch ends lost only when the
// write that closes its last rows finds some of them lost.

// RowContext returns a context derived from parent that is cancelled when
// the row with key id is lost (a heartbeat or an ack found it no longer
// held under the batch's token: reaped, released, reset or deleted by an
// operator, changed by another writer), with that loss (a [*LostError]) as
// its cause, and whenever [Batch.Context] would be: every row lost, or the
// local deadline passed (Config.ReapTimeout). The loss of other rows of the
// batch leaves it alone, and so does completing the row (an ack, even in a
// caller's transaction that has yet to commit). Pass it to the work done on
// that one row; [Claimer.Run] gives each handler call such a context. Call
// the returned cancel function when done with it.
//
// For an id that is not a row of the batch (or a key of the wrong type),
// the context is cancelled at once, its cause matching [ErrNotHeld] (or
// [dialect.ErrInvalidConfig]). For a row already lost it is cancelled at
// once with that loss.
func (b *Batch[T]) RowContext(parent context.Context, id any) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	i, err := b.rowIndex("row context", id)
	if err != nil {
		cancel(err)
		return ctx, func() { cancel(context.Canceled) }
	}
	ctx = holdctx.With(ctx, b.rowHoldErr(i))
	stop := b.onRowLoss(i, func(cause error) { cancel(cause) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// Lost returns the keys of the rows of the batch found lost so far, by a
// heartbeat or by an ack, fail or flush, in key order. A lost row is
// closed: the batch never acks, fails or releases it, and the rest of the
// batch goes on.
func (b *Batch[T]) Lost() []any { return b.lostIDs() }

// rowIndex maps id to the index of a row of the batch, open or not.
func (b *Batch[T]) rowIndex(op string, id any) (int, error) {
	i, ok, err := b.find(b.core.spec.IDKind, id)
	if err != nil {
		return 0, storeError(op, err)
	}
	if !ok {
		return 0, &notHeldError{op: op, id: id}
	}
	return i, nil
}

// rowLost reports whether row i was found lost.
func (b *Batch[T]) rowLost(i int) bool { return b.lostCause(i) != nil }

// onRowLoss calls f with the cause when row i is found lost, or when the
// batch's rows are lost or its local deadline passes (see [Batch.onLoss]),
// until stop is called. f may be called more than once, and for a row lost
// already at once, on the caller's goroutine.
func (b *Batch[T]) onRowLoss(i int, f func(cause error)) (stop func()) {
	stopBatch := b.onLoss(f)
	stopRow, cause := b.watchRow(i, f)
	if cause != nil {
		f(cause)
	}
	return func() {
		stopBatch()
		stopRow()
	}
}

// closeWritten closes rows idx after a statement that wrote (or, for a
// heartbeat, looked for) them, with b.mu held: the rows at positions
// lostPos of idx were found lost. The lost rows are recorded and their
// watchers told; when these rows are the last the batch held, the batch
// ends with the loss (before closeRows ends it as done). It returns the
// [*LostError] of the lost rows, nil when there are none.
func (b *Batch[T]) closeWritten(op string, idx, lostPos []int) error {
	if len(lostPos) == 0 {
		b.closeRows(idx)
		return nil
	}
	lost := make([]int, len(lostPos))
	for j, p := range lostPos {
		lost[j] = idx[p]
	}
	err := lostError(op, b.idsOf(lost))
	b.markLost(lost, err)
	closing := 0
	for _, i := range idx {
		if b.isOpen(i) {
			closing++
		}
	}
	if closing == b.nOpen {
		b.end(err) // nothing left held: the batch ends lost
	}
	b.closeRows(idx)
	return err
}

// markLost records rows idx as lost with cause and tells their watchers.
func (b *Batch[T]) markLost(idx []int, cause error) {
	for _, w := range b.recordLost(idx, cause) {
		w.f(cause)
	}
}

// missingLocked returns the open rows that a heartbeat's held keys do not
// list, with b.mu held. Deferred acks (Config.AckDelay) are left out: the
// write that carries them may have committed before the heartbeat, and
// it reports them lost itself if they were.
func (b *Batch[T]) missingLocked(held []any) []int {
	found := make([]bool, len(b.rows))
	for _, k := range held {
		if i, ok := b.index[k]; ok {
			found[i] = true
		}
	}
	var missing []int
	for i := range b.rows {
		if b.isOpen(i) && !found[i] && !b.writing(i) {
			missing = append(missing, i)
		}
	}
	return missing
}

// observeLost reports rows a heartbeat found lost to the observer, if any.
func (k *core) observeLost(ctx context.Context, token string, start time.Time, ids []any) {
	if k.obs == nil {
		return
	}
	e := k.event(OpLost, token, start, nil)
	e.Lost, e.LostIDs = len(ids), ids
	e.Background = detach.IsBackground(ctx)
	k.obs.Observe(ctx, e)
}

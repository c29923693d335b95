package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// Ack marks the given rows done in one statement conditioned on the batch's
// token, and returns once it is written. ids are keys from [Row.ID]; any Go
// integer type is accepted for integer keys and []byte for text keys, each
// normalised once with [dialect.NormalizeKey]. A key of another type, or an
// unsigned key above math.MaxInt64, is an error wrapping [ErrInvalidConfig]
// and nothing is written.
//
// Rows the token no longer held (reaped, then maybe re-claimed) are left
// untouched and reported by an error matching [ErrClaimLost], with a
// [*LostError] listing them reachable by errors.As; the other rows were still
// acked. With a Version column, a row whose version moved since the claim
// goes back to pending instead of done: that is not an error, and
// [Batch.Requeued] lists it. An id the batch does not hold (including one
// already deferred with [Batch.AckLater]) gives [ErrNotHeld] and nothing is
// written. On any other error nothing is known to be acked and the rows stay
// held, so the call can be repeated.
//
// Acks deferred with [Batch.AckLater] and not yet written ride along in the
// same statement; their outcome is kept for [Batch.Flush], never mixed into
// this call's error. Each call costs a statement (and a commit): to ack rows
// one at a time cheaply, use [Batch.AckLater] and [Batch.Flush].
func (b *Batch[T]) Ack(ctx context.Context, ids ...any) error {
	if len(ids) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup("ack", ids)
	if err != nil {
		return err
	}
	return b.ack(ctx, idx)
}

// AckAll acks every row the batch still holds, deferred acks included, in
// one statement, like [Batch.Ack]. Its [*LostError] lists every lost row of
// the batch not reported yet, including deferred acks that an earlier
// background write found lost.
func (b *Batch[T]) AckAll(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopTimer()
	idx := b.openIndexes()
	var lost []any
	if len(idx) > 0 {
		l, err := b.write(ctx, idx)
		if err != nil {
			return fmt.Errorf("claim: ack: %w", err)
		}
		b.pend = b.pend[:0]
		lost = l
	}
	lost = append(b.pendLost, lost...)
	b.pendLost = nil
	return lostError("ack", lost)
}

// AckLater defers the ack of one row: it checks that the batch holds id
// (else [ErrNotHeld], and nothing changes) and returns at once without
// writing. Deferred acks of a batch are written together, in one statement
// conditioned on the token, when the first of these happens:
//
//   - [Batch.Flush], [Batch.AckAll] or [Batch.Release] is called;
//   - [Batch.Ack] is called (they ride along in its statement);
//   - the batch's deferred acks reach [Config.AckBuffer] (default: the batch
//     size), or every row the batch still holds is deferred: a background
//     write starts at once;
//   - [Config.AckDelay] (default [DefaultAckDelay]) has passed since the first
//     unwritten deferred ack: a background write starts;
//   - a [Batch.KeepAlive] tick, before its heartbeat.
//
// The outcome of every deferred ack (lost rows, errors) is reported by the
// next [Batch.Flush] (or [Batch.AckAll]). Until the row is written it is
// still processing in the database under the token: heartbeats keep it, and
// a crash before the write leaves it to the reaper (it is then processed
// again: at-least-once). A background write that fails is retried after
// AckDelay, three times at most; Flush retries it too. Once deferred, a row
// can no longer be acked, failed or released through the batch
// ([ErrNotHeld]), and [Batch.Unacked] no longer lists it.
//
// Call [Batch.Flush] after the last AckLater of a batch (or before the
// program exits) to learn the outcome and to not wait for AckDelay.
func (b *Batch[T]) AckLater(id any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup("ack later", []any{id})
	if err != nil {
		return err
	}
	if b.later == nil {
		b.later = make([]bool, len(b.Rows))
		b.pend = make([]int, 0, min(len(b.Rows), b.core.ackBuffer))
	}
	b.later[idx[0]] = true
	b.pend = append(b.pend, idx[0])
	if len(b.pend) >= b.core.ackBuffer || len(b.pend) == b.nOpen {
		b.armTimer(0)
	} else {
		b.armTimer(b.core.ackDelay)
	}
	return nil
}

// Flush writes the deferred acks ([Batch.AckLater]) of the batch in one
// statement and waits for it; it returns nil when every deferred ack since
// the last Flush was written and found its row held. Rows the token no
// longer held, in this write or in background writes since the last Flush,
// are reported once by an error matching [ErrClaimLost] with a [*LostError]
// listing them; they were not touched. On any other error the deferred acks
// stay unwritten (the rows stay held) and Flush can be repeated. With
// nothing deferred, Flush makes no statement.
func (b *Batch[T]) Flush(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked(ctx, "flush")
}

// flushLocked is Flush with b.mu held; op names the calling method in errors.
func (b *Batch[T]) flushLocked(ctx context.Context, op string) error {
	b.stopTimer()
	if err := b.writePending(ctx); err != nil {
		return fmt.Errorf("claim: %s: %w", op, err)
	}
	lost := b.pendLost
	b.pendLost = nil
	return lostError(op, lost)
}

// writePending writes the deferred acks, keeping their lost rows in pendLost.
func (b *Batch[T]) writePending(ctx context.Context) error {
	if len(b.pend) == 0 {
		return nil
	}
	lost, err := b.write(ctx, b.pend)
	if err != nil {
		return err
	}
	b.pend = b.pend[:0]
	b.pendLost = append(b.pendLost, lost...)
	return nil
}

// armTimer schedules a background write of the deferred acks after d, or
// sooner if one is already scheduled earlier.
func (b *Batch[T]) armTimer(d time.Duration) {
	switch {
	case b.timer == nil:
		b.timer = time.AfterFunc(d, b.backgroundFlush)
	case b.timerArmed:
		if d == 0 {
			b.timer.Reset(0)
		}
	default:
		b.timer.Reset(d)
	}
	b.timerArmed = true
}

func (b *Batch[T]) stopTimer() {
	if b.timerArmed {
		b.timer.Stop()
		b.timerArmed = false
	}
}

func (b *Batch[T]) backgroundFlush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timerArmed = false
	if len(b.pend) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.writePending(ctx); err != nil {
		b.timerTries++
		b.core.logger.Warn("claimlock: deferred ack write failed; rows stay held", "token", b.Token, "rows", len(b.pend), "err", err)
		if b.timerTries < 3 {
			b.armTimer(b.core.ackDelay)
		}
		return
	}
	b.timerTries = 0
}

// ack writes idx and the deferred acks in one statement. Lost rows of idx are
// returned as a [*LostError]; lost deferred rows are kept for Flush.
func (b *Batch[T]) ack(ctx context.Context, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	own := len(idx)
	all := idx
	if len(b.pend) > 0 {
		all = append(idx[:own:own], b.pend...)
	}
	lostPos, err := b.writePos(ctx, all)
	if err != nil {
		return fmt.Errorf("claim: ack: %w", err)
	}
	if len(b.pend) > 0 {
		b.stopTimer()
		b.pend = b.pend[:0]
	}
	var ownLost []any
	for _, j := range lostPos {
		if j < own {
			ownLost = append(ownLost, b.Rows[all[j]].ID)
		} else {
			b.pendLost = append(b.pendLost, b.Rows[all[j]].ID)
		}
	}
	return lostError("ack", ownLost)
}

// write acks the rows idx in one statement and returns the keys of the lost
// ones. On error nothing changes in the batch.
func (b *Batch[T]) write(ctx context.Context, idx []int) ([]any, error) {
	lostPos, err := b.writePos(ctx, idx)
	if err != nil || len(lostPos) == 0 {
		return nil, err
	}
	lost := make([]any, len(lostPos))
	for j, p := range lostPos {
		lost[j] = b.Rows[idx[p]].ID
	}
	return lost, nil
}

// writePos is write returning positions into idx.
func (b *Batch[T]) writePos(ctx context.Context, idx []int) ([]int, error) {
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
		return nil, err
	}
	b.close(idx)
	for _, j := range res.Requeued {
		b.requeued = append(b.requeued, p.IDs[j])
	}
	k.hooks.ack(len(idx) - len(res.Lost) - len(res.Requeued))
	k.hooks.requeue(len(res.Requeued))
	if len(res.Lost) > 0 {
		k.hooks.lost(len(res.Lost))
		k.logger.Warn("claimlock: claim lost: rows were reaped or released before ack", "token", b.Token, "rows", len(res.Lost))
	}
	return res.Lost, nil
}

func (b *Batch[T]) lost(op string, ids []any, lost []int) error {
	if len(lost) == 0 {
		return nil
	}
	e := &LostError{IDs: make([]any, len(lost)), op: op}
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
// [Batch.Ack] it is conditioned on the token, normalises id the same way and
// reports a lost row with a [*LostError].
func (b *Batch[T]) Fail(ctx context.Context, id any, cause error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup("fail", []any{id})
	if err != nil {
		return err
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

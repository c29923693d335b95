package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/internal/store"
)

// backgroundWriteTimeout bounds one background write of deferred acks.
const backgroundWriteTimeout = 30 * time.Second

// maxBackgroundFailures is how many timer writes of deferred acks may fail
// in a row before the timer gives up; Flush, Release, AckAll, Ack and
// KeepAlive ticks still write them.
const maxBackgroundFailures = 3

// Ack marks the given rows done in one statement conditioned on the batch's
// token, and returns once it is written. ids are keys from [Row.ID]; any Go
// integer type is accepted for integer keys and []byte for text keys, each
// normalised once with [store.NormalizeKey]. A key of another type, or an
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
// Acks deferred with [Batch.AckLater] and waiting for their write ride along
// in the same statement; their outcome is kept for [Batch.Flush], never mixed
// into this call's error. Each call costs a statement (and a commit): to ack
// rows one at a time cheaply, use [Batch.AckLater] and [Batch.Flush].
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
	return b.ackLocked(ctx, idx)
}

// AckAll acks every row the batch still holds, deferred acks included, in
// one statement, like [Batch.Ack]. It first waits for a background write of
// deferred acks in progress. Its [*LostError] lists every lost row of the
// batch not reported yet, including deferred acks that an earlier background
// write found lost.
func (b *Batch[T]) AckAll(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.settle(ctx); err != nil {
		return storeError("ack", err)
	}
	idx := b.openIndexes() // waiting deferred acks included: nothing is in flight
	var lost []any
	if len(idx) > 0 {
		lostPos, err := b.writeDone(ctx, idx)
		if err != nil {
			return storeError("ack", err)
		}
		for _, j := range lostPos {
			lost = append(lost, b.rows[idx[j]].ID)
		}
	}
	if d := b.later; d != nil {
		d.stop()
		d.wait = nil // all written by this statement
		lost = append(d.takeLost(), lost...)
	}
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
// A background write holds the batch only to take the deferred acks and to
// record their outcome, never while the statement runs: the batch's other
// methods do not wait for it (Flush, AckAll and Release do wait for its
// outcome, which they report). One background write runs at a time; acks
// deferred meanwhile are written by the next.
//
// The outcome of every deferred ack (lost rows, errors) is reported by the
// next [Batch.Flush] (or [Batch.AckAll], [Batch.Release]). Until the row is
// written it is still processing in the database under the token: heartbeats
// keep it, and a crash before the write leaves it to the reaper (it is then
// processed again: at-least-once). A background write that fails is retried
// after AckDelay, three times at most; Flush retries it too. Once deferred, a
// row can no longer be acked, failed or released through the batch
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
		b.later = newDeferred(len(b.rows), b.core.ackDelay, b.core.ackBuffer)
	}
	d := b.later
	d.add(idx[0])
	if d.urgent(b.nOpen) {
		d.arm(0, b.backgroundWrite)
	} else {
		d.arm(d.delay, b.backgroundWrite)
	}
	return nil
}

// Flush writes the deferred acks ([Batch.AckLater]) of the batch in one
// statement and waits for it, after waiting for a background write in
// progress; it returns nil when every deferred ack since the last Flush was
// written and found its row held. Rows the token no longer held, in this
// write or in background writes since the last Flush, are reported once by
// an error matching [ErrClaimLost] with a [*LostError] listing them; they
// were not touched. On any other error the deferred acks stay unwritten (the
// rows stay held) and Flush can be repeated. With nothing deferred, Flush
// makes no statement.
func (b *Batch[T]) Flush(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked(ctx, "flush")
}

// flushLocked is Flush with b.mu held; op names the calling method in errors.
// On return no deferred ack is in flight and, unless it fails, none waits.
func (b *Batch[T]) flushLocked(ctx context.Context, op string) error {
	if b.later == nil {
		return nil
	}
	if err := b.settle(ctx); err != nil {
		return storeError(op, err)
	}
	d := b.later
	d.stop()
	if len(d.wait) > 0 {
		idx := d.wait
		lostPos, err := b.writeDone(ctx, idx)
		if err != nil {
			return storeError(op, err)
		}
		d.wait = nil
		for _, j := range lostPos {
			d.lost = append(d.lost, b.rows[idx[j]].ID)
		}
	}
	return lostError(op, d.takeLost())
}

// settle waits until no background write of deferred acks is in flight,
// releasing b.mu while it waits: b.mu is held on entry and on return, but the
// batch may have changed in between. It returns ctx's cause if ctx ends
// first.
func (b *Batch[T]) settle(ctx context.Context) error {
	for b.later != nil && b.later.landed != nil {
		landed := b.later.landed
		b.mu.Unlock()
		var err error
		select {
		case <-landed:
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		b.mu.Lock()
		if err != nil {
			return err
		}
	}
	return nil
}

// backgroundWrite is the timer's write of the deferred acks.
func (b *Batch[T]) backgroundWrite() {
	b.mu.Lock()
	b.later.armed = false
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(markBackground(context.Background()), backgroundWriteTimeout)
	defer cancel()
	err := b.writeDeferred(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.later
	if err == nil {
		d.failures = 0
		return
	}
	d.failures++
	b.core.logger.Warn("claimlock: deferred ack write failed; rows stay held", "token", b.token, "rows", len(d.wait), "err", err)
	if d.failures < maxBackgroundFailures {
		d.arm(d.delay, b.backgroundWrite)
	}
}

// writeDeferred writes the waiting deferred acks in one statement without
// holding b.mu while it runs: it takes the rows under the lock, writes them,
// and records the outcome (lost rows kept for Flush) under the lock again.
// If a write is already in flight it writes nothing and has the waiting rows
// written as soon as that one lands. On error the rows wait again, still
// deferred.
func (b *Batch[T]) writeDeferred(ctx context.Context) error {
	b.mu.Lock()
	d := b.later
	if d == nil || len(d.wait) == 0 {
		b.mu.Unlock()
		return nil
	}
	if d.landed != nil {
		d.rerun = true
		b.mu.Unlock()
		return nil
	}
	idx := d.takeOff()
	p := b.doneParams(idx)
	b.mu.Unlock()

	res, err := b.core.cs.Ack(ctx, p)

	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		for _, j := range b.recordDone(idx, p, res) {
			d.lost = append(d.lost, b.rows[idx[j]].ID)
		}
	}
	if d.land(err != nil) {
		d.arm(0, b.backgroundWrite)
	}
	return err
}

// ackLocked acks rows idx, with the waiting deferred acks riding along, in
// one statement, with b.mu held. Lost rows of idx are returned as a
// [*LostError]; lost deferred rows are kept for Flush.
func (b *Batch[T]) ackLocked(ctx context.Context, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	own := len(idx)
	all := idx
	d := b.later
	if d != nil && len(d.wait) > 0 {
		all = append(idx[:own:own], d.wait...)
	}
	lostPos, err := b.writeDone(ctx, all)
	if err != nil {
		return storeError("ack", err)
	}
	if len(all) > own {
		d.wait = nil // written by this statement
		d.stop()
	}
	var ownLost []any
	for _, j := range lostPos {
		if j < own {
			ownLost = append(ownLost, b.rows[all[j]].ID)
		} else {
			d.lost = append(d.lost, b.rows[all[j]].ID)
		}
	}
	return lostError("ack", ownLost)
}

// writeDone acks rows idx in one statement, with b.mu held, and returns the
// positions in idx of the lost ones. On error nothing changes in the batch.
func (b *Batch[T]) writeDone(ctx context.Context, idx []int) ([]int, error) {
	p := b.doneParams(idx)
	res, err := b.core.cs.Ack(ctx, p)
	if err != nil {
		return nil, err
	}
	return b.recordDone(idx, p, res), nil
}

// doneParams builds the ack of rows idx. It reads only what the claim set,
// so it needs no lock.
func (b *Batch[T]) doneParams(idx []int) *store.AckParams {
	p := &store.AckParams{Token: b.token, IDs: b.idsOf(idx), Outcome: store.OutcomeDone}
	if b.core.spec.Version != "" {
		p.Versions = make([]int64, len(idx))
		for j, i := range idx {
			p.Versions[j] = b.rows[i].Version
		}
	}
	return p
}

// recordDone records, with b.mu held, the committed ack p of rows idx: every
// row is closed (acked, requeued or lost), hooks and logs are told, and the
// positions in idx of the lost rows are returned.
func (b *Batch[T]) recordDone(idx []int, p *store.AckParams, res store.AckResult) []int {
	k := b.core
	if len(res.Lost) > 0 {
		b.end(fmt.Errorf("claim: ack: lost %d rows: %w", len(res.Lost), ErrClaimLost)) // before closeRows ends it as done
	}
	b.closeRows(idx)
	for _, j := range res.Requeued {
		b.requeued = append(b.requeued, p.IDs[j])
	}
	k.hooks.ack(len(idx) - len(res.Lost) - len(res.Requeued))
	k.hooks.requeue(len(res.Requeued))
	if len(res.Lost) > 0 {
		k.hooks.lost(len(res.Lost))
		k.logger.Warn("claimlock: claim lost: rows were reaped or released before ack", "token", b.token, "rows", len(res.Lost))
	}
	return res.Lost
}

// Fail records that processing a row failed with cause. With [FailRetry]
// (the default) the row goes back to pending to be claimed again, or is
// parked with the failed status once its attempts reached
// Config.MaxAttempts; with [FailPark] it is parked at once. With a RunAt
// column a retried row waits before it can be claimed again, by
// Config.Backoff of its attempts (default [DefaultBackoff]) measured on the
// database clock; with an Error column the cause's text is stored there (a
// parked row keeps the error that parked it). Like [Batch.Ack] it is
// conditioned on the token, normalises id the same way and reports a lost
// row with a [*LostError].
func (b *Batch[T]) Fail(ctx context.Context, id any, cause error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup("fail", []any{id})
	if err != nil {
		return err
	}
	return b.failLocked(ctx, idx, cause, b.core.retryDelay(b.rows[idx[0]].Attempts), b.core.failMode)
}

// FailAfter is [Batch.Fail] with an explicit delay, whatever
// Config.Backoff and Config.FailMode say: the row goes back to pending and
// can be claimed again once delay has passed on the database clock (it is
// still parked if its attempts reached Config.MaxAttempts). Use it for
// failures that say when to come back (an HTTP 429's Retry-After). It needs
// RunAt and Attempts columns (else an error wrapping [ErrInvalidConfig]);
// delay must not be negative.
func (b *Batch[T]) FailAfter(ctx context.Context, id any, cause error, delay time.Duration) error {
	if err := b.core.checkDelay("fail after", delay); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup("fail after", []any{id})
	if err != nil {
		return err
	}
	return b.failLocked(ctx, idx, cause, delay, FailRetry)
}

// Snooze puts a row back to pending to be claimed again once delay has
// passed on the database clock, without counting a failure: the claim's
// attempt is undone and no error is stored. Use it for work that is not
// ready yet ("retry later"). It needs a RunAt column (else an error wrapping
// [ErrInvalidConfig]); delay must not be negative. A row the token no longer
// holds is reported with a [*LostError] and left untouched.
func (b *Batch[T]) Snooze(ctx context.Context, id any, delay time.Duration) error {
	if err := b.core.checkDelay("snooze", delay); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup("snooze", []any{id})
	if err != nil {
		return err
	}
	return b.snoozeLocked(ctx, idx[0], delay)
}

// snoozeLocked snoozes row i, with b.mu held.
func (b *Batch[T]) snoozeLocked(ctx context.Context, i int, delay time.Duration) error {
	idx := []int{i}
	n, err := b.core.cs.Snooze(ctx, b.token, b.idsOf(idx), delay)
	if err != nil {
		return storeError("snooze", err)
	}
	if n == 0 {
		b.end(fmt.Errorf("claim: snooze: lost 1 row: %w", ErrClaimLost)) // before closeRows ends it as done
	}
	b.closeRows(idx)
	if n == 0 {
		b.core.hooks.lost(1)
		return lostError("snooze", b.idsOf(idx))
	}
	return nil
}

// failLocked fails rows idx in one statement, with b.mu held: retried after
// delay (with a RunAt column) or parked, as mode says.
func (b *Batch[T]) failLocked(ctx context.Context, idx []int, cause error, delay time.Duration, mode FailMode) error {
	return b.failWith(ctx, idx, cause, delay, mode, b.core.cs.Ack)
}

// failWith fails rows idx with ack (the store's Ack, or its AckTx in a
// caller's transaction), with b.mu held, and records the outcome.
func (b *Batch[T]) failWith(ctx context.Context, idx []int, cause error, delay time.Duration, mode FailMode,
	ack func(context.Context, *store.AckParams) (store.AckResult, error)) error {
	if len(idx) == 0 {
		return nil
	}
	k := b.core
	p := k.failParams(b.token, b.idsOf(idx), cause, delay, mode)
	res, err := ack(ctx, p)
	if err != nil {
		return fmt.Errorf("claim: fail: %w", err)
	}
	if len(res.Lost) > 0 {
		b.end(fmt.Errorf("claim: fail: lost %d rows: %w", len(res.Lost), ErrClaimLost)) // before closeRows ends it as done
	}
	b.closeRows(idx)
	failed := len(idx) - len(res.Lost)
	k.hooks.fail(failed)
	if failed > 0 {
		k.logFailed(b.token, p, res, cause)
	}
	if len(res.Lost) == 0 {
		return nil
	}
	lost := make([]any, len(res.Lost))
	for j, i := range res.Lost {
		lost[j] = p.IDs[i]
	}
	k.hooks.lost(len(lost))
	k.logger.Warn("claimlock: claim lost: rows were reaped or released before fail", "token", b.token, "rows", len(lost))
	return lostError("fail", lost)
}

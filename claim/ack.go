package claim

import (
	"context"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/detach"
	"github.com/claimlock/claimlock/internal/store"
)

// backgroundWriteTimeout bounds one background write of deferred acks.
const backgroundWriteTimeout = 30 * time.Second

// maxBackgroundFailures is how many timer writes of deferred acks may fail
// in a row before the timer gives up; Flush, Release, AckAll, Ack and
// KeepAlive ticks still write them.
const maxBackgroundFailures = 3

// Ack marks the given rows done, in one statement conditioned on the
// batch's token. ids are keys from [Row.ID]; any Go integer type is
// accepted for integer keys and []byte for text keys, each normalised once.
// A key of another type, or an unsigned key above math.MaxInt64, is an
// error wrapping [dialect.ErrInvalidConfig]; an id the batch does not hold
// (any more, or twice in ids) gives [ErrNotHeld]; then nothing is written.
//
// Without Config.AckDelay, Ack returns once the statement is written.
// Concurrent Ack calls of one batch (workers acking the rows of a batch in
// parallel, each when its row is done) share statements: a call made while
// no other is being written writes at once, with no added delay; calls made
// while a statement is in flight wait for it and are then written together
// in the next one. Each call still gets the outcome of its own rows only. A
// waiting call whose ctx ends before its statement starts returns ctx's
// cause and writes nothing; once its statement started it returns that
// statement's outcome, and the statement is cancelled only when the
// contexts of all the calls it carries have ended. An id already in a
// concurrent call not yet written gives [ErrNotHeld]. Rows
// the token no longer held (reaped, then maybe re-claimed) are left
// untouched and reported by an error matching [dialect.ErrClaimLost], with a
// [*LostError] listing them reachable by errors.As; the other rows were still
// acked. An id of a row found lost already (by a heartbeat or an earlier
// write, see [Batch.Lost]) is reported the same way, without a statement
// for it. With a Version column, a row whose version moved since the claim
// goes back to pending instead of done: that is not an error, and
// [Batch.Requeued] lists it. On any other error nothing is known to be
// acked and the rows stay held, so the call can be repeated.
//
// With Config.AckDelay, Ack defers: it records the rows and returns at
// once, and the deferred acks of the batch are written together, in one
// statement, when the first of these happens:
//
//   - [Batch.Flush], [Batch.AckAll] or [Batch.Release] is called;
//   - the deferred acks reach Config.AckBuffer (default: the batch size),
//     or every row the batch still holds is deferred: a background write
//     starts at once;
//   - AckDelay has passed since the first unwritten deferred ack: a
//     background write starts;
//   - a [Batch.KeepAlive] tick, before its heartbeat.
//
// A background write holds the batch only to take the deferred acks and to
// record their outcome, never while the statement runs. The outcome of the
// deferred acks (lost rows, errors) is reported by the next [Batch.Flush]
// (or AckAll, Release). Until a row is written it is still processing in
// the database: heartbeats keep it, and a crash before the write leaves it
// to the reaper (it is then processed again: at-least-once). A background
// write that fails is tried again after AckDelay, three times at most;
// Flush tries it too.
func (b *Batch[T]) Ack(ctx context.Context, ids ...any) error { return b.ack(ctx, nil, ids) }

// ack is [Batch.Ack], or with tx [Batch.AckTx].
func (b *Batch[T]) ack(ctx context.Context, tx *dialect.Tx, ids []any) error {
	if len(ids) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, lost, err := b.lookup("ack", ids)
	switch {
	case err != nil:
		return err
	case len(idx) == 0:
		return lostError("ack", lost)
	case tx != nil:
		return withLost("ack", b.ackTxLocked(ctx, *tx, idx), lost)
	case b.core.ackDelay > 0:
		b.deferLocked(idx)
		return lostError("ack", lost)
	}
	return withLost("ack", b.ackGrouped(ctx, idx), lost)
}

// deferLocked defers the acks of rows idx, with b.mu held, and arms the
// write that carries them.
func (b *Batch[T]) deferLocked(idx []int) {
	if b.later == nil {
		b.later = newDeferred(len(b.rows), b.core.ackDelay, b.core.ackBuffer)
	}
	d := b.later
	for _, i := range idx {
		d.add(i)
	}
	if d.urgent(b.nOpen) {
		d.arm(0, b.backgroundWrite)
	} else {
		d.arm(d.delay, b.backgroundWrite)
	}
}

// AckAll acks every row the batch still holds, deferred acks included, in
// one statement, like [Batch.Ack]. It first waits for a background write of
// deferred acks in progress. Its [*LostError] lists every lost row of the
// batch not reported yet, including deferred acks that an earlier background
// write found lost and rows that [Batch.KeepAlive]'s heartbeats found lost.
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
	lost = append(b.takeUnheard(), lost...)
	return lostError("ack", lost)
}

// Flush writes the deferred acks (Config.AckDelay) of the batch in one
// statement and waits for it, after waiting for a background write in
// progress; it returns nil when every deferred ack since the last Flush was
// written and found its row held. Rows the token no longer held, in this
// write or in background writes since the last Flush, and rows that
// [Batch.KeepAlive]'s heartbeats found lost since then, are reported once by
// an error matching [dialect.ErrClaimLost] with a [*LostError] listing them; they
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
	if err := b.settle(ctx); err != nil {
		return storeError(op, err)
	}
	if b.later == nil {
		return lostError(op, b.takeUnheard())
	}
	d := b.later
	d.stop()
	// A write an outage fails is tried again, past the local deadline if
	// need be (outage.go); between tries a heartbeat tick may write the
	// waiting acks itself, so each try takes them afresh.
	err := b.outlast(ctx, op, true, func() error {
		if err := b.settle(ctx); err != nil {
			return err
		}
		if len(d.wait) == 0 {
			return nil
		}
		idx := d.wait
		lostPos, err := b.writeDone(ctx, idx)
		if err != nil {
			return err
		}
		d.wait = nil
		for _, j := range lostPos {
			d.lost = append(d.lost, b.rows[idx[j]].ID)
		}
		return nil
	})
	if err != nil {
		return storeError(op, err)
	}
	return lostError(op, append(b.takeUnheard(), d.takeLost()...))
}

// takeUnheard returns, once, the keys of the rows [Batch.KeepAlive]'s
// heartbeats found lost since the last AckAll, Flush or Release, with b.mu
// held.
func (b *Batch[T]) takeUnheard() []any {
	ids := b.unheard
	b.unheard = nil
	return ids
}

// settle waits until no background write of deferred acks and no grouped
// ack (ackgroup.go) is in flight or queued, releasing b.mu while it waits:
// b.mu is held on entry and on return, but the batch may have changed in
// between. It returns ctx's cause if ctx ends first.
func (b *Batch[T]) settle(ctx context.Context) error {
	for {
		var landed chan struct{}
		switch {
		case b.later != nil && b.later.landed != nil:
			landed = b.later.landed
		case b.grp.landed != nil:
			landed = b.grp.landed
		default:
			return nil
		}
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
}

// backgroundWrite is the timer's write of the deferred acks.
func (b *Batch[T]) backgroundWrite() {
	b.mu.Lock()
	b.later.armed = false
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(detach.Background(context.Background()), backgroundWriteTimeout)
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
	b.noteUnknown(err)
	if err == nil && len(res.Lost) > 0 && b.writtenBefore() {
		res.Lost = nil // completed by an earlier write of unknown outcome
	}
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
	res, err := b.storeAck(ctx, p)
	if err != nil {
		return nil, b.noteUnknown(err)
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
// row is closed (acked, requeued or lost: only the lost ones are lost, see
// rowloss.go), hooks and logs are told, and the positions in idx of the
// lost rows are returned.
func (b *Batch[T]) recordDone(idx []int, p *store.AckParams, res store.AckResult) []int {
	k := b.core
	b.closeWritten("ack", idx, res.Lost)
	for _, j := range res.Requeued {
		b.requeued = append(b.requeued, p.IDs[j])
	}
	if len(res.Lost) > 0 {
		k.logger.Warn("claimlock: claim lost: rows were reaped or released before ack", "token", b.token, "rows", len(res.Lost))
	}
	return res.Lost
}

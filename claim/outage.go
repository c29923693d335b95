package claim

// Writes that outlast a database outage: Run's acks, fails and release
// are tried again while their context lasts, Flush's deferred acks up to
// the batch's local deadline plus the reap timeout, and a write of unknown
// outcome is settled by the next try under the token.

import (
	"context"
	"errors"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
)

// The pause between two tries of a write an outage failed: doubling from
// outageRetryBase up to outageRetryMax, with equal jitter, so that the
// workers of a fleet do not all come back at once.
const (
	outageRetryBase = 50 * time.Millisecond
	outageRetryMax  = 2 * time.Second
)

// outage reports an error that trying the same write again can cure: an
// unreachable server, a broken connection, an unknown outcome, a conflict
// that outlived its retries, a statement that timed out. A lost claim, a
// row the batch does not hold, a permanent error or a cancelled context
// cannot.
func outage(err error) bool {
	return err != nil && !errors.Is(err, dialect.ErrClaimLost) && !errors.Is(err, ErrNotHeld) &&
		!dialect.IsPermanent(err) && !errors.Is(err, context.Canceled)
}

// outlast runs write (an ack or a fail: a write conditioned on the token),
// with b.mu held, and again after a jittered pause while it fails with an
// [outage], ctx lasts, and no loss of the batch's rows was found; when
// bounded ([Batch.Flush]), only while the next try comes before the
// batch's local deadline plus Config.ReapTimeout (no bound without a
// ReapTimeout). Run's writes are bounded by their context alone
// (WorkerConfig.ShutdownTimeout).
//
// The local deadline does not stop the tries: a write conditioned on the
// token is safe at any time, since it completes the rows the token still
// holds and reports the others lost. Giving up at the deadline left rows
// whose work was done processing for the reaper, to be run again once the
// database came back; and a reaper that could not reach the database
// either leaves stale rows to their holders for one timeout after it
// reconnects, so a write that lands right after an outage longer than the
// reap timeout still saves the rows a second run. Past the deadline, rows
// found no longer held are reported lost even after a write of unknown
// outcome ([Batch.writtenBefore]): the reaper may have taken them.
//
// b.mu is released during the pauses, so heartbeats go on keeping the rows;
// write must re-read the batch's state. It returns write's last error.
func (b *Batch[T]) outlast(ctx context.Context, op string, bounded bool, write func() error) error {
	err := b.noteUnknown(write())
	for n := 0; outage(err); n++ {
		pause := loop.Backoff(n, outageRetryBase, outageRetryMax)
		if b.rowsTaken() || ctx.Err() != nil {
			return err
		}
		if bounded && b.pastBound(pause) {
			return err
		}
		b.core.logger.Warn("claimlock: "+op+" failed; trying again",
			"token", b.token, "in", pause, "err", err)
		// Past the local deadline the batch has ended: its Done no longer
		// cuts the pause short.
		done := b.Done()
		if b.Err() != nil {
			done = nil
		}
		b.mu.Unlock()
		loop.Sleep(ctx, pause, done)
		b.mu.Lock()
		if b.rowsTaken() || ctx.Err() != nil {
			return err
		}
		err = b.noteUnknown(write())
	}
	return err
}

// pastBound reports whether a try after pause would come after the batch's
// local deadline plus Config.ReapTimeout: when a reaper that saw the
// database all along may have taken the rows.
func (b *Batch[T]) pastBound(pause time.Duration) bool {
	dl, ok := b.Deadline()
	return ok && !time.Now().Add(pause).Before(dl.Add(b.core.reapTimeout))
}

// rowsTaken reports whether the batch ended because its rows were found
// lost (a heartbeat or a write found them no longer held), not because its
// local deadline passed or it holds nothing.
func (b *Batch[T]) rowsTaken() bool {
	err := b.Err()
	return err != nil && err != ErrBatchDone && !errors.Is(err, dialect.ErrLocalDeadline)
}

// noteUnknown records, with b.mu held, that a write of the batch had an
// unknown outcome, and returns err.
func (b *Batch[T]) noteUnknown(err error) error {
	if errors.Is(err, dialect.ErrOutcomeUnknown) {
		b.unknown = true
	}
	return err
}

// writtenBefore reports, with b.mu held, that rows a write found no longer
// held by the token were completed by an earlier write of the batch whose
// outcome was unknown, rather than lost: the batch had such a write, and
// it still holds its rows as far as its local deadline and heartbeats
// know. No reaper takes a row before the batch's local deadline, so the
// token of a row can only have been cleared by the batch itself (or by an
// operator's action on a claimed row, which is then not reported).
// Without a local deadline (no Config.ReapTimeout) nothing is assumed.
func (b *Batch[T]) writtenBefore() bool {
	if !b.unknown {
		return false
	}
	if _, ok := b.Deadline(); !ok {
		return false
	}
	return !b.lost()
}

// storeAck runs the store's ack p for the batch. Rows it finds no longer
// held are not reported lost when [Batch.writtenBefore] says an earlier
// write of unknown outcome completed them.
func (b *Batch[T]) storeAck(ctx context.Context, p *store.AckParams) (store.AckResult, error) {
	res, err := b.core.cs.Ack(ctx, p)
	if err == nil && len(res.Lost) > 0 && b.writtenBefore() {
		b.core.logger.Info("claimlock: rows an earlier write of unknown outcome completed", "token", b.token, "rows", len(res.Lost))
		res.Lost = nil
	}
	return res, err
}

// releaseOutlasting is [Claimer.Run]'s [Batch.Release], tried again after an
// outage while ctx lasts (WorkerConfig.ShutdownTimeout) and the batch still
// holds rows (a heartbeat may find them all lost meanwhile: then nothing is
// left to release). A release is conditioned on the token, so running it
// again is harmless, and, like an ack, it is safe past the local deadline:
// it returns the rows the token still holds and leaves the others alone.
// Giving up at the deadline left rows no handler had run (or whose handler
// an outage cut off) processing for the reaper, which then counted an
// attempt against them; released, they get their attempt back.
func (b *Batch[T]) releaseOutlasting(ctx context.Context) (int64, error) {
	n, err := b.Release(ctx)
	for i := 0; outage(err) && ctx.Err() == nil; i++ {
		if b.rowsTaken() {
			return 0, nil // a heartbeat found every row lost: none is left to release
		}
		pause := loop.Backoff(i, outageRetryBase, outageRetryMax)
		b.core.logger.Warn("claimlock: release failed; trying again", "token", b.token, "in", pause, "err", err)
		loop.Sleep(ctx, pause, nil)
		n, err = b.Release(ctx)
	}
	return n, err
}

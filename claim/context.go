package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/holdctx"
)

// Loss signal: a batch's context ([Batch.Context], [Batch.Done],
// [Batch.Err]) ends when its rows are lost, at its local deadline, or when
// it holds nothing any more.

// ErrBatchDone is what [Batch.Err] returns once the batch holds no rows
// any more: every row was acked, failed, released or found lost by an ack
// (deferred acks count once written). A batch past its local deadline
// ends with [dialect.ErrClaimLost] and [dialect.ErrLocalDeadline].
var ErrBatchDone = errors.New("claim: batch holds no rows")

// validateLoss checks ReapTimeout, SafetyMargin and HeartbeatInterval.
func (c Config) validateLoss() error {
	switch {
	case c.ReapTimeout < 0:
		return invalid("ReapTimeout", "%v is negative", c.ReapTimeout)
	case c.ReapTimeout > 0 && c.ReapTimeout < time.Millisecond:
		return invalid("ReapTimeout", "%v is below one millisecond", c.ReapTimeout)
	case c.SafetyMargin < 0:
		return invalid("SafetyMargin", "%v is negative", c.SafetyMargin)
	case c.SafetyMargin > 0 && c.ReapTimeout == 0:
		return invalid("SafetyMargin", "is set but ReapTimeout is not: the margin is taken from ReapTimeout")
	case c.SafetyMargin >= c.ReapTimeout && c.ReapTimeout > 0:
		return invalid("SafetyMargin", "%v is not below ReapTimeout %v", c.SafetyMargin, c.ReapTimeout)
	case c.HeartbeatInterval < 0:
		return invalid("HeartbeatInterval", "%v is negative", c.HeartbeatInterval)
	case c.ReapTimeout > 0 && c.heartbeatInterval()+c.safetyMargin() >= c.ReapTimeout:
		return invalid("HeartbeatInterval", "%v + SafetyMargin %v is not below ReapTimeout %v: batches would reach their local deadline between heartbeats",
			c.heartbeatInterval(), c.safetyMargin(), c.ReapTimeout)
	}
	return nil
}

// safetyMargin returns SafetyMargin or its default, ReapTimeout/10.
func (c Config) safetyMargin() time.Duration {
	if c.SafetyMargin == 0 {
		return c.ReapTimeout / 10
	}
	return c.SafetyMargin
}

// heartbeatInterval returns HeartbeatInterval or its default:
// ReapTimeout/3, or none without a ReapTimeout.
func (c Config) heartbeatInterval() time.Duration {
	if c.HeartbeatInterval == 0 {
		return c.ReapTimeout / 3
	}
	return c.HeartbeatInterval
}

// lifetime is what a batch may count on from the local start of a statement
// that found its rows held: ReapTimeout - SafetyMargin; 0 without a
// ReapTimeout (no local deadline).
func (k *core) lifetime() time.Duration {
	if k.reapTimeout == 0 {
		return 0
	}
	return k.reapTimeout - k.margin
}

// expire ends the batch at its local deadline unless the timer was re-armed
// meanwhile.
func (b *Batch[T]) expire(gen uint64) {
	b.lmu.Lock()
	stale := gen != b.gen
	b.lmu.Unlock()
	if !stale {
		b.end(b.deadlineError())
	}
}

func (b *Batch[T]) deadlineError() error {
	return fmt.Errorf("%w: %w (token %s)", dialect.ErrClaimLost, dialect.ErrLocalDeadline, b.token)
}

// end ends the batch's context with cause, once. A loss found after the
// local deadline passed (a heartbeat or an ack of a process that was frozen
// past it, racing the deadline's timer on resuming) is reported as the
// deadline, which came first.
func (b *Batch[T]) end(cause error) {
	b.lmu.Lock()
	defer b.lmu.Unlock()
	if b.ctx.Err() != nil {
		return
	}
	if cause != ErrBatchDone && !b.deadline.IsZero() && !time.Now().Before(b.deadline) {
		cause = b.deadlineError()
	}
	b.cancel(cause)
	b.gen++
	if b.timer != nil {
		b.timer.Stop()
	}
	if cause != ErrBatchDone {
		b.core.logger.Warn("claimlock: claim lost; work on the batch must stop", "token", b.token, "err", cause)
	}
}

// extend moves the local deadline after a heartbeat that started at start
// found every row held. A batch that ended stays ended.
func (b *Batch[T]) extend(start time.Time) {
	life := b.core.lifetime()
	if life == 0 {
		return
	}
	b.lmu.Lock()
	defer b.lmu.Unlock()
	if b.ctx.Err() != nil {
		return
	}
	if d := start.Add(life); d.After(b.deadline) {
		b.armLocked(d)
	}
}

// Context returns a context derived from parent that is also cancelled when
// the batch's rows are lost, with [Batch.Err] as its cause (see
// context.Cause): when a heartbeat or an ack finds the last rows it held
// lost (reaped, maybe re-claimed), or at the local deadline (with
// Config.ReapTimeout); the loss of some rows only ends their
// [Batch.RowContext]. Pass it to the work done on the batch's rows, so that
// a worker whose rows were taken over stops. Completing the batch does not cancel it: a transaction begun
// on it that acked the batch's last row ([Batch.AckTx]) can still commit.
// Call the returned cancel function when done with it.
//
// The context reports; it does not protect: a worker paused longer than
// the margin (GC, swapping, a stopped VM) can still act after its deadline.
// That is what the token is for: the batch's acks, fails and releases are
// conditioned on it, so such a worker's late ack changes nothing and
// returns [dialect.ErrClaimLost]. Make side effects outside the database
// idempotent.
func (b *Batch[T]) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(holdctx.With(parent, b.holdErr))
	stop := b.onLoss(func(cause error) { cancel(cause) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// onLoss calls f with the cause when the batch's rows are lost or its local
// deadline passes (not when it ends because it holds nothing), until stop is
// called. f runs on its own goroutine.
func (b *Batch[T]) onLoss(f func(cause error)) (stop func() bool) {
	return context.AfterFunc(b.ctx, func() {
		if err := b.Err(); err != ErrBatchDone {
			f(err)
		}
	})
}

// Done returns a channel closed when the batch ends: rows lost, local
// deadline passed, or nothing held any more.
func (b *Batch[T]) Done() <-chan struct{} { return b.ctx.Done() }

// Err returns nil while the batch holds rows and may work on them, and
// afterwards why it ended: an error matching [dialect.ErrClaimLost] (and
// [dialect.ErrLocalDeadline] when the local deadline passed), or [ErrBatchDone].
// It compares the deadline with the clock itself, so a process that was
// stopped past its deadline sees it at once on resuming, even before the
// deadline's timer has run.
func (b *Batch[T]) Err() error {
	b.lmu.Lock()
	late := !b.deadline.IsZero() && b.ctx.Err() == nil && !time.Now().Before(b.deadline)
	b.lmu.Unlock()
	if late {
		b.end(b.deadlineError())
	}
	if b.ctx.Err() == nil {
		return nil
	}
	return context.Cause(b.ctx)
}

// Deadline returns the batch's local deadline, on the local monotonic
// clock: (local start of the claim, or of the last heartbeat that found
// every row held) + Config.ReapTimeout - Config.SafetyMargin. ok is false
// without a ReapTimeout.
func (b *Batch[T]) Deadline() (deadline time.Time, ok bool) {
	b.lmu.Lock()
	defer b.lmu.Unlock()
	return b.deadline, !b.deadline.IsZero()
}

// lost reports whether the batch ended because its rows were lost or its
// deadline passed (not because it holds nothing).
func (b *Batch[T]) lost() bool {
	err := b.Err()
	return err != nil && err != ErrBatchDone
}

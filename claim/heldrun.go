package claim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
)

// Held batches are polled with the defaults of [WorkerConfig]'s PollMin
// and PollMax while nothing is pending.
const (
	heldPollMin = 100 * time.Millisecond
	heldPollMax = 5 * time.Second
)

// Run holds and handles batches with h's MaxInFlight concurrent loops until
// ctx is cancelled, then lets the batches in flight finish and returns nil.
// Each loop holds a batch ([Holder.Hold]), calls handle with it, and ends
// it:
//
//   - handle returns nil: the rows it neither acked nor failed are acked
//     (as [Claimer.Run] acks a row whose handler returned nil), and the
//     batch commits: its acks, fails and statements take effect together.
//   - handle returns an error (or panics, or one of the batch's statements
//     failed: the batch then refuses further ones): the batch's writes are
//     undone back to the claim (acks and fails included, the rows still
//     held), every row is failed with the error as [Held.Fail] fails one
//     (an attempt counted, the backoff with a RunAt column, parked at
//     MaxAttempts; [RetryAfter] and [Park] apply), and the batch commits:
//     the failure survives the rollback of the handler's work. A retryable
//     conflict ([dialect.IsRetryable]: a deadlock in the batch's
//     statements) and a [SnoozeFor] error instead roll the whole batch back
//     with no attempt counted: its rows are pending again at once.
//   - the batch is lost (its connection or the server's hold limit ended
//     its transaction, or its local deadline passed: its context is
//     cancelled with a cause matching [dialect.ErrClaimLost]): it is
//     rolled back; the server has undone its writes and its rows are
//     pending, with no attempt counted.
//
// handle gets the batch's context, [Held.Context]: it ends with the batch
// (loss, local deadline), not with ctx, so that on shutdown the batches in
// flight finish, bounded by the hold limit, while no new batch is held. To
// fail single rows, handle calls [Held.Fail] and returns nil.
//
// The batch takes a savepoint after its claim (one more round trip per
// batch) so that a failure can undo the handler's writes and keep the
// rows. Run verifies the table against the catalog ([Claimer.Verify])
// before its first hold; errors that holding again cannot cure
// ([dialect.IsPermanent]: a misconfiguration, a missing column, a
// permission denied) stop Run, which lets the batches in flight end and
// returns the error. Other hold, commit and fail errors are logged at
// Error level and retried with backoff. While nothing is pending the
// loops wait as [Claimer.Run]'s do: one polls with jittered backoff
// between 100 ms and 5 s, the others wait for a wake-up
// ([Claimer.Wake], a notification, or a full batch held by another loop).
// A nil handle returns an error wrapping [dialect.ErrInvalidConfig].
func (h *Holder[T]) Run(ctx context.Context, handle func(ctx context.Context, b *Held[T]) error) error {
	if handle == nil {
		return invalid("Holder.Run", "the handler is nil")
	}
	k := h.c.core
	r := &heldRunner[T]{runState: runState{name: "Holder.Run", claims: "holds"}, h: h, handle: handle}
	ctx, end, err := r.start(ctx, k, []*core{k}, k.wake.kick)
	if err != nil {
		return err
	}
	defer end()
	var wg sync.WaitGroup
	for i := range h.MaxInFlight() {
		wg.Go(func() { r.loop(ctx, i) })
	}
	wg.Wait()
	return r.err()
}

// heldRunner is one call of [Holder.Run].
type heldRunner[T any] struct {
	runState
	h      *Holder[T]
	handle func(context.Context, *Held[T]) error
}

// loop holds and handles batches until ctx ends, one hold a step. After
// a hold that found nothing pending, found the claims paused or failed,
// it waits in the claimer's waker before the next, as [Claimer.Run]'s
// loops do (see wake.go): one idle loop polls with backoff, the others
// wait for a wake-up.
func (r *heldRunner[T]) loop(ctx context.Context, worker int) {
	k := r.h.c.core
	log := k.logger.With("worker", worker, "held", true)
	wk := &k.wake
	done := func() {} // frees the poller slot after the hold it allowed
	defer func() { done() }()
	_ = loop.Loop{}.Run(ctx, func(ctx context.Context) loop.Next {
		b, err := r.h.Hold(ctx)
		if err == nil && b.Len() > 0 {
			wk.worked(b.Len(), k.limit)
		}
		done()
		done = func() {}
		switch {
		case err == nil && b.Len() > 0:
			r.process(ctx, b, log)
			return loop.Next{}
		case err != nil && !errors.Is(err, ErrPaused):
			if ctx.Err() != nil || r.check(err) {
				return loop.End(nil)
			}
			log.Error("claimlock: hold failed", "err", err, "retryable", dialect.IsRetryable(err))
		}
		done = wk.idle(ctx, heldPollMin, heldPollMax)
		return loop.Next{}
	})
}

// process hands b to the handler and ends it as Run says.
func (r *heldRunner[T]) process(ctx context.Context, b *Held[T], log *slog.Logger) {
	// The batch ends within the hold limit whatever happens; its end is
	// not cut short by shutdown.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.limit)
	defer cancel()
	defer func() { _ = b.Rollback(ectx) }() // a no-op once the batch has ended
	if err := b.savepoint(ectx); err != nil {
		log.Warn("claimlock: held batch lost before its handler ran; its rows are pending again", "batch", b.token, "err", err)
		return
	}
	herr := callHandler(func() error { return r.handle(b.Context(), b) })
	failed, ended := b.state()
	if cause := context.Cause(b.Context()); ended || errors.Is(cause, dialect.ErrClaimLost) {
		log.Warn("claimlock: held batch lost; its writes are rolled back and its rows pending again", "batch", b.token, "rows", b.Len(), "err", cause, "handler_err", herr)
		return
	}
	if herr == nil && failed != nil {
		herr = failed // the handler went on after a failed statement
	}
	if herr == nil {
		if err := b.AckAll(ectx); err != nil {
			r.check(err)
			log.Error("claimlock: held ack failed; the batch is rolled back", "batch", b.token, "err", err)
			return
		}
		r.commit(ectx, b, log)
		return
	}
	var sn *SnoozeError
	if dialect.IsRetryable(herr) || dialect.IsRetryable(failed) || errors.As(herr, &sn) {
		if err := b.Rollback(ectx); err != nil {
			log.Error("claimlock: held rollback failed; the server ends the batch", "batch", b.token, "err", err)
		}
		return
	}
	if err := b.failAll(ectx, herr); err != nil {
		r.check(err)
		log.Error("claimlock: recording the held batch's failure failed; the batch is rolled back", "batch", b.token, "err", err)
		return
	}
	r.commit(ectx, b, log)
}

// commit commits b, logging a failure.
func (r *heldRunner[T]) commit(ctx context.Context, b *Held[T], log *slog.Logger) {
	if err := b.Commit(ctx); err != nil {
		r.check(err)
		log.Error("claimlock: held commit failed", "batch", b.token, "err", err, "outcome_unknown", errors.Is(err, dialect.ErrOutcomeUnknown))
	}
}

// savepoint takes the savepoint a failure of the handler returns to.
func (b *Held[T]) savepoint(ctx context.Context) error {
	err := b.run(ctx, func() error { return b.h.Savepoint(ctx) })
	if err == nil {
		b.mu.Lock()
		b.sp = true
		b.mu.Unlock()
	}
	return err
}

// state returns the error of the batch's failed statement, if any, and
// whether the batch has ended.
func (b *Held[T]) state() (failed error, ended bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed, b.ended
}

// failAll undoes the batch's writes back to its savepoint (unless a failed
// statement did already) and fails every row with cause, in the batch's
// transaction.
func (b *Held[T]) failAll(ctx context.Context, cause error) error {
	k := b.core
	f, err := k.failureOf(cause)
	if err != nil {
		return fmt.Errorf("claim: fail: %w", err)
	}
	b.mu.Lock()
	switch {
	case b.ended:
		b.mu.Unlock()
		return fmt.Errorf("claim: fail: %w: the held batch has ended", dialect.ErrClaimLost)
	case b.failed == nil:
		if err := b.h.RollbackToSavepoint(ctx); err != nil {
			b.ended = true
			b.mu.Unlock()
			b.lose(ctx, err, false)
			b.finish()
			return storeError("fail", err)
		}
	}
	b.failed = nil
	b.mu.Unlock()
	if k.backsOff(f) {
		// Each row's backoff follows its own attempts.
		for _, r := range b.rows {
			if err := b.Fail(ctx, r.ID, cause); err != nil {
				return err
			}
		}
		return nil
	}
	p := k.failParams(f, nil) // no backoff: one delay for every row
	p.IDs = b.ids()
	return b.write(ctx, "fail", p)
}

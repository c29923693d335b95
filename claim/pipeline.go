package claim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// Pipeline says whether the loops of [Claimer.Run] ack a batch and claim
// the next one in one operation ([Claimer.AckAndClaim]).
type Pipeline int

const (
	// PipelineAuto pipelines where the dialect's capabilities say it
	// measured faster ([dialect.Capabilities.PipelineAckClaim]).
	PipelineAuto Pipeline = iota
	// PipelineOn always pipelines; Run refuses it (ErrNotSupported) with a
	// store that does not implement [store.AckClaimer].
	PipelineOn
	// PipelineOff never pipelines: an ack statement, then a claim.
	PipelineOff
)

// String returns "auto", "on" or "off".
func (p Pipeline) String() string {
	switch p {
	case PipelineAuto:
		return "auto"
	case PipelineOn:
		return "on"
	case PipelineOff:
		return "off"
	}
	return "pipeline(invalid)"
}

// checkPipeline validates a worker's Pipeline against the claimer's store.
func (k *core) checkPipeline(p Pipeline) error {
	if p < PipelineAuto || p > PipelineOff {
		return invalid("WorkerConfig.Pipeline", "unknown value %d", int(p))
	}
	if _, ok := k.cs.(store.AckClaimer); p == PipelineOn && !ok {
		return fmt.Errorf("claim: WorkerConfig.Pipeline: %w: the claim store does not implement store.AckClaimer", ErrNotSupported)
	}
	return nil
}

// pipelines reports whether Run's loops pipeline under p.
func (k *core) pipelines(p Pipeline) bool {
	if _, ok := k.cs.(store.AckClaimer); !ok || p == PipelineOff {
		return false
	}
	return p == PipelineOn || k.d.Capabilities().PipelineAckClaim
}

// AckAllAndClaim acks every row b still holds, deferred acks included (as
// [Batch.AckAll]), and claims the next batch (as [Claimer.Claim]) in one
// operation: on PostgreSQL one statement, on MySQL/MariaDB and SQLite one
// transaction, so a loop pays one commit per batch instead of two. It is
// for hand-written loops; [Claimer.Run] uses it where
// [dialect.Capabilities.PipelineAckClaim] says so (see
// [WorkerConfig.Pipeline]). Fail or release the rows that must not be
// acked first. b must come from c.
//
// The ack and the claim commit together or not at all:
//
//   - Success: the next batch is returned (empty, Len() == 0, when nothing
//     was pending). Rows of b that its token no longer held were left
//     untouched and are reported by an error matching [ErrClaimLost] (a
//     [*LostError]) returned together with the next batch, which must then
//     be processed like any other: next is non-nil whenever the claim
//     happened.
//   - Any other error: next is nil and nothing is known to be written: b
//     still holds its rows (repeat the call, or call [Batch.AckAll] and
//     [Claimer.Claim] apart), and no row stays claimed for the failed
//     claim. When the error matches [dialect.ErrOutcomeUnknown] (a connection lost
//     during the commit), the ack may have been written: a repeated ack
//     then reports the rows it wrote as lost; the rows the claim may have
//     taken are released at once (or, if that fails, left to the reaper,
//     as after a failed [Claimer.Claim]). That release does not hold the
//     call past ctx's end: it then goes on in the background.
//
// Retryable conflicts (deadlocks, serialization failures) re-run the whole
// operation inside the dialect, as for every other statement.
func (c *Claimer[T]) AckAllAndClaim(ctx context.Context, b *Batch[T]) (*Batch[T], error) {
	if err := c.owns(b); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.settle(ctx); err != nil {
		return nil, storeError("ack and claim", err)
	}
	// The open rows include the waiting deferred acks: nothing is in flight.
	return c.ackAndClaimLocked(ctx, b, b.openIndexes(), true)
}

// AckAndClaim acks the rows ids of b (as [Batch.Ack], with b's waiting
// deferred acks riding along) and claims the next batch in one operation,
// with the outcomes of [Claimer.AckAllAndClaim]. Rows of b not in ids stay
// held by b. An id b does not hold gives [ErrNotHeld], and a key of the
// wrong type an error wrapping [ErrInvalidConfig]; then nothing is written
// and nothing claimed.
func (c *Claimer[T]) AckAndClaim(ctx context.Context, b *Batch[T], ids ...any) (*Batch[T], error) {
	if err := c.owns(b); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, err := b.lookup("ack and claim", ids)
	if err != nil {
		return nil, err
	}
	return c.ackAndClaimLocked(ctx, b, idx, false)
}

// owns refuses a nil batch or one of another claimer.
func (c *Claimer[T]) owns(b *Batch[T]) error {
	switch {
	case b == nil:
		return invalid("batch", "is nil")
	case b.core != c.core:
		return invalid("batch", "was claimed by another claimer")
	}
	return nil
}

// ackAndClaimLocked acks rows own of b (b.mu held) and the waiting deferred
// acks, and claims the next batch, in one operation. With all, own are all
// the open rows (the waiting deferred acks among them) and the lost deferred
// acks found earlier are reported too, as by AckAll.
func (c *Claimer[T]) ackAndClaimLocked(ctx context.Context, b *Batch[T], own []int, all bool) (*Batch[T], error) {
	idx := own
	if d := b.later; !all && d != nil && len(d.wait) > 0 {
		idx = append(own[:len(own):len(own)], d.wait...)
	}
	ac, ok := c.core.cs.(store.AckClaimer)
	if !ok || len(idx) == 0 {
		// Nothing to pipeline with: an ack statement (if any), then a claim.
		var err error
		if all {
			err = b.ackAllLocked(ctx, own)
		} else {
			err = b.ackLocked(ctx, own)
		}
		if err != nil && !errors.Is(err, ErrClaimLost) {
			return nil, err
		}
		next, cerr := c.Claim(ctx)
		if cerr != nil {
			return nil, errors.Join(cerr, err)
		}
		return next, err
	}
	p := b.doneParams(idx)
	var res store.AckResult
	written := false
	next, err := c.claimVia(ctx, func(ctx context.Context, cp *store.ClaimParams, scan func(store.Scanner) error) (int, error) {
		r, n, err := ac.AckAndClaim(ctx, &store.AckClaimParams{Ack: *p, Claim: *cp}, scan)
		// A scan error comes after both parts committed (the claimer then
		// reads the claimed rows again): the ack's result holds.
		if se := (*scanError)(nil); err == nil || errors.As(err, &se) {
			res, written = r, true
		}
		return n, err
	})
	if !written {
		return nil, err
	}
	lost := b.recordDeferredDone(idx, p, res, all)
	lerr := lostError("ack", lost)
	if err != nil {
		// Only reading the claimed rows failed; the ack is recorded.
		return nil, errors.Join(err, lerr)
	}
	return next, lerr
}

// ackAllLocked is AckAll's write with b.mu held and no background write in
// flight: rows idx (the open ones) in one statement, and the lost deferred
// acks found earlier reported with them.
func (b *Batch[T]) ackAllLocked(ctx context.Context, idx []int) error {
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
		d.wait = nil
		lost = append(d.takeLost(), lost...)
	}
	return lostError("ack", lost)
}

// recordDeferredDone records the committed ack p of rows idx (with b.mu
// held) and ends the deferral of the waiting deferred acks, which idx
// includes. It returns the lost keys to report: those not deferred, and
// with all every lost deferred ack not reported yet (the others are kept
// for Flush).
func (b *Batch[T]) recordDeferredDone(idx []int, p *store.AckParams, res store.AckResult, all bool) []any {
	d := b.later
	deferred := map[int]bool{}
	if d != nil {
		for _, i := range d.wait {
			deferred[i] = true
		}
	}
	var lost []any
	for _, j := range b.recordDone(idx, p, res) {
		if i := idx[j]; deferred[i] && !all {
			d.lost = append(d.lost, b.rows[i].ID)
		} else {
			lost = append(lost, b.rows[i].ID)
		}
	}
	if d != nil {
		d.stop()
		d.wait = nil
		if all {
			lost = append(d.takeLost(), lost...)
		}
	}
	return lost
}

// pipelineFinish ends a processed batch of Run by failing the rows whose
// handler failed and then acking the others together with the claim of the
// next batch, when w pipelines and the batch ended normally (every row
// processed, none lost, no shutdown). It reports false, having written
// nothing, otherwise. When the ack+claim fails, the rows are acked on their
// own and the loop claims as usual. b.mu is held.
func (r *runner[T]) pipelineFinish(ctx, fctx context.Context, b *Batch[T], ok, failed []int, causes []error, log *slog.Logger) (*Batch[T], bool) {
	c := r.c
	if !c.core.pipelines(r.w.Pipeline) || ctx.Err() != nil || b.lost() || len(ok) == 0 || len(ok)+len(failed) != len(b.rows) {
		return nil, false
	}
	for j, i := range failed {
		if err := b.settleFailure(fctx, i, causes[j], log); err != nil && !errors.Is(err, ErrClaimLost) {
			r.check(err)
			log.Error("claimlock: fail failed; row stays processing until reaped", "token", b.token, "id", b.rows[i].ID, "err", err)
		}
	}
	next, err := c.ackAndClaimLocked(fctx, b, ok, false)
	if next != nil {
		if err != nil && !errors.Is(err, ErrClaimLost) {
			r.check(err)
			log.Error("claimlock: ack and claim", "token", b.token, "err", err)
		}
		return next, true
	}
	log.Warn("claimlock: ack and claim failed; acking on its own", "token", b.token, "err", err, "retryable", dialect.IsRetryable(err))
	// Rows the failed call recorded (it wrote the ack but could not read the
	// claimed rows) are closed already.
	ok = slices.DeleteFunc(slices.Clone(ok), func(i int) bool { return !b.open[i] })
	if err := b.ackLocked(fctx, ok); err != nil && !errors.Is(err, ErrClaimLost) {
		r.check(err)
		log.Error("claimlock: ack failed; rows stay processing until reaped", "token", b.token, "ids", b.idsOf(ok), "err", err)
	}
	return nil, true
}

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
// the next one in one operation: on PostgreSQL one statement, on
// MySQL/MariaDB and SQLite one transaction, so that a loop pays one commit
// per batch instead of two. The ack and the claim commit together or not at
// all, and lost rows are still reported one by one. Whether that is faster
// depends on the server: see the README's performance section.
type Pipeline int

const (
	// PipelineAuto pipelines where the dialect's capabilities say it
	// measured faster ([dialect.Capabilities.PipelineAckClaim]).
	PipelineAuto Pipeline = iota
	// PipelineOn always pipelines.
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
		return fmt.Errorf("claim: WorkerConfig.Pipeline: %w: this engine's claim store cannot ack and claim in one operation", dialect.ErrNotSupported)
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
// operation, for a hand-written loop that pipelines as [Claimer.Run] does
// with [PipelineOn]. Fail or release the rows that must not be acked first.
// b must come from c.
//
// The ack and the claim commit together or not at all:
//
//   - Success: the next batch is returned (empty, Len() == 0, when nothing
//     was pending). Rows of b that its token no longer held were left
//     untouched and are reported by an error matching
//     [dialect.ErrClaimLost] (a [*LostError]) returned together with the
//     next batch, which must then be processed like any other: next is
//     non-nil whenever the claim happened.
//   - Any other error: next is nil and nothing is known to be written: b
//     still holds its rows (repeat the call, or call [Batch.AckAll] and
//     [Claimer.Claim] apart), and no row stays claimed for the failed
//     claim. When the error matches [dialect.ErrOutcomeUnknown] (a
//     connection lost during the commit), the ack may have been written: a
//     repeated ack then reports the rows it wrote as lost; the rows the
//     claim may have taken are released at once (or, if that fails, left to
//     the reaper). That release does not hold the call past ctx's end.
//     When the claimer's table or scope is paused, the error matches
//     [ErrPaused] and nothing was written either.
func (c *Claimer[T]) AckAllAndClaim(ctx context.Context, b *Batch[T]) (*Batch[T], error) {
	switch {
	case b == nil:
		return nil, invalid("batch", "is nil")
	case b.core != c.core:
		return nil, invalid("batch", "was claimed by another claimer")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.settle(ctx); err != nil {
		return nil, storeError("ack and claim", err)
	}
	// The open rows include the waiting deferred acks: nothing is in flight.
	next, err := c.ackAndClaimLocked(ctx, b, b.openIndexes())
	if d := b.later; d != nil && (err == nil || next != nil) {
		// Lost deferred acks found earlier are reported with these, as by
		// AckAll.
		if lost := d.takeLost(); len(lost) > 0 {
			var le *LostError
			if errors.As(err, &le) {
				le.IDs = append(lost, le.IDs...)
			} else {
				err = lostError("ack", lost)
			}
		}
	}
	return next, err
}

// ackAndClaimLocked acks rows own of b (b.mu held), with the waiting
// deferred acks riding along, and claims the next batch, in one operation:
// on PostgreSQL one statement, on MySQL/MariaDB and SQLite one transaction.
// Both commit or neither does. On success it returns the next batch (empty
// when nothing was pending) and, for rows of own the token no longer held,
// a [*LostError]. On any other error next is nil and nothing is known to be
// written: b still holds its rows (an error matching
// dialect.ErrOutcomeUnknown means the ack may have been written; the rows
// the claim may have taken are released as after a failed claim).
func (c *Claimer[T]) ackAndClaimLocked(ctx context.Context, b *Batch[T], own []int) (*Batch[T], error) {
	idx := own
	if d := b.later; d != nil && len(d.wait) > 0 {
		idx = append(own[:len(own):len(own)], d.wait...)
	}
	ac, ok := c.core.cs.(store.AckClaimer)
	if !ok {
		return nil, fmt.Errorf("claim: ack and claim: %w: the store does not pipeline", dialect.ErrNotSupported)
	}
	p := b.doneParams(idx)
	var res store.AckResult
	written := false
	next, err := c.claimVia(ctx, c.core.limit, func(ctx context.Context, cp *store.ClaimParams, scan func(store.Scanner) error) (int, error) {
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
	lost := b.recordDeferredDone(idx, p, res)
	lerr := lostError("ack", lost)
	if err != nil {
		// Only reading the claimed rows failed; the ack is recorded.
		return nil, errors.Join(err, lerr)
	}
	return next, lerr
}

// recordDeferredDone records the committed ack p of rows idx (with b.mu
// held) and ends the deferral of the waiting deferred acks, which idx
// includes. It returns the lost keys of the rows that were not deferred;
// lost deferred acks are kept for Flush.
func (b *Batch[T]) recordDeferredDone(idx []int, p *store.AckParams, res store.AckResult) []any {
	d := b.later
	deferred := map[int]bool{}
	if d != nil {
		for _, i := range d.wait {
			deferred[i] = true
		}
	}
	var lost []any
	for _, j := range b.recordDone(idx, p, res) {
		if i := idx[j]; deferred[i] {
			d.lost = append(d.lost, b.rows[i].ID)
		} else {
			lost = append(lost, b.rows[i].ID)
		}
	}
	if d != nil {
		d.stop()
		d.wait = nil
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
	if !r.pipe || ctx.Err() != nil || b.lost() || len(ok) == 0 || len(ok)+len(failed) != len(b.rows) {
		return nil, false
	}
	r.failRows(fctx, b, failed, causes, log)
	next, err := c.ackAndClaimLocked(fctx, b, ok)
	b.noteUnknown(err)
	if next != nil {
		if err != nil && !errors.Is(err, dialect.ErrClaimLost) {
			r.check(err)
			log.Error("claimlock: ack and claim", "token", b.token, "err", err)
		}
		return next, true
	}
	if !errors.Is(err, ErrPaused) {
		log.Warn("claimlock: ack and claim failed; acking on its own", "token", b.token, "err", err, "retryable", dialect.IsRetryable(err))
	}
	// Rows the failed call recorded (it wrote the ack but could not read the
	// claimed rows) are closed already.
	ok = slices.DeleteFunc(slices.Clone(ok), func(i int) bool { return !b.isOpen(i) })
	err = b.outlast(fctx, "ack", false, func() error {
		ok = slices.DeleteFunc(ok, b.settledLocked)
		return b.ackLocked(fctx, ok)
	})
	if err != nil && !errors.Is(err, dialect.ErrClaimLost) {
		r.check(err)
		log.Error("claimlock: ack failed; rows stay processing until reaped", "token", b.token, "ids", b.idsOf(ok), "err", err)
	}
	return nil, true
}

package claim

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/detach"
	"github.com/claimlock/claimlock/internal/loop"
)

// KeepAlive heartbeats the batch every Config.HeartbeatInterval in a
// background goroutine, so that a reaper whose timeout is several intervals
// long never takes rows that are still being worked on, and so that the
// batch's local deadline (Config.ReapTimeout) keeps moving while the
// database answers. Without an interval (no HeartbeatInterval and no
// ReapTimeout) it returns a stop that does nothing.
//
// The goroutine ends by itself once the batch holds no rows (all acked,
// failed or released, or every row found lost) and when ctx ends; stop ends
// it earlier and waits for a heartbeat in progress. Call stop after the
// batch's acks and release (last), so that rows never look stale while they
// are still held, and pass a ctx that outlives them: from a worker that
// acks with a fresh context on shutdown, context.WithoutCancel(ctx), and let
// the deferred stop end the heartbeats.
//
// Each tick first writes the batch's deferred acks (Config.AckDelay).
// A heartbeat may take until the batch's local deadline (at least one
// interval); one that an outage failed is logged and tried again after a
// short jittered pause (50 ms, doubling up to the interval), so that the
// rows are kept as soon as the database is back, not one interval later;
// one
// that finds rows lost loses those rows only (see [Batch.Heartbeat]) and
// logs them, and heartbeats go on for the rows still held, so that their
// work, acks and release can still land. tasklock.Lease.KeepAlive is the
// same for leases.
func (b *Batch[T]) KeepAlive(ctx context.Context) (stop func()) {
	interval := b.core.heartbeat
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(detach.Background(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.keepAlive(ctx, interval)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

func (b *Batch[T]) keepAlive(ctx context.Context, interval time.Duration) {
	failures := 0 // heartbeats an outage failed in a row
	// b.closed: nothing held any more.
	_ = loop.Loop{First: interval, Stop: b.closed}.Run(ctx, func(ctx context.Context) loop.Next {
		hctx, hcancel := context.WithTimeout(ctx, b.heartbeatTimeout(interval))
		// Deferred acks first: written rows need no heartbeat, and
		// their write never waits for a lapse.
		if err := b.writeDeferred(hctx); err != nil && ctx.Err() == nil {
			b.core.logger.Warn("claimlock: deferred ack write failed; rows stay held", "token", b.token, "err", err)
		}
		n, err := b.heartbeat(hctx, true)
		hcancel()
		next := interval
		switch {
		case err == nil && n == 0:
			return loop.End(nil) // nothing held any more
		case errors.Is(err, dialect.ErrClaimLost):
			// Only the rows this heartbeat found lost are reported: the
			// next one expects them no more. When none is left, the
			// batch has ended and the next tick sees it.
			b.core.logger.Warn("claimlock: heartbeat found rows lost; the batch goes on with the rest", "token", b.token, "held", n, "err", err)
			failures = 0
		case err != nil && ctx.Err() == nil:
			// The database may be back long before the next tick, and
			// the reaper's clock has been running: try again soon (a
			// heartbeat is conditioned on the token, so it is safe at
			// any time), doubling the pause up to the interval.
			if outage(err) {
				next = min(interval, loop.Backoff(failures, outageRetryBase, outageRetryMax))
			}
			level := slog.LevelWarn
			if failures > 0 {
				level = slog.LevelDebug // the first failure of an outage was logged
			}
			b.core.logger.Log(ctx, level, "claimlock: heartbeat failed", "token", b.token, "retry_in", next, "err", err)
			failures++
		case err == nil && failures > 0:
			b.core.logger.Info("claimlock: heartbeat succeeded again", "token", b.token, "failed", failures)
			failures = 0
		}
		return loop.After(next)
	})
}

// heartbeatTimeout bounds one tick's statements: until the batch's local
// deadline, since a heartbeat that lands before it still keeps the rows,
// and never less than one interval. Cutting a heartbeat off at the next
// tick instead would, on a loaded server, abort every heartbeat (and, on
// drivers that close a connection whose query was cancelled, make each
// next one pay for a new connection), so that the keep-alive found neither
// the rows held nor the rows lost.
func (b *Batch[T]) heartbeatTimeout(interval time.Duration) time.Duration {
	if d, ok := b.Deadline(); ok {
		if left := time.Until(d); left > interval {
			return left
		}
	}
	return interval
}

// Heartbeat moves the claim time of every row the token still holds to the
// database's now, so that a reaper does not take them back, and returns how
// many rows it holds. Rows the batch holds that the token no longer holds
// (reaped, released, reset or deleted by an operator, changed by another
// writer) are lost, and only they: they are closed (never acked, failed or
// released by the batch, listed by [Batch.Lost]), their row contexts end
// ([Batch.RowContext]), an OpLost event lists them, and the error is a
// [*LostError] listing them (matching [dialect.ErrClaimLost]; the count is
// still returned). The batch's context ([Batch.Context]) ends only when no
// row is left held. Deferred acks (Config.AckDelay) are not checked: their
// write reports them lost if they were.
//
// A batch that holds nothing makes no statement: its heartbeat reports the
// rows [Batch.KeepAlive]'s heartbeats found lost that no caller has been
// told of yet (a [*LostError]; AckAll, Flush and Release still report them
// too), and returns nil when there are none: rows whose loss an ack, a fail
// or an earlier call reported are not reported again.
//
// A heartbeat that finds the remaining rows held moves the local deadline
// to the local start of its statement + Config.ReapTimeout -
// Config.SafetyMargin, unless the batch has ended already: an ended batch
// stays ended.
func (b *Batch[T]) Heartbeat(ctx context.Context) (int64, error) { return b.heartbeat(ctx, false) }

// heartbeat is [Batch.Heartbeat]; background is set for [Batch.KeepAlive]'s,
// whose lost rows no caller has heard of: the next AckAll, Flush or Release
// reports them.
func (b *Batch[T]) heartbeat(ctx context.Context, background bool) (int64, error) {
	b.mu.Lock()
	open := b.nOpen
	b.mu.Unlock()
	if open == 0 {
		return 0, b.unheardLost()
	}
	// The statement runs without the batch's lock: it may wait for rows a
	// caller's transaction holds ([Batch.AckTx]), and that caller may call
	// the batch meanwhile.
	start := time.Now()
	held, err := b.core.cs.Heartbeat(ctx, b.token)
	if err != nil {
		return 0, storeError("heartbeat", err)
	}
	b.mu.Lock()
	// Rows only ever close, so every row open now was open, and held if
	// not lost, while the statement ran; rows closed meanwhile may or may
	// not have been listed, and are not looked at.
	missing := b.missingLocked(held)
	lostErr := b.closeWritten("heartbeat", missing, allPositions(len(missing)))
	if lostErr != nil && background {
		b.unheard = append(b.unheard, b.idsOf(missing)...)
	}
	b.mu.Unlock()
	if lostErr != nil {
		b.core.observeLost(ctx, b.token, start, b.idsOf(missing))
	}
	b.extend(start) // the rows left were found held; an ended batch stays ended
	if lostErr == nil && len(held) == 0 {
		// The rows closed meanwhile: a KeepAlive heartbeat may have found
		// them lost first.
		return 0, b.unheardLost()
	}
	return int64(len(held)), lostErr
}

// unheardLost returns the [*LostError] of the rows [Batch.KeepAlive]'s
// heartbeats found lost that no caller has been told of yet, nil when there
// are none. It leaves them unheard: the next AckAll, Flush or Release still
// reports them. Rows whose loss an ack, a fail or a caller's heartbeat
// reported already are not reported again.
func (b *Batch[T]) unheardLost() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return lostError("heartbeat", slices.Clone(b.unheard))
}

// allPositions returns 0, 1, ..., n-1.
func allPositions(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

package claim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/observe"
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
// interval); one that fails is logged and tried again at the next tick; one
// that finds rows lost ends the batch's context ([Batch.Context]) and is
// logged once (again only if more rows go), and heartbeats go on for the
// rows still held, so that the batch's final acks and release can still
// land; the next ack reports the lost rows precisely. tasklock.Lease.KeepAlive
// is the same for leases.
func (b *Batch[T]) KeepAlive(ctx context.Context) (stop func()) {
	interval := b.core.heartbeat
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(observe.Background(ctx))
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
	t := time.NewTicker(interval)
	defer t.Stop()
	held := int64(-1) // rows held at the last heartbeat that found a loss
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.closed:
			return // nothing held any more
		case <-t.C:
		}
		hctx, hcancel := context.WithTimeout(ctx, b.heartbeatTimeout(interval))
		// Deferred acks first: written rows need no heartbeat, and
		// their write never waits for a lapse.
		if err := b.writeDeferred(hctx); err != nil && ctx.Err() == nil {
			b.core.logger.Warn("claimlock: deferred ack write failed; rows stay held", "token", b.token, "err", err)
		}
		n, err := b.Heartbeat(hctx)
		hcancel()
		switch {
		case err == nil && n == 0:
			return // nothing held any more
		case errors.Is(err, dialect.ErrClaimLost):
			if n == 0 {
				return // every row lost: nothing left to keep
			}
			if held < 0 || n < held {
				b.core.logger.Warn("claimlock: heartbeat found rows lost", "token", b.token, "held", n, "err", err)
			}
			held = n
		case err != nil && ctx.Err() == nil:
			b.core.logger.Warn("claimlock: heartbeat failed", "token", b.token, "err", err)
		}
	}
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
// many rows it holds. When fewer rows are held than the batch expects, the
// error wraps [dialect.ErrClaimLost] (the count is still returned), and the batch's
// context ends with it ([Batch.Context]); the lost rows are found by the
// next ack. A heartbeat that finds every row held moves the local deadline
// to the local start of its statement + Config.ReapTimeout -
// Config.SafetyMargin, unless the batch has ended already: an ended batch
// stays ended.
func (b *Batch[T]) Heartbeat(ctx context.Context) (int64, error) {
	b.mu.Lock()
	open := b.nOpen
	b.mu.Unlock()
	if open == 0 {
		return 0, nil
	}
	// The statement runs without the batch's lock: it may wait for rows a
	// caller's transaction holds ([Batch.AckTx]), and that caller may call
	// the batch meanwhile.
	start := time.Now()
	n, err := b.core.cs.Heartbeat(ctx, b.token)
	if err != nil {
		return 0, storeError("heartbeat", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// Rows only ever close, so every row open now was open, and held if
	// not lost, while the statement ran; rows closed meanwhile may or may
	// not have been counted. Rows of a background ack write in flight are
	// held until it commits, which may be before or after the heartbeat:
	// expect at least the others.
	if least := b.nOpen - b.later.inFlight(); n < int64(least) {
		err := fmt.Errorf("claim: heartbeat: token holds %d of %d rows: %w", n, least, dialect.ErrClaimLost)
		b.end(err)
		return n, err
	}
	b.extend(start)
	return n, nil
}

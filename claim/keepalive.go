package claim

import (
	"context"
	"errors"
	"sync"
	"time"
)

// KeepAlive heartbeats the batch every interval in a background goroutine,
// so that a reaper with a timeout longer than a few intervals never takes
// rows that are still being worked on, and so that the batch's local
// deadline (Config.ReapTimeout) keeps moving while the database answers.
// interval <= 0 returns a stop that does nothing.
//
// The goroutine ends by itself once the batch holds no rows (all acked,
// failed or released, or every row found lost) and when ctx ends; stop ends
// it earlier and waits for a heartbeat in progress. Call stop after the
// batch's acks and release (last), so that rows never look stale while they
// are still held, and pass a ctx that outlives them: in a worker that acks
// with a fresh context on shutdown, context.WithoutCancel(ctx), and let the
// deferred stop end the heartbeats.
//
// Each tick first writes the batch's deferred acks ([Batch.AckLater]).
// A heartbeat that fails is logged and tried again at the next tick; one
// that finds rows lost ends the batch's context ([Batch.Context]) and is
// logged once (again only if more rows go), and heartbeats go on for the
// rows still held, so that the batch's final acks and release can still
// land; the next ack reports the lost rows precisely.
func (b *Batch[T]) KeepAlive(ctx context.Context, interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(markBackground(ctx))
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
		hctx, hcancel := context.WithTimeout(ctx, interval)
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
		case errors.Is(err, ErrClaimLost):
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

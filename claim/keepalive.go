package claim

import (
	"context"
	"errors"
	"sync"
	"time"
)

// KeepAlive heartbeats the batch every interval in a background goroutine,
// so that a reaper with a timeout longer than a few intervals never takes
// rows that are still being worked on. It stops by itself once the batch
// holds no rows. stop ends it and waits for a heartbeat in progress; call it
// after the batch's acks and release (last), so that rows never look stale
// while they are still held. interval <= 0 returns a stop that does nothing.
//
// Each tick first writes the batch's deferred acks ([Batch.AckLater]).
// A heartbeat that fails is logged and tried again at the next tick; one
// that finds rows lost is logged (the next ack reports them precisely).
func (b *Batch[T]) KeepAlive(interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(markBackground(context.Background()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
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
				b.core.logger.Warn("claimlock: heartbeat found rows lost", "token", b.token, "held", n, "err", err)
			case err != nil && ctx.Err() == nil:
				b.core.logger.Warn("claimlock: heartbeat failed", "token", b.token, "err", err)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

package tasklock

import (
	"context"
	"time"

	"github.com/claimlock/claimlock/internal/store"
)

// keepAlive is a running background renewal loop.
type keepAlive struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// KeepAlive starts renewing the lease in the background every
// RenewInterval, measured from the start of the last successful renewal.
// Each renewal runs with a timeout (half the time left before the local
// deadline, or one RenewInterval if that is longer and fits); a failed one
// is retried with backoff until the local deadline, which fires regardless
// of the database. The loop stops when
// the lease ends, on [Lease.StopKeepAlive] and on [Lease.Release]. Calling
// KeepAlive on a lease that already keeps alive, or has ended, does nothing.
func (l *Lease) KeepAlive() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ka != nil || l.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(l.ctx)
	ka := &keepAlive{cancel: cancel, done: make(chan struct{})}
	l.ka = ka
	go l.keepAliveLoop(ctx, ka.done)
}

// StopKeepAlive stops the background renewals without releasing: the lease
// then ends at its local deadline unless renewed by hand. It cancels an
// in-flight renewal and waits for it to return, but no longer than ctx
// allows and at most a quarter of a second.
func (l *Lease) StopKeepAlive(ctx context.Context) {
	l.stopKeepAlive(ctx)
}

func (l *Lease) stopKeepAlive(ctx context.Context) {
	l.mu.Lock()
	ka := l.ka
	l.ka = nil
	l.mu.Unlock()
	if ka == nil {
		return
	}
	ka.cancel()
	t := time.NewTimer(stopWait)
	defer t.Stop()
	select {
	case <-ka.done:
	case <-ctx.Done():
	case <-t.C:
	}
}

// stopWait bounds how long stopping a keep-alive waits for an in-flight
// renewal whose driver ignores cancellation. Not waiting longer is safe: a
// renewal that commits after a release matches no row (it is conditioned on
// the owner), and one that commits after the lease ended locally does not
// revive it.
const stopWait = 250 * time.Millisecond

func (l *Lease) keepAliveLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	cfg := l.k.cfg
	failures := 0
	var wait time.Duration
	for {
		if failures == 0 {
			// Next renewal is due RenewInterval after the start of the last
			// successful one, i.e. at deadline - TTL + SafetyMargin + interval.
			due := l.Deadline().Add(-cfg.TTL + cfg.SafetyMargin + cfg.RenewInterval)
			wait = due.Sub(cfg.Now())
		} else {
			wait = store.Backoff(failures-1, cfg.RenewInterval/8, cfg.RenewInterval/2)
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		// Half the time left, so a hung statement leaves room for a retry
		// (but not less than one interval, unless the deadline is nearer).
		remaining := l.Deadline().Sub(cfg.Now())
		timeout := max(remaining/2, min(remaining, cfg.RenewInterval))
		if timeout <= 0 {
			// The deadline timer ends the lease; nothing left to renew.
			<-ctx.Done()
			return
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err := l.Renew(rctx)
		cancel()
		switch {
		case err == nil:
			failures = 0
		case isLost(err) || l.ctx.Err() != nil:
			return
		default:
			failures++
		}
	}
}

package tasklock

import (
	"context"
	"sync"
	"time"

	"github.com/claimlock/claimlock/internal/loop"
)

// keepAlive is a running background renewal loop.
type keepAlive struct {
	cancel context.CancelFunc
	stop   chan struct{} // closed (once) to end the loop between renewals
	once   sync.Once
	done   chan struct{}
}

// KeepAlive renews the lease in the background every Config.RenewInterval,
// measured from the start of the last successful renewal, so that it stays
// held while the work it protects goes on. Each renewal runs with a timeout
// (half the time left before the local deadline, or one RenewInterval if
// that is longer and fits); a failed one is tried again with backoff until
// the local deadline, which ends the lease whether or not the database
// answers. The renewals end when the lease ends (released, finished or
// lost), when ctx ends, and when stop is called; stop lets a renewal in
// flight finish (cancelling it if it has not within a quarter second) and
// waits for it briefly. Calling KeepAlive on a lease that
// already keeps alive, or has ended, starts nothing (its stop does
// nothing). [github.com/claimlock/claimlock/claim.Batch.KeepAlive] is the same
// for claimed rows.
func (l *Lease) KeepAlive(ctx context.Context) (stop func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ka != nil || l.ctx.Err() != nil {
		return func() {}
	}
	kctx, cancel := context.WithCancel(l.ctx)
	stopOnCtx := context.AfterFunc(ctx, cancel)
	ka := &keepAlive{cancel: func() { stopOnCtx(); cancel() }, stop: make(chan struct{}), done: make(chan struct{})}
	l.ka = ka
	go l.keepAliveLoop(kctx, ka.stop, ka.done)
	var once sync.Once
	return func() {
		once.Do(func() { l.stopKeepAlive(context.Background(), ka) })
	}
}

// stopKeepAlive stops the renewals of ka (the lease's running keep-alive,
// or nil for whichever runs), waiting for a renewal in flight no longer
// than ctx allows and at most stopWait.
func (l *Lease) stopKeepAlive(ctx context.Context, ka *keepAlive) {
	l.mu.Lock()
	if ka == nil {
		ka = l.ka
	}
	if l.ka == ka {
		l.ka = nil
	}
	l.mu.Unlock()
	if ka == nil {
		return
	}
	// A renewal in flight is let finish first (briefly): cancelled, it may
	// still commit on the server while its caller sees only the
	// cancellation, and on a task table without an owner column the lease's
	// stamp is the lock_at it wrote, so a release that follows would be
	// conditioned on a stamp the row no longer has and leave the key taken
	// until its TTL ran out.
	ka.once.Do(func() { close(ka.stop) })
	for _, cancel := range []func(){func() {}, ka.cancel} {
		cancel()
		t := time.NewTimer(stopWait)
		select {
		case <-ka.done:
			t.Stop()
			ka.cancel()
			return
		case <-ctx.Done():
			t.Stop()
			ka.cancel()
			return
		case <-t.C:
		}
	}
}

// stopWait bounds how long stopping a keep-alive waits for an in-flight
// renewal whose driver ignores cancellation. Not waiting longer is safe: a
// renewal that commits after a release matches no row (it is conditioned on
// the owner), and one that commits after the lease ended locally does not
// revive it.
const stopWait = 250 * time.Millisecond

func (l *Lease) keepAliveLoop(ctx context.Context, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	cfg := l.k.cfg
	// due is the wait for the next renewal: RenewInterval after the start
	// of the last successful one, i.e. at deadline - TTL + SafetyMargin +
	// interval.
	due := func() time.Duration {
		return l.deadlineNow().Add(-cfg.TTL + cfg.SafetyMargin + cfg.RenewInterval).Sub(cfg.Now())
	}
	failures := 0
	_ = loop.Loop{First: due(), Stop: stop}.Run(ctx, func(ctx context.Context) loop.Next {
		// Half the time left, so a hung statement leaves room for a retry
		// (but not less than one interval, unless the deadline is nearer).
		remaining := l.deadlineNow().Sub(cfg.Now())
		timeout := max(remaining/2, min(remaining, cfg.RenewInterval))
		if timeout <= 0 {
			// The deadline timer ends the lease; nothing left to renew.
			<-ctx.Done()
			return loop.End(nil)
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err := l.Renew(rctx)
		cancel()
		switch {
		case err == nil:
			failures = 0
			return loop.After(due())
		case isLost(err) || l.ctx.Err() != nil:
			return loop.End(nil)
		default:
			failures++
			return loop.After(loop.Backoff(failures-1, cfg.RenewInterval/8, cfg.RenewInterval/2))
		}
	})
}

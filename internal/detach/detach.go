// Package detach is the work a library call does apart from its caller.
// [Run] runs the clean-up work a call does on its own after the caller's
// work is done or failed: work that must not be cut short by the caller's
// context (it may have ended already) and that must not hold the caller
// past that context's deadline either. [Background] and [Context] mark the
// contexts of the work the library does on its own goroutines, so that
// their events say so to observers ([IsBackground]).
package detach

import (
	"context"
	"time"
)

// Run runs fn in a goroutine with a context that keeps ctx's values but not
// its cancellation, bounded by timeout, and waits for fn only while ctx
// lasts: once ctx ends, Run returns and fn finishes in the background.
func Run(ctx context.Context, timeout time.Duration, fn func(context.Context)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		fn(fctx)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// LatePauses are the pauses before each try of [Late]: 4.3 s in all.
var LatePauses = []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second, 3 * time.Second}

// Late undoes a write of unknown outcome that the server may still be
// running after its caller gave up on it (MySQL finishes a statement whose
// connection the driver closed; a PostgreSQL cancel request can come too
// late), once a first undo found nothing to undo. It returns at once; on
// a goroutine of its own it calls undo after each pause of [LatePauses],
// with a context of ctx's values bounded by timeout, until undo reports
// that it is done (it found the write and undid it, or failed for good:
// an error that may pass is for the next try), or until
// the next try would come at or after until (zero: no bound), after which
// the write no longer matters (a reaper or the lease's expiry takes it).
func Late(ctx context.Context, timeout time.Duration, until time.Time, undo func(context.Context) (done bool)) {
	go func() {
		fctx, cancel := context.WithTimeout(Context(ctx), timeout)
		defer cancel()
		for _, pause := range LatePauses {
			if !until.IsZero() && !time.Now().Add(pause).Before(until) {
				return
			}
			select {
			case <-fctx.Done():
				return
			case <-time.After(pause):
			}
			if undo(fctx) {
				return
			}
		}
	}()
}

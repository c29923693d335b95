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

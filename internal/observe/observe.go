// Package observe is what the claim, tasklock and zombie packages share to
// report events to their Observers: the context of work the library does on
// its own goroutines, and how an event learns that it came from one. It is
// not for users.
package observe

import "context"

// backgroundKey marks a context made by the library for work on its own
// goroutines (deferred ack writes, keep-alive heartbeats and renewals, a
// lease's loss).
type backgroundKey struct{}

// Background returns ctx marked as the library's own.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// Detached returns a context with ctx's values (its trace, say) but not its
// cancellation, marked as the library's own: the parent of the contexts of
// a batch's or a lease's own goroutines.
func Detached(ctx context.Context) context.Context {
	return Background(context.WithoutCancel(ctx))
}

// IsBackground reports whether ctx was marked by [Background].
func IsBackground(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}

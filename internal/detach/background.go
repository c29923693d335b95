package detach

import "context"

// This file marks the contexts of work the library does on its own
// goroutines (deferred ack writes, keep-alive heartbeats and renewals, a
// lease's loss), so that the events of that work tell observers so
// (observe.Event.Background).

// backgroundKey marks a context made by the library for work on its own
// goroutines.
type backgroundKey struct{}

// Background returns ctx marked as the library's own.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// Context returns a context with ctx's values (its trace, say) but not its
// cancellation, marked as the library's own: the parent of the contexts of
// a batch's or a lease's own goroutines.
func Context(ctx context.Context) context.Context {
	return Background(context.WithoutCancel(ctx))
}

// IsBackground reports whether ctx was marked by [Background].
func IsBackground(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}

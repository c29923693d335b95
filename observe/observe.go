package observe

import "context"

// Observer receives an [Event] after each operation of a claimlock
// package. It is called synchronously on the goroutine that did the work
// (for work the library does on its own goroutines, such as a deferred
// ack's write or a keep-alive, on that goroutine), so it must be cheap and
// safe for concurrent use, and must not keep the event's slices.
//
// ctx is the context the operation ran with: the caller's for a call (so a
// span started from it nests under the caller's trace). For work on the
// library's own goroutines, ctx carries the values of the context that
// started that work (its trace, for example) without its cancellation, and
// [Event.Background] is set. The event is reported after the operation
// returned: an adapter that makes spans sets their start to [Event.Start].
type Observer interface {
	// Observe is called once per operation, after it finished.
	Observe(ctx context.Context, e Event)
}

// Func adapts a function to [Observer].
type Func func(ctx context.Context, e Event)

// Observe calls f.
func (f Func) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Join returns an Observer that passes each event to every non-nil
// observer of obs, in order. It returns nil when none is non-nil (the
// configurations read a nil Observer as none), and the observer itself when
// only one is.
func Join(obs ...Observer) Observer {
	var all joined
	for _, o := range obs {
		if o != nil {
			all = append(all, o)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return all
}

// joined is the [Observer] of [Join].
type joined []Observer

func (j joined) Observe(ctx context.Context, e Event) {
	for _, o := range j {
		o.Observe(ctx, e)
	}
}

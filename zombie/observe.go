package zombie

import (
	"context"
	"time"
)

// Observer receives an [Event] after each sweep of a [Reaper] or
// [LeaseReaper] and at each change of leadership in [Reaper.Run]. It is
// called synchronously, so it must be cheap and safe for concurrent use.
// ctx is the sweep's context: the caller's for [Reaper.Sweep], the lease's
// context derived from Run's for a sweep of Run with a Locker.
type Observer interface {
	// ObserveSweep is called once per sweep or change of leadership, after it finished.
	ObserveSweep(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(ctx context.Context, e Event)

// ObserveSweep calls f.
func (f ObserverFunc) ObserveSweep(ctx context.Context, e Event) { f(ctx, e) }

// Op names an event reported to an [Observer].
type Op string

// The reaper's events.
const (
	// OpSweep is one sweep of a claim table ([Reaper.Sweep]): Event.Result
	// counts the rows returned to pending and parked.
	OpSweep Op = "sweep"
	// OpLeaseSweep is one sweep of a lease table ([LeaseReaper.Sweep]):
	// Event.Result.Returned counts the expired leases cleared.
	OpLeaseSweep Op = "lease_sweep"
	// OpLeader is a change of leadership in [Reaper.Run] with a Locker:
	// Event.Leading says whether it now holds the lease.
	OpLeader Op = "leader"
)

// Event describes one sweep or change of leadership.
type Event struct {
	// Op is the event.
	Op Op
	// Table is the claim or lease table.
	Table string
	// Scope names the claim table's scope columns and ScopeValues the
	// values the sweep is restricted to (nil when it sweeps every scope).
	Scope       []string
	ScopeValues []any
	// Start is when the sweep started, on the local clock; its duration is
	// Result.Elapsed.
	Start time.Time
	// Result is what the sweep did, also when it failed (the rows it
	// counts were committed).
	Result Result
	// Err is the sweep's error (nil on success, and for a sweep stopped
	// because its context ended). Failed acquisitions of Run's lease are
	// reported by the Locker's own Observer.
	Err error
	// Leading is, for OpLeader, whether Run now holds the lease.
	Leading bool
}

// observe reports e to obs, if any.
func observeSweep(ctx context.Context, obs Observer, e Event) {
	if obs != nil {
		obs.ObserveSweep(ctx, e)
	}
}

// sweepEvent builds the event of a sweep that started at start; err is
// reported only when ctx is still live (a sweep stopped by its context is
// not a failure).
func sweepEvent(ctx context.Context, op Op, table string, scope []string, values []any, start time.Time, res Result, err error) Event {
	e := Event{Op: op, Table: table, Scope: scope, ScopeValues: values, Start: start, Result: res}
	if ctx.Err() == nil {
		e.Err = err
	}
	return e
}

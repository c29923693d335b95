package zombie

import (
	"context"
	"time"
)

// Hooks are optional observability callbacks. Each may be nil. They are
// called synchronously on the goroutine doing the work, so they must be
// cheap and safe for concurrent use.
//
// Observer is the full form: it gets the sweep's context (so a span nests
// under the caller's trace), the table and scope swept, the result and the
// error. The On* functions are the older form; they keep working exactly as
// before and may be combined with an Observer, but new code should use the
// Observer (the contrib OpenTelemetry and Prometheus adapters implement it,
// and [ObserverFunc] adapts a plain function).
type Hooks struct {
	// Observer, if not nil, is told about every sweep and every change of
	// leadership (see [Event]).
	Observer Observer

	// OnSweepStart is called when a sweep begins. Superseded by Observer
	// (Event.Start).
	OnSweepStart func()
	// OnSweep is called when a sweep ends, with what it did (possibly
	// nothing), also when it failed or its context ended: the rows it counts
	// were committed. Superseded by Observer ([OpSweep], [OpLeaseSweep]).
	OnSweep func(Result)
	// OnError is called, after OnSweep, with the error of every sweep that
	// failed, and with the error of every failed lease acquisition in Run.
	// A sweep stopped because its context ended is not an error here.
	// Superseded by Observer (Event.Err).
	OnError func(error)
	// OnLeader is called by [Reaper.Run] with a [Config.Locker] when it
	// takes the lease (true) and when it gives it up or loses it (false).
	// Superseded by Observer ([OpLeader]).
	OnLeader func(leading bool)
}

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
	// because its context ended, as for OnError). Failed acquisitions of
	// Run's lease are reported by the Locker's own hooks.
	Err error
	// Leading is, for OpLeader, whether Run now holds the lease.
	Leading bool
}

func (h *Hooks) sweepStart() {
	if h.OnSweepStart != nil {
		h.OnSweepStart()
	}
}

func (h *Hooks) sweep(r Result) {
	if h.OnSweep != nil {
		h.OnSweep(r)
	}
}

func (h *Hooks) err(err error) {
	if h.OnError != nil {
		h.OnError(err)
	}
}

func (h *Hooks) leader(leading bool) {
	if h.OnLeader != nil {
		h.OnLeader(leading)
	}
}

// observe reports e to the observer, if any.
func (h *Hooks) observe(ctx context.Context, e Event) {
	if h.Observer != nil {
		h.Observer.ObserveSweep(ctx, e)
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

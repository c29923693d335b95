package tasklock

import (
	"context"
	"errors"
	"time"

	"github.com/claimlock/claimlock/internal/observe"
)

// Observer receives an [Event] after each lease operation. It is called
// synchronously on the goroutine that did the work, so it must be cheap and
// safe for concurrent use.
//
// ctx is the context of the call ([Locker.Acquire], [Lease.Renew],
// [Lease.Release], ...). Renewals of [Lease.KeepAlive] and a loss detected
// by the lease itself (a renewal that found the lease taken, the local
// deadline) run on the lease's own goroutines: their ctx carries the values
// of the context that acquired the lease (its trace, for example) without
// its cancellation, and Event.Background is set.
type Observer interface {
	// ObserveLease is called once per lease operation, after it finished.
	ObserveLease(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(ctx context.Context, e Event)

// ObserveLease calls f.
func (f ObserverFunc) ObserveLease(ctx context.Context, e Event) { f(ctx, e) }

// Op names a lease operation reported to an [Observer].
type Op string

// The lease operations.
const (
	// OpAcquire is one acquisition attempt ([Locker.Acquire]; every try of
	// [Locker.AcquireWait]): Event.OK when it took the lease; Event.Err
	// matches [dialect.ErrLeaseHeld] when someone else holds it.
	OpAcquire Op = "acquire"
	// OpRenew is a renewal ([Lease.Renew], [Lease.KeepAlive]); Event.Err
	// matches [dialect.ErrLeaseLost] when it found the lease gone (the lease then
	// ends and its OpLost is reported first), or is a database error the
	// keep-alive retries.
	OpRenew Op = "renew"
	// OpRelease is [Lease.Release]: Event.OK when the row was still held
	// and was freed.
	OpRelease Op = "release"
	// OpFinish is [Lease.Finish]: Event.OK when the task was marked and
	// freed.
	OpFinish Op = "finish"
	// OpForceRelease is [Locker.ForceRelease]: Event.OK when the lease was
	// held.
	OpForceRelease Op = "force_release"
	// OpLost is reported once when a lease ends other than by Release or
	// Finish: Event.Err matches [dialect.ErrLeaseLost] (and [ErrLocalDeadline] for
	// a local deadline).
	OpLost Op = "lost"
)

// Event describes one lease operation.
type Event struct {
	// Op is the operation.
	Op Op
	// Table is the lease table, as configured.
	Table string
	// Key is the leased key.
	Key any
	// Owner is the lease's owner token ("" for a failed acquisition).
	Owner string
	// Fence is the lease's fencing token (0 without a fence column or for
	// a failed acquisition).
	Fence int64
	// OK is the outcome: the lease taken (OpAcquire), the row freed
	// (OpRelease, OpFinish), the lease found held (OpForceRelease).
	OK bool
	// Err is the operation's error, nil on success; for OpLost, why the
	// lease ended.
	Err error
	// Start is when the operation started, on the local clock; Duration is
	// how long its statement took (zero for OpLost).
	Start    time.Time
	Duration time.Duration
	// TTL is the locker's lease duration.
	TTL time.Duration
	// Background is set for keep-alive renewals and losses the lease
	// detected on its own goroutines.
	Background bool
}

// observe reports an event of key on k's table to the observer, if any.
func (k *Locker) observe(ctx context.Context, op Op, key any, owner string, fence int64, ok bool, err error, start time.Time) {
	o := k.cfg.Observer
	if o == nil {
		return
	}
	e := Event{Op: op, Table: k.cfg.Table.Table, Key: key, Owner: owner, Fence: fence, OK: ok, Err: err, Start: start, TTL: k.cfg.TTL}
	if op != OpLost {
		e.Duration = time.Since(start)
	}
	e.Background = observe.IsBackground(ctx)
	o.ObserveLease(ctx, e)
}

// leaseBase returns the parent of a new lease's context: the acquiring
// context's values for the lease's own events when there is an observer,
// else a bare background context (no request values kept alive).
func (k *Locker) leaseBase(ctx context.Context) context.Context {
	if k.cfg.Observer == nil {
		return context.Background()
	}
	return observe.Detached(ctx)
}

func (k *Locker) observeAcquire(ctx context.Context, key any, l *Lease, err error, start time.Time) {
	if l == nil {
		k.observe(ctx, OpAcquire, key, "", 0, false, err, start)
		return
	}
	k.observe(ctx, OpAcquire, key, l.Owner(), l.fence, true, nil, start)
}

// observeRenew reports a renewal, unless its caller cancelled it (the
// keep-alive stopping, say): that is not a failure.
func (l *Lease) observeRenew(ctx context.Context, err error, start time.Time) {
	if err != nil && !isLost(err) && errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	l.k.observe(ctx, OpRenew, l.key, l.Owner(), l.fence, err == nil, err, start)
}

// observeFree reports a release or finish that ran its statement (a repeated
// Release that makes none is not reported).
func (l *Lease) observeFree(ctx context.Context, op Op, ok, ran bool, err error, start time.Time) {
	if ran {
		l.k.observe(ctx, op, l.key, l.Owner(), l.fence, ok, err, start)
	}
}

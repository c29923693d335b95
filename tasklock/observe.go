package tasklock

import (
	"context"
	"errors"
	"time"

	"github.com/claimlock/claimlock/internal/detach"
	"github.com/claimlock/claimlock/observe"
)

// The lease operations a locker reports to its Config.Observer, as
// [observe.Event.Op] with [observe.Event.Source] [observe.SourceTasklock].
// Every event of a locker carries Table, Key, Token (the owner), Fence,
// OK, Err, Start, Duration and TTL.
//
// The event's ctx is the context of the call ([Locker.Acquire],
// [Lease.Renew], [Lease.Release], ...). Renewals of [Lease.KeepAlive] and
// a loss detected by the lease itself (a renewal that found the lease
// taken, the local deadline) run on the lease's own goroutines: their ctx
// carries the values of the context that acquired the lease (its trace,
// for example) without its cancellation, and Event.Background is set.
const (
	// OpAcquire is one acquisition attempt ([Locker.Acquire]; every try of
	// [Locker.AcquireWait]): Event.OK when it took the lease; Event.Err
	// matches [dialect.ErrLeaseHeld] when someone else holds it.
	OpAcquire observe.Op = "tasklock.acquire"
	// OpRenew is a renewal ([Lease.Renew], [Lease.KeepAlive]): Event.OK
	// when it renewed the lease; Event.Err matches [dialect.ErrLeaseLost]
	// when it found the lease gone (the lease then ends and its OpLost is
	// reported first), or is a database error the keep-alive retries.
	OpRenew observe.Op = "tasklock.renew"
	// OpRelease is [Lease.Release]: Event.OK when the row was still held
	// and was freed.
	OpRelease observe.Op = "tasklock.release"
	// OpFinish is [Lease.Finish]: Event.OK when the task was marked and
	// freed.
	OpFinish observe.Op = "tasklock.finish"
	// OpForceRelease is [Locker.ForceRelease]: Event.OK when the lease was
	// held.
	OpForceRelease observe.Op = "tasklock.force_release"
	// OpLost is reported once when a lease ends other than by Release or
	// Finish: Event.Err matches [dialect.ErrLeaseLost] (and
	// [dialect.ErrLocalDeadline] for a local deadline). Its Duration is
	// zero.
	OpLost observe.Op = "tasklock.lost"
)

// observe reports an event of key on k's table to the observer, if any.
func (k *Locker) observe(ctx context.Context, op observe.Op, key any, owner string, fence int64, ok bool, err error, start time.Time) {
	o := k.cfg.Observer
	if o == nil {
		return
	}
	e := observe.Event{
		Source: observe.SourceTasklock, Op: op, Table: k.cfg.Table.Table, Key: key, Token: owner, Fence: fence, OK: ok, Err: err,
		Start: start, TTL: k.cfg.TTL, Background: detach.IsBackground(ctx),
	}
	if op != OpLost {
		e.Duration = time.Since(start)
	}
	o.Observe(ctx, e)
}

// leaseBase returns the parent of a new lease's context: the acquiring
// context's values for the lease's own events when there is an observer,
// else a bare background context (no request values kept alive).
func (k *Locker) leaseBase(ctx context.Context) context.Context {
	if k.cfg.Observer == nil {
		return context.Background()
	}
	return detach.Context(ctx)
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
func (l *Lease) observeFree(ctx context.Context, op observe.Op, ok, ran bool, err error, start time.Time) {
	if ran {
		l.k.observe(ctx, op, l.key, l.Owner(), l.fence, ok, err, start)
	}
}

package zombie

import (
	"context"
	"time"

	"github.com/claimlock/claimlock/observe"
)

// The events a reaper reports to its Observer (Config.Observer,
// LeaseConfig.Observer), as [observe.Event.Op] with
// [observe.Event.Source] [observe.SourceZombie]. They are reported
// synchronously; ctx is the sweep's context: the caller's for
// [Reaper.Sweep], the lease's context derived from Run's for a sweep of
// Run with a Locker.
const (
	// OpSweep is one sweep of a claim table ([Reaper.Sweep]): Event.Returned
	// rows returned to pending and Event.Parked rows parked (also when the
	// sweep then failed: they were committed), in Event.Statements bounded
	// statements that took Event.Duration; Event.Scope and
	// Event.ScopeValues name the scope swept (ScopeValues nil for every
	// scope). Event.Err is nil also for a sweep stopped because its context
	// ended. Failed acquisitions of Run's lease are reported by the
	// Locker's own Observer.
	OpSweep observe.Op = "zombie.sweep"
	// OpLeaseSweep is one sweep of a lease table ([LeaseReaper.Sweep]):
	// Event.Returned counts the expired leases cleared, as OpSweep counts
	// rows.
	OpLeaseSweep observe.Op = "zombie.lease_sweep"
	// OpLeader is a change of leadership in [Reaper.Run] with a Locker:
	// Event.Leading says whether it now holds the lease. Its Duration is
	// zero.
	OpLeader observe.Op = "zombie.leader"
)

// observeSweep reports the sweep op of table, which started at start, to
// obs, if any; err is reported only when ctx is still live (a sweep
// stopped by its context is not a failure).
func observeSweep(ctx context.Context, obs observe.Observer, op observe.Op, table string, scope []string, values []any, start time.Time, res Result, err error) {
	if obs == nil {
		return
	}
	e := observe.Event{
		Source: observe.SourceZombie, Op: op, Table: table, Scope: scope, ScopeValues: values, Start: start,
		Duration: res.Elapsed, Returned: int(res.Returned), Parked: int(res.Parked), Statements: res.Statements,
	}
	if ctx.Err() == nil {
		e.Err = err
	}
	obs.Observe(ctx, e)
}

// observeLeader reports a change of Run's leadership, if r has an
// observer.
func (r *Reaper) observeLeader(ctx context.Context, leading bool) {
	if r.obs != nil {
		r.obs.Observe(ctx, observe.Event{
			Source: observe.SourceZombie, Op: OpLeader, Table: r.table, Scope: r.cols, ScopeValues: r.scope,
			Start: time.Now(), Leading: leading,
		})
	}
}

package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// Run is one claimed fire time of a job: this process holds the job's
// lease (kept alive in the background) and the run is recorded as running.
// Finish it with [Run.Finish]. Its methods are safe for concurrent use.
type Run struct {
	s     *Scheduler
	j     *job
	fire  int64
	late  bool
	lease *tasklock.Lease
	token string

	once   sync.Once
	result error
}

func newRun(s *Scheduler, j *job, fire int64, late bool, lease *tasklock.Lease) *Run {
	r := &Run{s: s, j: j, fire: fire, late: late, lease: lease, token: lease.Owner()}
	lease.KeepAlive(context.Background())
	return r
}

// Job returns the job's name.
func (r *Run) Job() string { return r.j.Name }

// FireTime returns the fire time this run is for, in the job's location.
func (r *Run) FireTime() time.Time { return time.UnixMicro(r.fire).In(r.j.Location) }

// Late reports whether this run catches up a missed fire time
// ([CatchUp]): it started after the fire time's grace.
func (r *Run) Late() bool { return r.late }

// Fence returns the fencing token of the run's lease: strictly greater
// than that of every earlier run of the job. Attach it to the writes the
// run makes, and have their target refuse a smaller one than it has seen,
// so that a run that lost its lease (a frozen process) cannot overwrite
// the work of the run after it.
func (r *Run) Fence() int64 { return r.lease.Fence() }

// Lease returns the job's lease this run holds. Prefer [Run.Context] and
// [Run.Finish] to its own methods.
func (r *Run) Lease() *tasklock.Lease { return r.lease }

// Context returns a context derived from parent that is cancelled when the
// run's lease is lost or passes its local deadline (see tasklock.Lease):
// the job must stop then, since another process may run the job's next
// fire time. Call cancel when done.
func (r *Run) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return r.lease.Context(parent)
}

// Finish records the run's end and releases the job's lease (which, with
// [Config.MinHold], stays taken until the hold ends). runErr is the job's
// result: nil records the run as succeeded, an error as failed with its
// text; a run whose lease was lost meanwhile is recorded as lost whatever
// runErr says. It returns an error matching [dialect.ErrLeaseLost] when
// the run lost its lease (another process may have found it lost first),
// and the database's error when the record failed (the lease is released
// all the same; the next run records this one as lost). Calls after the
// first return the first one's result.
func (r *Run) Finish(ctx context.Context, runErr error) error {
	r.once.Do(func() {
		start := time.Now()
		r.result = r.finish(ctx, runErr)
		r.s.report(ctx, OpFinish, r.j.Name, start, errors.Join(runErr, r.result), 1)
	})
	return r.result
}

func (r *Run) finish(ctx context.Context, runErr error) error {
	status, msg := store.RunSucceeded, ""
	if runErr != nil {
		status, msg = store.RunFailed, runErr.Error()
	}
	lost := r.lease.Err()
	if lost != nil && errors.Is(lost, dialect.ErrLeaseLost) {
		status, msg = store.RunLost, lostReason
		if runErr != nil {
			msg += "; the job returned: " + runErr.Error()
		}
	}
	// Record first, release after: the next run must not start before
	// this one's row says how it ended.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	recorded, recErr := r.s.st.Finish(rctx, r.j.Name, r.fire, r.token, status, msg)
	if _, err := r.lease.Release(rctx); err != nil {
		r.s.cfg.Logger.Warn("schedule: could not release the job's lease; it expires after the TTL", "job", r.j.Name, "err", err)
	}
	if r.s.cfg.History > 0 {
		if _, err := r.s.st.Prune(rctx, r.j.Name, r.s.cfg.History); err != nil {
			r.s.cfg.Logger.Warn("schedule: could not prune the job's history", "job", r.j.Name, "err", err)
		}
	}
	switch {
	case recErr != nil:
		return fmt.Errorf("schedule: finish %s at %s: %w", r.j.Name, r.j.format(r.fire), recErr)
	case lost != nil && errors.Is(lost, dialect.ErrLeaseLost):
		return fmt.Errorf("schedule: finish %s at %s: %w", r.j.Name, r.j.format(r.fire), lost)
	case !recorded:
		return fmt.Errorf("schedule: finish %s at %s: the run was found lost by another process: %w", r.j.Name, r.j.format(r.fire), dialect.ErrLeaseLost)
	}
	return nil
}

// Tick is a tick of the job named name, for a scheduler that drives its
// own timing: [Scheduler.Claim], then the job's Func under the run's
// context, then [Run.Finish]. It returns the claim's error ([ErrNotDue]
// when another process runs this fire time), or else the job's error
// joined with Finish's. A panic in Func is recorded as the run's failure
// and then re-raised.
func (s *Scheduler) Tick(ctx context.Context, name string) error {
	j, err := s.job(name)
	if err != nil {
		return err
	}
	if j.Func == nil {
		return fmt.Errorf("%w: schedule: tick %q: the job has no Func", dialect.ErrInvalidConfig, name)
	}
	return s.tick(ctx, j)
}

func (s *Scheduler) tick(ctx context.Context, j *job) error {
	r, err := s.claim(ctx, j)
	if err != nil {
		return err
	}
	return r.Do(ctx, j.Func)
}

// Do runs fn under the run's context and finishes the run with its
// result: the job's error joined with [Run.Finish]'s. A panic in fn is
// recorded as the run's failure and then re-raised.
func (r *Run) Do(ctx context.Context, fn func(ctx context.Context, r *Run) error) (err error) {
	rctx, cancel := r.Context(ctx)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			_ = r.Finish(ctx, fmt.Errorf("panic: %v", p))
			panic(p)
		}
		err = errors.Join(err, r.Finish(ctx, err))
	}()
	return fn(rctx, r)
}

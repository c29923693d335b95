package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// state reads j's row (making it first if needed) and records the offset
// of the database clock.
func (s *Scheduler) state(ctx context.Context, j *job) (store.JobState, error) {
	if err := s.register(ctx, j); err != nil {
		return store.JobState{}, err
	}
	for range 2 {
		before := s.cfg.Now()
		st, err := s.st.State(ctx, j.Name)
		after := s.cfg.Now()
		if err != nil {
			return st, fmt.Errorf("schedule: state %s: %w", j.Name, err)
		}
		if st.Exists {
			s.clock.observe(st.Now, before, after)
			return st, nil
		}
		// The row was deleted (by hand): make it again.
		if err := s.st.Register(ctx, j.Name); err != nil {
			return st, fmt.Errorf("schedule: register %s: %w", j.Name, err)
		}
	}
	return store.JobState{}, fmt.Errorf("schedule: job %q: its row in %s disappears", j.Name, s.cfg.Jobs)
}

// Claim is a tick of the job named name: it finds the fire time the tick
// stands for on the database clock and, if this process is the one to run
// it, returns its [Run], holding the job's lease. The caller runs the job
// and calls [Run.Finish]. [Scheduler.Tick] does all of it.
//
// The fire time a tick stands for is the latest one at or before the
// database's now that no process has handled yet and whose grace has not
// passed, or else the next one if it is at most [Config.MaxSkew] (and half
// the gap from the one before) ahead: a tick that came early, from a host
// whose clock runs ahead, waits for it. Exactly one process claims each
// fire time: the claim moves the job's cursor from the value it read to
// the fire time, in a statement that tests the database's now against the
// fire time's window, and records the run in the same transaction.
//
// When the previous run still holds the job's lease, Claim tries again
// every [Config.PollInterval] until the fire time's grace passes; the fire
// time is then missed, recorded by the missed policy. Missed fire times
// found on the way are recorded too. The job's row is made on its first
// claim.
//
// It returns an error matching [ErrNotDue] when this process has nothing
// to run for this tick (another one ran it, or nothing is due near now),
// [ErrPaused] when the job is paused (the fire time is recorded as
// skipped), [ErrUnknownJob] for a name never added, and the database's
// errors otherwise.
func (s *Scheduler) Claim(ctx context.Context, name string) (*Run, error) {
	j, err := s.job(name)
	if err != nil {
		return nil, err
	}
	return s.claim(ctx, j)
}

func (s *Scheduler) claim(ctx context.Context, j *job) (*Run, error) {
	var target int64 // the fire time this tick stands for
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st, err := s.state(ctx, j)
		if err != nil {
			return nil, err
		}
		p, err := j.tl.decide(st.Cursor, st.Now, j.policy)
		if err != nil {
			return nil, err
		}
		if st.Paused {
			return nil, s.skipPaused(ctx, j, st, p)
		}
		if p.skipOnly() {
			// Fire times whose grace passed with no run: record them, then
			// look again (the claim may race with another recorder).
			if err := s.recordMissed(ctx, j, st, p); err != nil {
				return nil, err
			}
			continue
		}
		if target == 0 {
			switch {
			case p.run != 0:
				target = p.run
			case p.next != 0 && p.next-st.Now <= s.lead(j, p.next):
				target = p.next
			default:
				return nil, fmt.Errorf("%w: %s: next fire time %s", ErrNotDue, j.Name, j.format(p.next))
			}
		}
		switch {
		case st.Cursor >= target:
			return nil, fmt.Errorf("%w: %s: fire time %s was handled already", ErrNotDue, j.Name, j.format(target))
		case p.run > target:
			return nil, fmt.Errorf("%w: %s: fire time %s passed; %s is due", ErrNotDue, j.Name, j.format(target), j.format(p.run))
		case p.run < target:
			// An early tick: wait for the fire time on the database clock.
			if !loop.Sleep(ctx, max(s.clock.until(target), time.Millisecond), nil) {
				return nil, ctx.Err()
			}
			continue
		}
		r, err := s.claimRun(ctx, j, st, p)
		if err != nil || r != nil {
			return r, err
		}
	}
}

// lead returns how far ahead of the database's now a tick may stand for
// the fire time next: MaxSkew, and at most half the gap from the fire
// time before it.
func (s *Scheduler) lead(j *job, next int64) int64 {
	lead := s.cfg.MaxSkew.Microseconds()
	// The fire time before next is unknown to a forward schedule; the gap
	// after it stands in for the gap before (equal for regular ones).
	if after, ok := j.tl.next(next); ok {
		lead = min(lead, (after-next)/2)
	}
	return lead
}

// claimRun takes the job's lease and claims p.run. It returns (nil, nil)
// when the claim must be looked at again: the lease is held (after a
// poll interval) or the cursor moved.
func (s *Scheduler) claimRun(ctx context.Context, j *job, st store.JobState, p plan) (*Run, error) {
	lease, err := s.locker.Acquire(ctx, j.Name)
	switch {
	case errors.Is(err, dialect.ErrLeaseHeld):
		// The previous run is still going (or its holder died and its
		// lease has not expired yet). Try again until the window closes.
		wait := min(s.cfg.PollInterval, max(s.clock.until(p.runTo), time.Millisecond))
		if !loop.Sleep(ctx, wait, nil) {
			return nil, ctx.Err()
		}
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("schedule: %s: %w", j.Name, err)
	}
	c := store.ScheduleClaim{
		Job: j.Name, Prev: st.Cursor, To: p.run, WinFrom: p.runFrom, WinTo: p.runTo,
		Run: true, Token: lease.Owner(), Fence: lease.Fence(), Worker: s.cfg.Worker,
		SkipFrom: p.skipFrom, SkipUntil: p.skipUntil, SkipReason: missedReason,
		LostReason: lostReason,
	}
	start := time.Now()
	res, err := s.st.Claim(ctx, c)
	defer func() { s.report(ctx, OpClaim, j.Name, start, err, boolN(res.Claimed)) }()
	if err != nil && errors.Is(err, dialect.ErrOutcomeUnknown) {
		// The claim may have committed: the run row says.
		if status, token, ok, rerr := s.st.RunOf(context.WithoutCancel(ctx), j.Name, p.run); rerr == nil {
			res.Claimed, err = ok && token == c.Token && status == store.RunRunning, nil
		}
	}
	if err != nil || !res.Claimed {
		s.giveBack(ctx, lease)
		if err != nil {
			return nil, fmt.Errorf("schedule: claim %s: %w", j.Name, err)
		}
		return nil, nil
	}
	if res.Lost > 0 {
		s.cfg.Logger.Warn("schedule: earlier runs lost their lease before they finished; recorded as lost", "job", j.Name, "runs", res.Lost)
	}
	s.cfg.Logger.Debug("schedule: claimed", "job", j.Name, "fire", j.format(p.run), "late", p.late, "fence", lease.Fence())
	return newRun(s, j, p.run, p.late, lease), nil
}

// giveBack releases a lease that claimed nothing.
func (s *Scheduler) giveBack(ctx context.Context, l *tasklock.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := l.Release(rctx); err != nil {
		s.cfg.Logger.Warn("schedule: could not release an unused lease; it expires after the TTL", "key", l.Key(), "err", err)
	}
}

// The reasons recorded with skipped and lost runs.
const (
	missedReason = "missed: not started within its grace (no scheduler up, the previous run still going, or the database unreachable)"
	pausedReason = "paused"
	lostReason   = "lost: its lease expired before it finished (the process died, stalled or lost the database)"
)

// recordMissed records the plan's missed fire times as skipped.
func (s *Scheduler) recordMissed(ctx context.Context, j *job, st store.JobState, p plan) error {
	c := store.ScheduleClaim{
		Job: j.Name, Prev: st.Cursor, To: p.skipTo, WinFrom: p.skipAfter, WinTo: store.NoEnd,
		SkipFrom: p.skipFrom, SkipUntil: p.skipUntil, SkipReason: missedReason, Worker: s.cfg.Worker, LostReason: lostReason,
	}
	start := time.Now()
	res, err := s.st.Claim(ctx, c)
	s.report(ctx, OpSkip, j.Name, start, err, boolN(res.Claimed))
	if err != nil {
		return fmt.Errorf("schedule: skip %s: %w", j.Name, err)
	}
	if res.Claimed {
		s.cfg.Logger.Info("schedule: missed fire times recorded as skipped", "job", j.Name, "from", j.format(p.skipFrom), "through", j.format(p.skipTo))
	}
	return nil
}

// skipPaused records the fire times of a paused job up to the database's
// now as skipped, and returns ErrPaused.
func (s *Scheduler) skipPaused(ctx context.Context, j *job, st store.JobState, p plan) error {
	last := p.run
	if p.skipOnly() {
		last = p.skipTo
	}
	if last != 0 {
		until := last + 1
		if n, ok := j.tl.next(last); ok {
			until = n
		}
		c := store.ScheduleClaim{
			Job: j.Name, Prev: st.Cursor, To: last, WinFrom: 0, WinTo: store.NoEnd, Paused: true,
			SkipFrom: p.skipFrom, SkipUntil: until, SkipReason: pausedReason, Worker: s.cfg.Worker, LostReason: lostReason,
		}
		start := time.Now()
		res, err := s.st.Claim(ctx, c)
		s.report(ctx, OpSkip, j.Name, start, err, boolN(res.Claimed))
		if err != nil {
			return fmt.Errorf("schedule: skip %s: %w", j.Name, err)
		}
	}
	return fmt.Errorf("%w: %s", ErrPaused, j.Name)
}

// format renders a fire time for messages.
func (j *job) format(us int64) string {
	if us == 0 {
		return "(none)"
	}
	return time.UnixMicro(us).In(j.Location).Format(time.RFC3339Nano)
}

// boolN is 1 for true.
func boolN(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

package claimgocron

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/claimlock/claimlock/leader"
	"github.com/claimlock/claimlock/schedule"
)

// An Elector of package leader is a gocron Elector.
var _ gocron.Elector = (*leader.Elector)(nil)

// Locker is a gocron v2 Locker that lets each fire time of a job run in
// one process only. It is safe for concurrent use.
type Locker struct {
	s *schedule.Scheduler
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker claiming fire times through s.
func NewLocker(s *schedule.Scheduler) *Locker { return &Locker{s: s} }

// Lock claims the fire time that a tick of the job named key stands for
// (schedule.Scheduler.Claim). It returns a lock holding the run when this
// process is the one to run it, and an error otherwise: one matching
// schedule.ErrNotDue when another process runs it or nothing is due,
// schedule.ErrPaused for a paused job, schedule.ErrUnknownJob for a job
// never registered with the scheduler. gocron skips the job on any error.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	r, err := l.s.Claim(ctx, key)
	if err != nil {
		return nil, err
	}
	return &lock{r: r}, nil
}

// lock is a claimed run; Unlock finishes it.
type lock struct{ r *schedule.Run }

// Unlock records the run as succeeded (or lost, if its lease was lost) and
// releases the job's lease.
func (k *lock) Unlock(ctx context.Context) error { return k.r.Finish(ctx, nil) }

// Add registers the job named name with the scheduler on sched, read in
// loc (nil: UTC). Use it for jobs whose gocron definition the Locker's
// helpers do not make; sched must fire when gocron does.
func (l *Locker) Add(name string, sched schedule.Schedule, loc *time.Location) error {
	if err := l.s.Add(schedule.Job{Name: name, Schedule: sched, Location: loc}); err != nil {
		return fmt.Errorf("claimgocron: %w", err)
	}
	return nil
}

// CronJob registers the job named name on crontab, read as
// gocron.CronJob(crontab, withSeconds) reads it in loc (the gocron
// scheduler's gocron.WithLocation; time.Local by default), and returns
// gocron's definition with the options that name the job.
func (l *Locker) CronJob(name, crontab string, withSeconds bool, loc *time.Location) (gocron.JobDefinition, []gocron.JobOption, error) {
	if loc == nil {
		loc = time.Local
	}
	c := gocron.NewDefaultCron(withSeconds)
	if err := c.IsValid(crontab, loc, time.Now()); err != nil {
		return nil, nil, fmt.Errorf("claimgocron: cron job %q: %w", name, err)
	}
	if err := l.Add(name, c, loc); err != nil {
		return nil, nil, err
	}
	return gocron.CronJob(crontab, withSeconds), []gocron.JobOption{gocron.WithName(name)}, nil
}

// DurationJob registers the job named name to run every d, at the
// multiples of d since the Unix epoch (schedule.Every), and returns
// gocron's duration job with options that name it and start it at the
// next multiple, so that gocron's ticks fall on them.
func (l *Locker) DurationJob(name string, d time.Duration) (gocron.JobDefinition, []gocron.JobOption, error) {
	if d < time.Microsecond {
		return nil, nil, fmt.Errorf("claimgocron: duration job %q: interval %v below a microsecond", name, d)
	}
	if err := l.Add(name, schedule.Every(d), time.UTC); err != nil {
		return nil, nil, err
	}
	first := schedule.Every(d).Next(time.Now())
	return gocron.DurationJob(d), []gocron.JobOption{gocron.WithName(name), gocron.WithStartAt(gocron.WithStartDateTime(first))}, nil
}

// Task returns a gocron task for the job named name that claims its fire
// times itself, for a job that wants its run: fn gets the run's context
// (cancelled when the run's lease is lost) and the run (its fire time and
// fence), and its error is recorded in the job's history. Create the job
// without the Locker (gocron.WithDisabledDistributedJobLocker(true) when
// the scheduler has one); a tick with nothing to run returns nil.
func Task(s *schedule.Scheduler, name string, fn func(ctx context.Context, r *schedule.Run) error) gocron.Task {
	return gocron.NewTask(func(ctx context.Context) error {
		r, err := s.Claim(ctx, name)
		if errors.Is(err, schedule.ErrNotDue) || errors.Is(err, schedule.ErrPaused) {
			return nil
		}
		if err != nil {
			return err
		}
		return r.Do(ctx, fn)
	})
}

package claimcron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/robfig/cron/v3"

	"github.com/claimlock/claimlock/schedule"
)

// RunJob is a cron job that runs as a claimed fire time: with the run's
// context (cancelled when the run's lease is lost) and the run itself. Its
// error is recorded in the job's history.
type RunJob interface {
	cron.Job
	RunClaimed(ctx context.Context, r *schedule.Run) error
}

// Func is a job function that gets the claimed run. Outside [Wrap] (run
// by a cron directly) it gets a background context and a nil run.
type Func func(ctx context.Context, r *schedule.Run) error

// Run implements cron.Job, for a Func used without Wrap.
func (f Func) Run() { _ = f(context.Background(), nil) }

// RunClaimed implements [RunJob].
func (f Func) RunClaimed(ctx context.Context, r *schedule.Run) error { return f(ctx, r) }

// Wrap returns a cron.JobWrapper for the job named name: each tick claims
// the fire time it stands for with s.Claim(name), and the wrapped job runs
// only in the process that claims it, then the run is finished with its
// result. The job must have been added to s (schedule.Scheduler.Add) with
// the schedule the cron runs it on, read in the cron's location; [Add]
// does both. Ticks with nothing to run return at once; other failures
// (the database unreachable) are logged to slog.Default().
//
// Wrap needs no cron.SkipIfStillRunning: a tick whose fire time comes while
// the previous run still holds the job's lease waits for it until the fire
// time's grace passes, and the fire time is then missed (recorded by the
// missed policy), never run beside the previous one.
func Wrap(s *schedule.Scheduler, name string) cron.JobWrapper {
	return func(j cron.Job) cron.Job {
		return cron.FuncJob(func() {
			ctx := context.Background()
			r, err := s.Claim(ctx, name)
			if err != nil {
				if !errors.Is(err, schedule.ErrNotDue) && !errors.Is(err, schedule.ErrPaused) {
					slog.Default().Warn("claimcron: tick failed", "job", name, "err", err)
				}
				return
			}
			err = r.Do(ctx, func(ctx context.Context, r *schedule.Run) error {
				if rj, ok := j.(RunJob); ok {
					return rj.RunClaimed(ctx, r)
				}
				j.Run()
				return nil
			})
			if err != nil {
				slog.Default().Warn("claimcron: run failed", "job", name, "fire", r.FireTime(), "err", err)
			}
		})
	}
}

// Add adds the job named name to s (on sched, read in c's location) and to
// c (wrapped with [Wrap]), and returns c's entry. spec is parsed with
// robfig/cron's standard parser, with an optional seconds field first
// (six fields: seconds, as cron.WithSeconds reads them), and descriptors
// such as "@hourly".
func Add(c *cron.Cron, s *schedule.Scheduler, name, spec string, job cron.Job) (cron.EntryID, error) {
	sched, err := parser.Parse(spec)
	if err != nil {
		return 0, fmt.Errorf("claimcron: add %q: %w", name, err)
	}
	return AddSchedule(c, s, name, sched, job)
}

// parser reads five or six fields (seconds optional) and descriptors.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// AddSchedule is [Add] for a parsed (or any) cron.Schedule.
func AddSchedule(c *cron.Cron, s *schedule.Scheduler, name string, sched cron.Schedule, job cron.Job) (cron.EntryID, error) {
	if err := s.Add(schedule.Job{Name: name, Schedule: sched, Location: c.Location()}); err != nil {
		return 0, fmt.Errorf("claimcron: add %q: %w", name, err)
	}
	return c.Schedule(sched, Wrap(s, name)(job)), nil
}

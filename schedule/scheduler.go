package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// Job is a named job on a schedule.
type Job struct {
	// Name identifies the job across the fleet: the key of its row, its
	// lease and its runs. Required, at most 255 bytes of UTF-8.
	Name string

	// Schedule says when it fires. Required.
	Schedule Schedule

	// Func is the job's work, run by [Scheduler.Run] and [Scheduler.Tick]
	// once per fire time across every process. Its context is cancelled
	// when the run's lease is lost (see [Run.Context]); a returned error
	// is recorded in the run's history. It may be nil for a job that
	// another scheduler drives through [Scheduler.Claim] (the contrib
	// adapters for gocron and robfig/cron do).
	Func func(ctx context.Context, r *Run) error

	// Location is the time zone Schedule reads fire times in; nil means
	// UTC. Every process must use the same.
	Location *time.Location

	// Missed overrides [Config.Missed] for this job.
	Missed Missed
}

// job is an added job with its settings resolved.
type job struct {
	Job
	tl     timeline
	policy Missed

	regMu      sync.Mutex
	registered bool
}

// Scheduler runs named jobs on schedules, each fire time once across every
// process that runs it with the same tables: see the package doc. It is
// safe for concurrent use.
type Scheduler struct {
	cfg    Config
	st     *store.Schedules
	locker *tasklock.Locker
	clock  clock

	mu   sync.Mutex
	jobs map[string]*job

	verifyMu sync.Mutex
	verified bool
}

// New validates cfg and prepares the scheduler's statements on d. It does
// not touch the database.
func New(d dialect.Dialect, cfg Config) (*Scheduler, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: schedule: nil dialect", dialect.ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := store.OpenSchedules(d, store.ScheduleTables{Jobs: cfg.Jobs, Runs: cfg.Runs})
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	locker, err := tasklock.New(d, tasklock.Config{
		Table: store.ScheduleLeaseTable(cfg.Jobs), TTL: cfg.TTL, RenewInterval: cfg.RenewInterval,
		SafetyMargin: cfg.SafetyMargin, MinHold: cfg.MinHold, Logger: cfg.Logger, Now: cfg.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("schedule: lease: %w", err)
	}
	return &Scheduler{cfg: cfg, st: st, locker: locker, clock: clock{now: cfg.Now}, jobs: map[string]*job{}}, nil
}

// Add adds a job. Its row in the jobs table is made by the first claim (or
// [Scheduler.Run]); fire times before that do not count. It returns an
// error wrapping [dialect.ErrInvalidConfig] for a bad name, a missing
// schedule, a schedule that never fires, or a name added twice.
func (s *Scheduler) Add(j Job) error {
	if err := store.CheckJob(j.Name); err != nil {
		return fmt.Errorf("schedule: add: Job.Name: %w", err)
	}
	if j.Schedule == nil {
		return fmt.Errorf("%w: schedule: add %q: Job.Schedule is nil", dialect.ErrInvalidConfig, j.Name)
	}
	if j.Location == nil {
		j.Location = time.UTC
	}
	policy := j.Missed
	switch policy {
	case MissedDefault:
		policy = s.cfg.Missed
	case SkipMissed, CatchUp:
	default:
		return fmt.Errorf("%w: schedule: add %q: Job.Missed: unknown policy %d", dialect.ErrInvalidConfig, j.Name, int(j.Missed))
	}
	nj := &job{Job: j, policy: policy, tl: timeline{s: j.Schedule, loc: j.Location, grace: s.cfg.Grace.Microseconds()}}
	if _, ok := nj.tl.next(time.Now().UnixMicro()); !ok {
		return fmt.Errorf("%w: schedule: add %q: Job.Schedule never fires", dialect.ErrInvalidConfig, j.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[j.Name]; ok {
		return fmt.Errorf("%w: schedule: add %q: a job of this name was added already", dialect.ErrInvalidConfig, j.Name)
	}
	s.jobs[j.Name] = nj
	return nil
}

// job returns the added job name.
func (s *Scheduler) job(name string) (*job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownJob, name)
	}
	return j, nil
}

// Verify checks the tables against the database catalog unless a check
// already passed: a missing table or column is an error wrapping
// [dialect.ErrInvalidConfig]. Claims call it; call it at start-up to fail
// fast.
func (s *Scheduler) Verify(ctx context.Context) error {
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	if s.verified {
		return nil
	}
	if err := s.st.VerifySchema(ctx); err != nil {
		return fmt.Errorf("schedule: verify schema: %w", err)
	}
	if err := s.locker.Verify(ctx); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	s.verified = true
	return nil
}

// register makes j's row once per process.
func (s *Scheduler) register(ctx context.Context, j *job) error {
	j.regMu.Lock()
	defer j.regMu.Unlock()
	if j.registered {
		return nil
	}
	if err := s.Verify(ctx); err != nil {
		return err
	}
	if err := s.st.Register(ctx, j.Name); err != nil {
		return fmt.Errorf("schedule: register %s: %w", j.Name, err)
	}
	j.registered = true
	return nil
}

// Run runs every job added so far on its schedule until ctx ends, then
// returns nil (after the runs in progress have returned). Each job has a
// loop of its own: it sleeps until the job's next fire time on the
// database clock, ticks ([Scheduler.Tick]) and sleeps again, so a job
// whose run outlasts its period skips (or, with [CatchUp], catches up)
// the fire times it overran. Jobs without a Func are refused. A
// configuration error (a missing table) ends Run with that error; other
// failures are logged and tried again at the next fire time.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	jobs := make([]*job, 0, len(s.jobs))
	for _, j := range s.jobs {
		if j.Func == nil {
			s.mu.Unlock()
			return fmt.Errorf("%w: schedule: run: job %q has no Func", dialect.ErrInvalidConfig, j.Name)
		}
		jobs = append(jobs, j)
	}
	s.mu.Unlock()
	if err := s.Verify(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			if err := s.runJob(ctx, j); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// runJob is one job's loop in Run.
func (s *Scheduler) runJob(ctx context.Context, j *job) error {
	log := s.cfg.Logger.With("job", j.Name)
	return loop.Loop{}.Run(ctx, func(ctx context.Context) loop.Next {
		err := s.tick(ctx, j)
		wait := time.Duration(0)
		switch {
		case err == nil, errors.Is(err, ErrNotDue), errors.Is(err, ErrPaused):
			wait = s.untilNext(ctx, j, log)
		case ctx.Err() != nil:
			return loop.End(nil)
		case dialect.IsPermanent(err):
			return loop.End(err)
		default:
			log.Warn("schedule: tick failed; trying again", "err", err)
			wait = s.cfg.PollInterval
		}
		if wait < 0 {
			<-ctx.Done() // the schedule is over
			return loop.End(nil)
		}
		return loop.After(wait)
	})
}

// untilNext returns how long to sleep until j's next fire time on the
// database clock: zero when a fire time is due (or missed and unrecorded)
// already, a poll interval when the state cannot be read, and -1 when the
// schedule is over.
func (s *Scheduler) untilNext(ctx context.Context, j *job, log *slog.Logger) time.Duration {
	st, err := s.state(ctx, j)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("schedule: could not read the job's state", "err", err)
		}
		return s.cfg.PollInterval
	}
	p, err := j.tl.decide(st.Cursor, st.Now, j.policy)
	switch {
	case err != nil:
		log.Warn("schedule: could not compute the next fire time", "err", err)
		return s.cfg.PollInterval
	case st.Paused && p.next == 0 && p.run == 0 && !p.skipOnly():
		return -1
	case st.Paused:
		if p.next == 0 {
			return s.cfg.PollInterval
		}
		return s.clock.until(p.next)
	case p.run != 0, p.skipOnly():
		return 0
	case p.next == 0:
		return -1
	}
	return s.clock.until(p.next)
}

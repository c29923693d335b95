package schedule

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/claimlock/claimlock/internal/store"
)

// Status is what became of a fire time, as the runs table records it.
type Status string

// The statuses of [Record].
const (
	// Running: claimed and not finished (or its process died and no claim
	// has found it lost yet).
	Running Status = store.RunRunning
	// Succeeded: the job returned nil.
	Succeeded Status = store.RunSucceeded
	// Failed: the job returned an error (Record.Error).
	Failed Status = store.RunFailed
	// Lost: the run's lease expired before it finished: its process was
	// killed, froze past the TTL or lost the database. The next claim of
	// the job records it.
	Lost Status = store.RunLost
	// Skipped: a range of fire times that did not run (Record.Error says
	// why: missed, or paused).
	Skipped Status = store.RunSkipped
)

// Record is one row of a job's history: a run, or a range of skipped fire
// times. Times are the database clock's, in the job's location.
type Record struct {
	// Job is the job's name.
	Job string
	// FireTime is the run's fire time, or the first fire time of a
	// skipped range.
	FireTime time.Time
	// Until is, for a skipped range, the end of the range (exclusive):
	// every fire time from FireTime up to it was skipped. Zero for a run.
	Until time.Time
	// Status is what became of it.
	Status Status
	// Worker is the process that ran it or recorded the skip
	// ([Config.Worker]).
	Worker string
	// Fence is the run's fencing token (0 for a skipped range).
	Fence int64
	// Started is when the run was claimed (or the skip recorded); Finished
	// when it ended (zero while running).
	Started, Finished time.Time
	// Error is the job's error, or why the run was lost or skipped.
	Error string
}

// History returns the history of the job named job, newest first: at most
// limit records (1 to 10000) whose fire time is before `before` (the zero
// time: from the newest). To page back, pass the FireTime of the last
// record read. The job need not have been added to this scheduler.
func (s *Scheduler) History(ctx context.Context, job string, before time.Time, limit int) ([]Record, error) {
	b := int64(math.MaxInt64)
	if !before.IsZero() {
		b = before.UnixMicro()
	}
	rows, err := s.st.History(ctx, job, b, limit)
	if err != nil {
		return nil, fmt.Errorf("schedule: history %s: %w", job, err)
	}
	loc := s.location(job)
	at := func(us int64) time.Time {
		if us == 0 {
			return time.Time{}
		}
		return time.UnixMicro(us).In(loc)
	}
	out := make([]Record, len(rows))
	for i, r := range rows {
		out[i] = Record{
			Job: job, FireTime: at(r.Fire), Until: at(r.Until), Status: Status(r.Status), Worker: r.Worker, Fence: r.Fence,
			Started: at(r.Started), Finished: at(r.Finished), Error: r.Error,
		}
	}
	return out, nil
}

// location returns the location of an added job, or UTC.
func (s *Scheduler) location(name string) *time.Location {
	if j, err := s.job(name); err == nil {
		return j.Location
	}
	return time.UTC
}

// JobState is a job's row, as [Scheduler.Jobs] reads it.
type JobState struct {
	// Name is the job's name.
	Name string
	// Paused is true while the job is paused.
	Paused bool
	// Handled is the latest fire time run or recorded as skipped, or,
	// before the first one, when the job's row was made.
	Handled time.Time
	// Lease is the job's lease: who holds it (a run in progress, or a
	// minimum hold), on the database clock.
	Lease LeaseState
}

// LeaseState is a job's lease as the database sees it.
type LeaseState struct {
	// Owner is the holding run's token ("" when free).
	Owner string
	// Fence is the fence of the latest acquisition.
	Fence int64
	// ExpiresAt is the expiry (zero when free).
	ExpiresAt time.Time
	// Expired is true when it has an owner but its expiry passed.
	Expired bool
}

// Jobs lists every job in the jobs table, by name, with its lease.
func (s *Scheduler) Jobs(ctx context.Context) ([]JobState, error) {
	rows, err := s.st.Jobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("schedule: jobs: %w", err)
	}
	out := make([]JobState, len(rows))
	for i, r := range rows {
		ls, err := s.locker.Inspect(ctx, r.Job)
		if err != nil {
			return nil, fmt.Errorf("schedule: %w", err)
		}
		out[i] = JobState{
			Name: r.Job, Paused: r.Paused, Handled: time.UnixMicro(r.Cursor).In(s.location(r.Job)),
			Lease: LeaseState{Owner: ls.Owner, Fence: ls.Fence, ExpiresAt: ls.ExpiresAt, Expired: ls.Expired},
		}
	}
	return out, nil
}

// Pause pauses the job named job across every process: from its next fire
// time on, its fire times are recorded as skipped (reason "paused") until
// [Scheduler.Resume]. A run in progress goes on. The state is in the jobs
// table, so it survives restarts; the job's row is made if it has none.
func (s *Scheduler) Pause(ctx context.Context, job string) error { return s.setPaused(ctx, job, true) }

// Resume ends a pause: the job's next fire time runs. The fire times of
// the pause stay recorded as skipped; those that passed unrecorded (no
// process ran the job meanwhile) follow the missed policy.
func (s *Scheduler) Resume(ctx context.Context, job string) error {
	return s.setPaused(ctx, job, false)
}

func (s *Scheduler) setPaused(ctx context.Context, job string, paused bool) error {
	if err := s.Verify(ctx); err != nil {
		return err
	}
	if err := s.st.Register(ctx, job); err != nil {
		return fmt.Errorf("schedule: register %s: %w", job, err)
	}
	start := time.Now()
	err := s.st.Pause(ctx, job, paused)
	s.report(ctx, OpPause, job, start, err, boolN(paused))
	if err != nil {
		return fmt.Errorf("schedule: pause %s: %w", job, err)
	}
	s.cfg.Logger.Info("schedule: job paused", "job", job, "paused", paused)
	return nil
}

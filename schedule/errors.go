package schedule

import "errors"

// The errors of [Scheduler.Claim] (and so [Scheduler.Tick]) when this
// process has nothing to run: match them with errors.Is.
var (
	// ErrNotDue: no fire time of the job is due at this tick. It was run
	// or recorded already (by this process or another), or the nearest one
	// is too far ahead for the tick to wait for it.
	ErrNotDue = errors.New("schedule: no fire time due")

	// ErrPaused: the job is paused; the fire time was recorded as skipped.
	ErrPaused = errors.New("schedule: job paused")

	// ErrUnknownJob: no job of this name was added to the scheduler.
	ErrUnknownJob = errors.New("schedule: unknown job")
)

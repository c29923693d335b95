package schedule

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
)

// The operations a scheduler reports to its Observer (Config.Observer),
// each an [observe.Event] with Source observe.SourceSchedule, Table the
// runs table, Key the job's name, Start and Duration, and Err.
const (
	// OpClaim is the claim of a fire time for a run (Scheduler.Claim,
	// Scheduler.Tick, Scheduler.Run): Event.Rows is 1 when this process
	// claimed it, 0 when another had or none was due.
	OpClaim observe.Op = "schedule.claim"
	// OpSkip records fire times as skipped (missed past their grace, or
	// due while the job was paused): Event.Rows is 1 when a range was
	// recorded.
	OpSkip observe.Op = "schedule.skip"
	// OpFinish records a run's end and releases its lease: Event.Rows is
	// 1, Event.Err the job's error joined with Finish's (nil when the run
	// succeeded and was recorded; matching [dialect.ErrLeaseLost] when the
	// run lost its lease).
	OpFinish observe.Op = "schedule.finish"
	// OpPause pauses or resumes a job (Scheduler.Pause, Scheduler.Resume):
	// Event.Rows is 1 when the job is paused now.
	OpPause observe.Op = "schedule.pause"
)

// RunResult names how a run ended, from the Err of its [OpFinish] event:
// "succeeded", "failed" (the job's error, or Finish's record failed), or
// "lost" (the run's lease was lost: err matches [dialect.ErrLeaseLost]).
// The Prometheus and OpenTelemetry adapters label runs with it.
func RunResult(err error) string {
	switch {
	case errors.Is(err, dialect.ErrLeaseLost):
		return "lost"
	case err != nil:
		return "failed"
	}
	return "succeeded"
}

// report is the one place a scheduler describes what it did: the
// operation, the job, when it started, its error, and how many rows it
// recorded (fire times claimed, skipped ranges, runs). It tells the
// Observer, if any, and logs at debug level.
func (s *Scheduler) report(ctx context.Context, op observe.Op, job string, start time.Time, err error, n int64) {
	took := time.Since(start)
	if o := s.cfg.Observer; o != nil {
		o.Observe(ctx, observe.Event{Source: observe.SourceSchedule, Op: op, Table: s.cfg.Runs, Key: job,
			Start: start, Duration: took, Err: err, Rows: int(n)})
	}
	if !s.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "schedule: "+op.Name(),
		slog.String("table", s.cfg.Runs), slog.String("job", job),
		slog.Duration("took", took), slog.Int64("n", n), slog.Any("err", err))
}

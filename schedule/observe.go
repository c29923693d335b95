package schedule

import (
	"context"
	"log/slog"
	"time"
)

// The operations a scheduler reports.
const (
	opClaim  = "claim"  // a fire time claimed for a run
	opSkip   = "skip"   // fire times recorded as skipped (missed or paused)
	opFinish = "finish" // a run recorded and its lease released
	opPause  = "pause"  // a job paused or resumed
)

// report is the one place a scheduler describes what it did: the
// operation, the job, when it started, how long it took, its error, and
// how many rows it recorded (fire times claimed or skipped ranges, runs
// found lost). It logs at debug level; it is the hook for an observer of
// claimlock's shared observability package (Source "schedule"), which is
// not part of this module yet.
func (s *Scheduler) report(ctx context.Context, op, job string, start time.Time, err error, n int64) {
	if !s.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "schedule: "+op,
		slog.String("source", "schedule"), slog.String("table", s.cfg.Runs), slog.String("job", job),
		slog.Duration("took", time.Since(start)), slog.Int64("n", n), slog.Any("err", err))
}

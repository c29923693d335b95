package claimotel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/schedule"
)

// A scheduler observed by the Observer: a span per run claimed, ended,
// skipped or paused (none for fire times another process runs), and
// counters of runs started and finished by result.
func TestScheduleEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlite.Open(":memory:")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	require.NoError(t, schedule.CreateTables(ctx, d, "", ""))

	b := setup(t)
	s, err := schedule.New(d, schedule.Config{TTL: 10 * time.Second, Observer: b.obs})
	require.NoError(t, err)
	var ok, bad atomic.Int32
	runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := func() {
		if ok.Load() >= 2 && bad.Load() >= 1 {
			cancel()
		}
	}
	require.NoError(t, s.Add(schedule.Job{Name: "ok", Schedule: schedule.Every(200 * time.Millisecond), Func: func(context.Context, *schedule.Run) error {
		ok.Add(1)
		done()
		return nil
	}}))
	require.NoError(t, s.Add(schedule.Job{Name: "bad", Schedule: schedule.Every(200 * time.Millisecond), Func: func(context.Context, *schedule.Run) error {
		bad.Add(1)
		done()
		return errors.New("boom")
	}}))
	require.NoError(t, s.Pause(ctx, "ok"))
	require.NoError(t, s.Resume(ctx, "ok"))
	require.NoError(t, s.Run(runCtx))
	require.GreaterOrEqual(t, ok.Load(), int32(2), "the job ran before the deadline")

	sums, _ := b.sums(t)
	runs := int64(ok.Load() + bad.Load())
	require.Equal(t, runs, sums["claimlock.schedule.runs.started"], "%v", sums)
	require.Equal(t, runs, sums["claimlock.schedule.runs.finished"], "%v", sums)
	finished := map[string]int{}
	for _, sp := range b.spans.GetSpans().Snapshots() {
		switch sp.Name() {
		case "claimlock.schedule.finish":
			job, _ := attr(sp, "claimlock.schedule.job")
			result, _ := attr(sp, "claimlock.schedule.result")
			finished[job.AsString()+" "+result.AsString()]++
			if job.AsString() == "bad" {
				require.Equal(t, codes.Error, sp.Status().Code, "a failed run's span is an error")
			}
		case "claimlock.schedule.pause":
			_, has := attr(sp, "claimlock.schedule.paused")
			require.True(t, has)
		case "claimlock.schedule.claim":
		default:
			t.Fatalf("unexpected span %s", sp.Name())
		}
	}
	require.Equal(t, map[string]int{"ok succeeded": int(ok.Load()), "bad failed": int(bad.Load())}, finished)
}

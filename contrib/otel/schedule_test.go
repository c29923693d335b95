package claimotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/claimlock/claimlock/internal/testkit/obstest"
	"github.com/claimlock/claimlock/schedule"
)

// A scheduler observed by the Observer: a span per run claimed, ended,
// skipped or paused (none for fire times another process runs), and
// counters of runs started and finished by result.
func TestScheduleEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := obstest.SQLite(t)
	require.NoError(t, schedule.CreateTables(ctx, d, "", ""))

	b := setup(t)
	s, err := schedule.New(d, schedule.Config{TTL: 10 * time.Second, Observer: b.obs})
	require.NoError(t, err)
	require.NoError(t, s.Pause(ctx, "ok"))
	require.NoError(t, s.Resume(ctx, "ok"))
	ok, bad := obstest.ScheduleRuns(t, s)

	sums, _ := b.sums(t)
	runs := int64(ok + bad)
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
	require.Equal(t, map[string]int{"ok succeeded": int(ok), "bad failed": int(bad)}, finished)
}

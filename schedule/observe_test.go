package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/schedule"
)

var errBoom = errors.New("boom")

// TestObserver: a scheduler reports its claims, runs' ends and pauses to
// the one Observer, with the job as the key and the runs table as the
// table; a run's end carries the job's error.
func TestObserver(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		var mu sync.Mutex
		var evs []observe.Event
		s, err := schedule.New(c.Dialect, schedule.Config{TTL: time.Second, Observer: observe.Func(func(_ context.Context, e observe.Event) {
			mu.Lock()
			defer mu.Unlock()
			evs = append(evs, e)
		})})
		require.NoError(t, err)
		ran := make(chan struct{}, 1)
		require.NoError(t, s.Add(schedule.Job{Name: "observed", Schedule: schedule.Every(time.Second), Func: func(ctx context.Context, r *schedule.Run) error {
			ran <- struct{}{}
			return errBoom
		}}))
		require.NoError(t, s.Pause(ctx, "observed"))
		require.NoError(t, s.Resume(ctx, "observed"))
		// Tick on each fire time until one runs (a tick can come too late
		// for its fire time on a loaded machine).
		for deadline := time.Now().Add(20 * time.Second); len(ran) == 0; {
			require.True(t, time.Now().Before(deadline), "no tick ran the job")
			waitFire(time.Second, 20*time.Millisecond)
			_ = s.Tick(ctx, "observed")
		}
		mu.Lock()
		defer mu.Unlock()
		ops := map[observe.Op]int{}
		for _, e := range evs {
			if e.Op == schedule.OpFinish {
				require.ErrorIs(t, e.Err, errBoom, "the run's end carries the job's error")
			}
			require.Equal(t, observe.SourceSchedule, e.Source)
			require.Equal(t, "observed", e.Key)
			require.Equal(t, schedule.DefaultRunsTable, e.Table)
			require.False(t, e.Start.IsZero())
			ops[e.Op]++
		}
		require.Equal(t, 2, ops[schedule.OpPause], "pause and resume: %v", ops)
		require.Positive(t, ops[schedule.OpClaim], "%v", ops)
		require.Equal(t, 1, ops[schedule.OpFinish], "the run's end: %v", ops)
	})
}

// RunResult names a run's end from its OpFinish event's error.
func TestRunResult(t *testing.T) {
	require.Equal(t, "succeeded", schedule.RunResult(nil))
	require.Equal(t, "failed", schedule.RunResult(errBoom))
	require.Equal(t, "lost", schedule.RunResult(errors.Join(errBoom, fmt.Errorf("finish: %w", dialect.ErrLeaseLost))))
}

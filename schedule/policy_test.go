package schedule_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/schedule"
)

// waitFire sleeps until just after the next multiple of period.
func waitFire(period, after time.Duration) {
	now := time.Now()
	time.Sleep(now.Truncate(period).Add(period + after).Sub(now))
}

// TestMissed: no process ticks for several fire times; the next tick
// records them by the policy: skipped, or one late run and the rest
// skipped.
func TestMissed(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		const period = 400 * time.Millisecond
		ctx := context.Background()
		for _, policy := range []schedule.Missed{schedule.SkipMissed, schedule.CatchUp} {
			job := "missed-" + policy.String()
			s, err := schedule.New(c.Dialect, schedule.Config{TTL: time.Second, Grace: 50 * time.Millisecond, Missed: policy})
			require.NoError(t, err)
			var late atomic.Int32
			var runs atomic.Int32
			require.NoError(t, s.Add(schedule.Job{Name: job, Schedule: schedule.Every(period), Func: func(ctx context.Context, r *schedule.Run) error {
				runs.Add(1)
				if r.Late() {
					late.Add(1)
				}
				return nil
			}}))
			// The first tick makes the job's row: fire times start after it.
			waitFire(period, 10*time.Millisecond)
			require.ErrorIs(t, s.Tick(ctx, job), schedule.ErrNotDue)
			waitFire(period, 10*time.Millisecond)
			require.NoError(t, s.Tick(ctx, job))
			// Down for three fire times; tick 120 ms after the fourth: past
			// its 50 ms grace, and nearer to it than to the next one (a tick
			// nearer to the next would wait for it and run it).
			time.Sleep(3 * period)
			waitFire(period, 120*time.Millisecond)
			err = s.Tick(ctx, job)
			recs := history(t, s, job)
			a := accountAll(recs, schedule.Every(period))
			t.Logf("%s %s: %s: tick %v", c.Engine, policy, a, err)
			require.Empty(t, a.Uncovered)
			require.Empty(t, a.Twice)
			last := recs[len(recs)-1]
			switch policy {
			case schedule.SkipMissed:
				require.ErrorIs(t, err, schedule.ErrNotDue)
				require.Equal(t, int32(1), runs.Load())
				require.Equal(t, schedule.Skipped, last.Status)
				require.Contains(t, last.Error, "missed")
				require.GreaterOrEqual(t, a.Fires, 5)
			case schedule.CatchUp:
				require.NoError(t, err)
				require.Equal(t, int32(2), runs.Load())
				require.Equal(t, int32(1), late.Load())
				require.Equal(t, schedule.Succeeded, last.Status)
				require.Equal(t, schedule.Skipped, recs[len(recs)-2].Status)
			}
		}
	})
}

// TestPause: a paused job's fire times are recorded as skipped by every
// scheduler, the pause survives a new scheduler (a restart), and Resume
// runs the next fire time.
func TestPause(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		const period = 200 * time.Millisecond
		ctx := context.Background()
		var runs atomic.Int32
		newSched := func() *schedule.Scheduler {
			s, err := schedule.New(c.Dialect, schedule.Config{TTL: time.Second})
			require.NoError(t, err)
			require.NoError(t, s.Add(schedule.Job{Name: "p", Schedule: schedule.Every(period), Func: func(ctx context.Context, r *schedule.Run) error {
				runs.Add(1)
				return nil
			}}))
			return s
		}
		s := newSched()
		require.NoError(t, s.Pause(ctx, "p"))
		waitFire(period, 10*time.Millisecond)
		require.ErrorIs(t, s.Tick(ctx, "p"), schedule.ErrPaused)
		s2 := newSched() // another process, or this one restarted
		waitFire(period, 10*time.Millisecond)
		require.ErrorIs(t, s2.Tick(ctx, "p"), schedule.ErrPaused)
		jobs, err := s2.Jobs(ctx)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.True(t, jobs[0].Paused)
		require.Zero(t, runs.Load())
		require.NoError(t, s2.Resume(ctx, "p"))
		waitFire(period, 10*time.Millisecond)
		require.NoError(t, s.Tick(ctx, "p"))
		require.Equal(t, int32(1), runs.Load())
		recs := history(t, s, "p")
		require.GreaterOrEqual(t, len(recs), 2)
		require.Equal(t, schedule.Succeeded, recs[len(recs)-1].Status)
		for _, r := range recs[:len(recs)-1] {
			require.Equal(t, schedule.Skipped, r.Status)
			require.Equal(t, "paused", r.Error)
		}
		a := accountAll(recs, schedule.Every(period))
		require.Empty(t, a.Uncovered)
		require.Empty(t, a.Twice)
	})
}

// TestOverlap: a run that outlasts its period keeps the job's lease; the
// fire times it overran are recorded as missed (never run beside it), and
// the one after it ends runs. MinHold keeps a short run's lease so that
// the next fire time inside the hold is missed too.
func TestOverlap(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		const period = 200 * time.Millisecond
		ctx := context.Background()
		var running, overlaps atomic.Int32
		fn := func(d time.Duration) func(context.Context, *schedule.Run) error {
			return func(ctx context.Context, r *schedule.Run) error {
				if running.Add(1) > 1 {
					overlaps.Add(1)
				}
				defer running.Add(-1)
				time.Sleep(d)
				return nil
			}
		}
		a, err := schedule.New(c.Dialect, schedule.Config{TTL: time.Second, Grace: 100 * time.Millisecond, PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		b, err := schedule.New(c.Dialect, schedule.Config{TTL: time.Second, Grace: 100 * time.Millisecond, PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, a.Add(schedule.Job{Name: "long", Schedule: schedule.Every(period), Func: fn(500 * time.Millisecond)}))
		require.NoError(t, b.Add(schedule.Job{Name: "long", Schedule: schedule.Every(period), Func: fn(500 * time.Millisecond)}))
		waitFire(period, 10*time.Millisecond)
		_ = a.Tick(ctx, "long") // makes the row
		waitFire(period, 5*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- a.Tick(ctx, "long") }() // runs 500 ms
		for range 2 {
			waitFire(period, 5*time.Millisecond)
			err := b.Tick(ctx, "long")
			require.True(t, errors.Is(err, schedule.ErrNotDue), "overran fire time: %v", err)
		}
		require.NoError(t, <-done)
		waitFire(period, 5*time.Millisecond)
		require.NoError(t, b.Tick(ctx, "long"))
		require.Zero(t, overlaps.Load())
		recs := history(t, a, "long")
		acc := accountAll(recs, schedule.Every(period))
		t.Logf("%s: %s", c.Engine, acc)
		require.Empty(t, acc.Uncovered)
		require.Empty(t, acc.Twice)
		require.GreaterOrEqual(t, acc.Skipped, 1)

		// MinHold: a 10 ms run holds the job for 600 ms, so the fire time
		// 400 ms later is missed (its 100 ms grace ends inside the hold),
		// and the one after runs.
		const slow = 400 * time.Millisecond
		h, err := schedule.New(c.Dialect, schedule.Config{TTL: time.Second, MinHold: 600 * time.Millisecond, Grace: 100 * time.Millisecond, PollInterval: 10 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, h.Add(schedule.Job{Name: "held", Schedule: schedule.Every(slow), Func: fn(10 * time.Millisecond)}))
		waitFire(slow, 10*time.Millisecond)
		_ = h.Tick(ctx, "held")
		waitFire(slow, 5*time.Millisecond)
		require.NoError(t, h.Tick(ctx, "held"))
		waitFire(slow, 5*time.Millisecond)
		require.ErrorIs(t, h.Tick(ctx, "held"), schedule.ErrNotDue)
		waitFire(slow, 5*time.Millisecond)
		require.NoError(t, h.Tick(ctx, "held"))
		recs = history(t, h, "held")
		require.Equal(t, []schedule.Status{schedule.Succeeded, schedule.Skipped, schedule.Succeeded}, statuses(recs[len(recs)-3:]))
	})
}

func statuses(recs []schedule.Record) []schedule.Status {
	out := make([]schedule.Status, len(recs))
	for i, r := range recs {
		out[i] = r.Status
	}
	return out
}

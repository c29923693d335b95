package schedule_test

import (
	"context"
	"errors"
	"strings"
	"sync"
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

// TestMissed: no process ticks for three fire times; the next tick
// records them by the policy: skipped, or one late run and the rest
// skipped.
func TestMissed(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		const period = time.Second
		ctx := context.Background()
		for _, policy := range []schedule.Missed{schedule.SkipMissed, schedule.CatchUp} {
			t.Run(policy.String(), func(t *testing.T) {
				t.Parallel()
				job := "missed-" + policy.String()
				s, err := schedule.New(c.Dialect, schedule.Config{TTL: time.Second, Grace: 100 * time.Millisecond, Missed: policy})
				require.NoError(t, err)
				var late, runs atomic.Int32
				require.NoError(t, s.Add(schedule.Job{Name: job, Schedule: schedule.Every(period), Func: func(ctx context.Context, r *schedule.Run) error {
					runs.Add(1)
					if r.Late() {
						late.Add(1)
					}
					return nil
				}}))
				// The first tick makes the job's row (and may run the next
				// fire time, if it is near).
				waitFire(period, 10*time.Millisecond)
				_ = s.Tick(ctx, job)
				before := runs.Load()
				// Down for three fire times; tick 300 ms after the fourth:
				// past its 100 ms grace, and nearer to it than to the next
				// one. A tick slowed past the middle of the gap (a loaded
				// machine) stands for the next fire time and runs it on
				// time: the missed ones are recorded all the same, and only
				// CatchUp runs one late.
				time.Sleep(3 * period)
				waitFire(period, 300*time.Millisecond)
				err = s.Tick(ctx, job)
				recs := history(t, s, job)
				a := accountAll(recs, schedule.Every(period))
				t.Logf("%s %s: %s: tick %v", c.Engine, policy, a, err)
				require.Empty(t, a.Uncovered)
				require.Empty(t, a.Twice)
				require.GreaterOrEqual(t, a.Fires, 4)
				require.GreaterOrEqual(t, a.Skipped, 1)
				switch policy {
				case schedule.SkipMissed:
					require.True(t, err == nil || errors.Is(err, schedule.ErrNotDue), "tick: %v", err)
					require.Zero(t, late.Load(), "a missed fire time ran late")
					for _, r := range recs {
						if r.Status == schedule.Skipped {
							require.Contains(t, r.Error, "missed")
						}
					}
				case schedule.CatchUp:
					require.NoError(t, err)
					require.Equal(t, int32(1), late.Load(), "one late run")
					require.Equal(t, before+1, runs.Load())
				}
			})
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
		// Fire times recorded while paused say so; one that passed between
		// the last paused tick and the resume, unrecorded, is missed.
		require.Equal(t, "paused", recs[0].Error)
		for _, r := range recs[:len(recs)-1] {
			require.Equal(t, schedule.Skipped, r.Status)
			require.True(t, r.Error == "paused" || strings.HasPrefix(r.Error, "missed"), r.Error)
		}
		a := accountAll(recs, schedule.Every(period))
		require.Empty(t, a.Uncovered)
		require.Empty(t, a.Twice)
	})
}

// TestOverlap: runs that outlast their period keep the job's lease; the
// fire times they overrun are recorded as missed, never run beside them.
// MinHold keeps a short run's lease past the next fire time, which is then
// missed.
func TestOverlap(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		const period = 200 * time.Millisecond
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
		run := func(t *testing.T, job string, sched schedule.Schedule, cfg schedule.Config, work time.Duration, d time.Duration) []schedule.Record {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			var wg sync.WaitGroup
			var first *schedule.Scheduler
			for range 2 {
				s, err := schedule.New(c.Dialect, cfg)
				require.NoError(t, err)
				require.NoError(t, s.Add(schedule.Job{Name: job, Schedule: sched, Func: fn(work)}))
				first = s
				wg.Go(func() { require.NoError(t, s.Run(ctx)) })
			}
			wg.Wait()
			return history(t, first, job)
		}

		// Runs of 500 ms every 200 ms, in two processes.
		recs := run(t, "long", schedule.Every(period), schedule.Config{TTL: time.Second, Grace: 100 * time.Millisecond, PollInterval: 20 * time.Millisecond}, 500*time.Millisecond, 2500*time.Millisecond)
		acc := accountAll(recs, schedule.Every(period))
		t.Logf("%s long runs: %s", c.Engine, acc)
		require.Zero(t, overlaps.Load())
		// No process died: a run recorded lost was a live one another
		// process's tick took for dead.
		for _, r := range recs {
			require.NotEqual(t, schedule.Lost, r.Status, "fire time %v: a live run was marked lost (%s)", r.FireTime, r.Error)
		}
		require.Empty(t, acc.Uncovered)
		require.Empty(t, acc.Twice)
		require.GreaterOrEqual(t, acc.Skipped, 1)
		require.GreaterOrEqual(t, acc.Runs, 2)

		// MinHold: runs of 10 ms every 400 ms hold the job 600 ms: no run
		// starts within 600 ms of the one before (on the database clock,
		// less the few milliseconds between an acquisition and its claim),
		// so every other fire time is missed.
		const slow = 400 * time.Millisecond
		recs = run(t, "held", schedule.Every(slow), schedule.Config{TTL: time.Second, MinHold: 600 * time.Millisecond, Grace: 100 * time.Millisecond, PollInterval: 10 * time.Millisecond}, 10*time.Millisecond, 3*time.Second)
		acc = accountAll(recs, schedule.Every(slow))
		t.Logf("%s held runs: %s", c.Engine, acc)
		require.Empty(t, acc.Uncovered)
		require.Empty(t, acc.Twice)
		require.GreaterOrEqual(t, acc.Skipped, 1)
		var last time.Time
		for _, r := range recs {
			if r.Status == schedule.Skipped {
				continue
			}
			require.Equal(t, schedule.Succeeded, r.Status)
			if !last.IsZero() {
				require.GreaterOrEqual(t, r.Started.Sub(last), 550*time.Millisecond, "a run started %v after the one before, inside its minimum hold", r.Started.Sub(last))
			}
			last = r.Started
		}
	})
}

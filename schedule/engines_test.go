package schedule_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/schedule"
)

// tickAt calls s.Tick for job at each multiple of period shifted by skew
// on the local clock (a host whose clock is -skew off: a positive skew
// ticks late), until ctx ends, each tick in a goroutine of its own as
// robfig/cron does. It returns when every tick has returned.
func tickAt(ctx context.Context, s *schedule.Scheduler, job string, period, skew time.Duration, errs chan<- error) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		now := time.Now()
		next := now.Truncate(period).Add(skew)
		for !next.After(now) {
			next = next.Add(period)
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wg.Go(func() {
			err := s.Tick(ctx, job)
			if err != nil && !errors.Is(err, schedule.ErrNotDue) && ctx.Err() == nil {
				errs <- err
			}
		})
	}
}

// TestOncePerFireTime: three schedulers tick one job every 500 ms, one
// 200 ms early, one on time, one 200 ms late (clocks skewed ±40% of the
// period), for 4 s: every fire time runs exactly once, and the job's
// history accounts for each.
func TestOncePerFireTime(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		const period = 500 * time.Millisecond
		sched := schedule.Every(period)
		var mu sync.Mutex
		ran := map[int64][]string{}
		var scheds []*schedule.Scheduler
		for i, skew := range []time.Duration{-200 * time.Millisecond, 0, 200 * time.Millisecond} {
			s, err := schedule.New(c.Dialect, schedule.Config{TTL: 2 * time.Second, Worker: "w" + string(rune('a'+i))})
			require.NoError(t, err)
			worker := "w" + string(rune('a'+i))
			require.NoError(t, s.Add(schedule.Job{Name: "beat", Schedule: sched, Func: func(ctx context.Context, r *schedule.Run) error {
				mu.Lock()
				ran[r.FireTime().UnixMicro()] = append(ran[r.FireTime().UnixMicro()], worker)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				return nil
			}}))
			scheds = append(scheds, s)
			_ = skew
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		errs := make(chan error, 100)
		var wg sync.WaitGroup
		skews := []time.Duration{-200 * time.Millisecond, 0, 200 * time.Millisecond}
		start := time.Now()
		for i, s := range scheds {
			wg.Go(func() { tickAt(ctx, s, "beat", period, skews[i], errs) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("tick: %v", err)
		}
		recs := history(t, scheds[0], "beat")
		require.NotEmpty(t, recs)
		// Account from the first fire time after the job was registered to
		// the last one every ticker had passed.
		from := recs[0].FireTime
		to := start.Add(4*time.Second - time.Second).Truncate(period)
		a := account(recs, sched, from, to)
		t.Logf("%s: %s ran=%d", c.Engine, a, len(ran))
		require.Empty(t, a.Twice, "fire times recorded twice")
		require.Empty(t, a.Uncovered, "fire times neither run nor recorded")
		for f, ws := range ran {
			require.Len(t, ws, 1, "fire time %v ran on %v", time.UnixMicro(f), ws)
		}
		require.Zero(t, a.Skipped, "no fire time should be missed with three schedulers up")
		require.GreaterOrEqual(t, a.Runs, a.Fires)
	})
}

package claimcron_test

import (
	"context"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/contrib/robfigcron"
	"github.com/claimlock/claimlock/internal/testkit/schedtest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/schedule"
)

// forEachEngine runs fn as a parallel subtest per engine, on a fresh
// database with the schedule tables.
func forEachEngine(t *testing.T, names []string, fn func(t *testing.T, c *testengine.Conn)) {
	t.Helper()
	for _, name := range names {
		e, _ := testengine.ByName(name)
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			c := testengine.Open(t, e, 0)
			require.NoError(t, schedule.CreateTables(context.Background(), c.Dialect, "", ""))
			fn(t, c)
		})
	}
}

var allEngines = []string{testengine.SQLite, testengine.Postgres, testengine.MySQL}

// TestTwoCrons: two robfig crons, one whose clock is 400 ms ahead and one
// 400 ms behind, run a job every second through Wrap against one database
// for 4 s: each fire time runs once, and the history accounts for each.
func TestTwoCrons(t *testing.T) {
	forEachEngine(t, allEngines, func(t *testing.T, c *testengine.Conn) {
		var mu sync.Mutex
		ran := map[int64]int{}
		sched := schedule.Every(time.Second)
		var crons []*cron.Cron
		var s *schedule.Scheduler
		for _, skew := range []time.Duration{400 * time.Millisecond, -400 * time.Millisecond} {
			var err error
			s, err = schedule.New(c.Dialect, schedule.Config{TTL: time.Second})
			require.NoError(t, err)
			require.NoError(t, s.Add(schedule.Job{Name: "tick", Schedule: sched}))
			cr := cron.New(cron.WithSeconds())
			cr.Schedule(schedtest.Skewed(sched, skew), claimcron.Wrap(s, "tick")(claimcron.Func(func(ctx context.Context, r *schedule.Run) error {
				mu.Lock()
				ran[r.FireTime().UnixMicro()]++
				mu.Unlock()
				return nil
			})))
			crons = append(crons, cr)
		}
		start := time.Now()
		for _, cr := range crons {
			cr.Start()
		}
		time.Sleep(4 * time.Second)
		for _, cr := range crons {
			<-cr.Stop().Done()
		}
		recs := schedtest.History(t, s, "tick")
		require.NotEmpty(t, recs)
		a := schedtest.Account(recs, sched, recs[0].FireTime, start.Add(3*time.Second))
		t.Logf("%s: %s", c.Engine, a)
		require.Empty(t, a.Twice)
		require.Empty(t, a.Uncovered)
		require.Zero(t, a.Skipped)
		for f, n := range ran {
			require.Equal(t, 1, n, "fire time %v ran %d times", time.UnixMicro(f), n)
		}
		require.GreaterOrEqual(t, len(ran), 3)
	})
}

// TestAdd: Add parses a spec with seconds, registers the job and wraps it;
// a plain cron.Job runs and is recorded as succeeded.
func TestAdd(t *testing.T) {
	forEachEngine(t, []string{testengine.SQLite}, func(t *testing.T, c *testengine.Conn) {
		s, err := schedule.New(c.Dialect, schedule.Config{TTL: time.Second})
		require.NoError(t, err)
		cr := cron.New(cron.WithSeconds())
		done := make(chan struct{}, 10)
		_, err = claimcron.Add(cr, s, "plain", "* * * * * *", cron.FuncJob(func() { done <- struct{}{} }))
		require.NoError(t, err)
		_, err = claimcron.Add(cr, s, "plain", "* * * * * *", cron.FuncJob(func() {}))
		require.Error(t, err, "a job added twice")
		_, err = claimcron.Add(cr, s, "bad", "not a spec", cron.FuncJob(func() {}))
		require.Error(t, err)
		cr.Start()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the job did not run")
		}
		<-cr.Stop().Done()
		require.Eventually(t, func() bool {
			recs := schedtest.History(t, s, "plain")
			return len(recs) > 0 && recs[0].Status == schedule.Succeeded
		}, 5*time.Second, 20*time.Millisecond)
	})
}

// TestFleet: two processes with robfig crons 400 ms ahead and behind run
// a job every second; one is killed with SIGKILL mid-run and replaced
// (see schedtest.Fleet for what is checked).
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	forEachEngine(t, []string{testengine.Postgres, testengine.MySQL}, func(t *testing.T, c *testengine.Conn) {
		schedtest.Fleet(t, c, func(t *testing.T, skew time.Duration) *schedtest.Child {
			return schedtest.Spawn(t, envRole+"=cron", envEngine+"="+c.Engine, envDSN+"="+c.DSN, envSkew+"="+skew.String())
		})
	})
}

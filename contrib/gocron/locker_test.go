package claimgocron_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/contrib/gocron"
	"github.com/claimlock/claimlock/internal/testkit/schedtest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/leader"
	"github.com/claimlock/claimlock/schedule"
	"github.com/claimlock/claimlock/tasklock"
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

// TestTwoSchedulers: two gocron schedulers, one whose clock is 400 ms
// ahead and one 400 ms behind, run a job every second through the Locker
// against one database for 4 s: each fire time runs once, and the history
// accounts for each.
func TestTwoSchedulers(t *testing.T) {
	forEachEngine(t, allEngines, func(t *testing.T, c *testengine.Conn) {
		var mu sync.Mutex
		var ran []int64
		var s *schedule.Scheduler
		var gs []gocron.Scheduler
		for _, skew := range []time.Duration{400 * time.Millisecond, -400 * time.Millisecond} {
			var err error
			s, err = schedule.New(c.Dialect, schedule.Config{TTL: time.Second})
			require.NoError(t, err)
			sch := s
			g, err := newGocron(s, "tick", skew, func(ctx context.Context) {
				recs, err := sch.History(ctx, "tick", time.Time{}, 1)
				if err == nil && len(recs) == 1 && recs[0].Status == schedule.Running {
					mu.Lock()
					ran = append(ran, recs[0].FireTime.UnixMicro())
					mu.Unlock()
				}
			})
			require.NoError(t, err)
			gs = append(gs, g)
		}
		start := time.Now()
		for _, g := range gs {
			g.Start()
		}
		time.Sleep(4 * time.Second)
		for _, g := range gs {
			require.NoError(t, g.Shutdown())
		}
		recs := schedtest.History(t, s, "tick")
		require.NotEmpty(t, recs)
		a := schedtest.Account(recs, schedule.Every(time.Second), recs[0].FireTime, start.Add(3*time.Second))
		t.Logf("%s: %s; runs seen by the jobs: %d", c.Engine, a, len(ran))
		require.Empty(t, a.Twice)
		require.Empty(t, a.Uncovered)
		require.Zero(t, a.Skipped)
		seen := map[int64]bool{}
		for _, f := range ran {
			require.False(t, seen[f], "fire time %v ran twice", time.UnixMicro(f))
			seen[f] = true
		}
		require.GreaterOrEqual(t, len(ran), 3)
		for _, r := range recs {
			require.Equal(t, schedule.Succeeded, r.Status)
		}
	})
}

// TestTask: a job created with Task gets its run; its error is recorded.
func TestTask(t *testing.T) {
	forEachEngine(t, []string{testengine.SQLite}, func(t *testing.T, c *testengine.Conn) {
		s, err := schedule.New(c.Dialect, schedule.Config{TTL: time.Second})
		require.NoError(t, err)
		locker := claimgocron.NewLocker(s)
		g, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
		require.NoError(t, err)
		def, opts, err := locker.DurationJob("every-300ms", 300*time.Millisecond)
		require.NoError(t, err)
		var fences []int64
		var mu sync.Mutex
		_, err = g.NewJob(def, claimgocron.Task(s, "every-300ms", func(ctx context.Context, r *schedule.Run) error {
			mu.Lock()
			fences = append(fences, r.Fence())
			mu.Unlock()
			return context.DeadlineExceeded
		}), append(opts, gocron.WithDisabledDistributedJobLocker(true))...)
		require.NoError(t, err)
		g.Start()
		time.Sleep(1200 * time.Millisecond)
		require.NoError(t, g.Shutdown())
		recs := schedtest.History(t, s, "every-300ms")
		require.NotEmpty(t, recs)
		for _, r := range recs {
			require.Equal(t, schedule.Failed, r.Status)
			require.Contains(t, r.Error, "deadline exceeded")
		}
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, fences, len(recs))
		_, _, err = locker.CronJob("bad", "not a crontab", true, nil)
		require.Error(t, err)
		_, err = locker.Lock(context.Background(), "never-registered")
		require.ErrorIs(t, err, schedule.ErrUnknownJob)
	})
}

// TestElector: two gocron schedulers share a leader.Elector election; only
// the leader's jobs run, and after the leader's campaign ends the other
// takes over.
func TestElector(t *testing.T) {
	forEachEngine(t, []string{testengine.SQLite, testengine.Postgres, testengine.MySQL}, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		require.NoError(t, tasklock.CreateTable(ctx, c.Dialect, "claimlock_lease"))
		var runs [2]atomic.Int32
		var els [2]*leader.Elector
		var cancels [2]context.CancelFunc
		var gs [2]gocron.Scheduler
		for i := range 2 {
			el, err := leader.New(c.Dialect, leader.Config{Table: tasklock.KeyTable("claimlock_lease"), Name: "gocron", TTL: time.Second, RetryInterval: 50 * time.Millisecond})
			require.NoError(t, err)
			els[i] = el
			cctx, cancel := context.WithCancel(ctx)
			cancels[i] = cancel
			go func() { _ = el.Campaign(cctx) }()
			g, err := gocron.NewScheduler(gocron.WithDistributedElector(el))
			require.NoError(t, err)
			_, err = g.NewJob(gocron.DurationJob(100*time.Millisecond), gocron.NewTask(func() { runs[i].Add(1) }))
			require.NoError(t, err)
			g.Start()
			gs[i] = g
		}
		defer func() {
			for i := range 2 {
				cancels[i]()
				_ = gs[i].Shutdown()
			}
		}()
		require.Eventually(t, func() bool { return els[0].IsLeader(ctx) == nil || els[1].IsLeader(ctx) == nil }, 5*time.Second, 10*time.Millisecond)
		lead := 0
		if els[1].IsLeader(ctx) == nil {
			lead = 1
		}
		time.Sleep(500 * time.Millisecond)
		require.Positive(t, runs[lead].Load())
		require.Zero(t, runs[1-lead].Load(), "the follower ran jobs")
		cancels[lead]()
		require.Eventually(t, func() bool { return runs[1-lead].Load() > 0 }, 5*time.Second, 10*time.Millisecond)
	})
}

// TestFleet: two processes with gocron schedulers 400 ms ahead and behind
// run a job every second through the Locker; one is killed with SIGKILL
// mid-run and replaced (see schedtest.Fleet for what is checked).
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	forEachEngine(t, []string{testengine.Postgres, testengine.MySQL}, func(t *testing.T, c *testengine.Conn) {
		schedtest.Fleet(t, c, func(t *testing.T, skew time.Duration) *schedtest.Child {
			return schedtest.Spawn(t, envRole+"=gocron", envEngine+"="+c.Engine, envDSN+"="+c.DSN, envSkew+"="+skew.String())
		})
	})
}

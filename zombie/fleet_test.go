package zombie_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// sweepLog records the sweep intervals of several reapers on the local
// clock.
type sweepLog struct {
	mu        sync.Mutex
	open      map[int]time.Time
	intervals []interval
	counts    map[int]int
}

type interval struct {
	reaper     int
	start, end time.Time
}

// observer records the sweeps of reaper i: each event of a sweep carries
// its start on the local clock, and comes when it ended.
func (l *sweepLog) observer(i int) observe.Observer {
	return observe.Func(func(_ context.Context, e observe.Event) {
		if e.Op != zombie.OpSweep {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.intervals = append(l.intervals, interval{i, e.Start, time.Now()})
		l.counts[i]++
	})
}

func (l *sweepLog) count(i int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[i]
}

// TestFleetOneSweeper: two reapers with the same lock key never sweep at the
// same time; when the leader stops, the other takes over; a restarted
// reaper waits while the other leads.
func TestFleetOneSweeper(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		cc := jobsConfig(10)
		createTable(t, e, cc, false)
		insertRows(t, e, cc.Table, "PENDING", 10, 10)
		leases := cc.Table + "_leases"
		require.NoError(t, tasklock.CreateTable(ctx, e.d, leases))

		log := &sweepLog{open: map[int]time.Time{}, counts: map[int]int{}}
		var reapers [2]*zombie.Reaper
		for i := range reapers {
			// One locker per reaper, as in two processes.
			lk, err := tasklock.New(e.d, tasklock.Config{Table: tasklock.KeyTable(leases), TTL: 1500 * time.Millisecond})
			require.NoError(t, err)
			reapers[i], err = zombie.New(e.d, cc, zombie.Config{
				Timeout: time.Minute, Locker: lk, LockKey: "zombie:" + cc.Table, Observer: log.observer(i),
			})
			require.NoError(t, err)
		}
		type running struct {
			cancel context.CancelFunc
			done   chan error
		}
		run := func(i int) running {
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- reapers[i].Run(rctx, 5*time.Millisecond)
			}()
			return running{cancel, done}
		}
		stop := func(r running) {
			r.cancel()
			require.NoError(t, <-r.done)
		}

		rs := [2]running{run(0), run(1)}
		require.Eventually(t, func() bool { return log.count(0)+log.count(1) > 0 }, 10*time.Second, 5*time.Millisecond,
			"a reaper swept")
		time.Sleep(500 * time.Millisecond) // the other has time to try
		leader := 0
		if log.count(1) > 0 {
			leader = 1
		}
		other := 1 - leader
		require.Positive(t, log.count(leader))
		require.Zero(t, log.count(other), "only the lease holder sweeps")

		// The leader stops and releases: the other takes over.
		stop(rs[leader])
		before := log.count(other)
		require.Eventually(t, func() bool { return log.count(other) > before }, 10*time.Second, 5*time.Millisecond,
			"the follower took over")

		// The old leader restarts: it waits while the other leads.
		stopped := log.count(leader)
		rs[leader] = run(leader)
		time.Sleep(300 * time.Millisecond)
		require.Equal(t, stopped, log.count(leader), "a restarted reaper sweeps while another holds the lease")
		stop(rs[0])
		stop(rs[1])

		log.mu.Lock()
		defer log.mu.Unlock()
		require.Empty(t, log.open, "every sweep reported its end")
		iv := log.intervals
		sort.Slice(iv, func(a, b int) bool { return iv[a].start.Before(iv[b].start) })
		for k := 1; k < len(iv); k++ {
			require.False(t, iv[k].start.Before(iv[k-1].end),
				"sweep %d of reaper %d (from %v) overlaps sweep of reaper %d (until %v)",
				k, iv[k].reaper, iv[k].start, iv[k-1].reaper, iv[k-1].end)
		}
		t.Logf("%s: %s", e.kind, fmt.Sprintf("sweeps per reaper %d and %d, no overlap", log.counts[0], log.counts[1]))
	})
}

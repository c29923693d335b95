package schedule_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/await"
	"github.com/claimlock/claimlock/internal/testkit/schedtest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/schedule"
)

// TestKillMidRun: two processes run a job every 500 ms whose runs take
// 300 ms; the one running is killed with SIGKILL mid-run. The job's lease
// (TTL 1 s) keeps the fire times it would have overlapped from running;
// the first fire time after it expired runs in the other process, which
// records the killed run as lost. Every fire time is accounted for once.
func TestKillMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		const period, ttl = 500 * time.Millisecond, time.Second
		env := childEnv(c, envPeriod+"="+period.String(), envWork+"=300ms", envTTL+"="+ttl.String())
		kids := []*schedtest.Child{schedtest.Spawn(t, env...), schedtest.Spawn(t, env...)}
		// Wait for a run to start, and kill its process mid-run.
		var victim *schedtest.Child
		var killed schedtest.Event
		await.Until(t, "a run to start", 15*time.Second, func() (bool, string) {
			for _, k := range kids {
				for _, ev := range k.Events() {
					if ev.Ev == "start" {
						victim, killed = k, ev
						return true, ""
					}
				}
			}
			return false, "no start yet"
		})
		time.Sleep(100 * time.Millisecond)
		victim.Signal(t, syscall.SIGKILL)
		killedAt := time.Now()
		other := kids[0]
		if other == victim {
			other = kids[1]
		}
		// The survivor runs the first fire time after the lease expired.
		var next schedtest.Event
		await.Until(t, "the survivor to run after the kill", 10*time.Second, func() (bool, string) {
			for _, ev := range other.Events() {
				if ev.Ev == "start" && ev.Fire > killed.Fire {
					next = ev
					return true, ""
				}
			}
			return false, "no run after the killed one yet"
		})
		took := time.Since(killedAt)
		time.Sleep(2 * period) // one more run, so that its end is in the history
		other.Stop(t)

		s, err := schedule.New(c.Dialect, schedule.Config{})
		require.NoError(t, err)
		recs := history(t, s, "job")
		acc := accountAll(recs, schedule.Every(period))
		t.Logf("%s: killed fire %v (fence %d); next run %v (fence %d) %v after the kill; %s",
			c.Engine, time.UnixMicro(killed.Fire).UTC(), killed.Fence, time.UnixMicro(next.Fire).UTC(), next.Fence, took.Round(time.Millisecond), acc)
		require.Empty(t, acc.Uncovered)
		require.Empty(t, acc.Twice)
		require.Greater(t, next.Fence, killed.Fence)
		// The kill came 100 ms into a 300 ms run: the next run waits for the
		// lease's TTL (plus up to a period and the poll), not longer.
		require.Less(t, took, ttl+period+time.Second)
		var lost *schedule.Record
		for i, r := range recs {
			if r.FireTime.UnixMicro() == killed.Fire {
				lost = &recs[i]
			}
		}
		require.NotNil(t, lost, "the killed run is in the history")
		require.Equal(t, schedule.Lost, lost.Status, "the killed run: %+v", *lost)
		require.Contains(t, lost.Error, "lease expired")
		// Every fire time that started, started once.
		seen := map[int64]int{}
		for _, k := range kids {
			for _, ev := range k.Events() {
				if ev.Ev == "start" {
					seen[ev.Fire]++
				}
			}
		}
		for f, n := range seen {
			require.Equal(t, 1, n, "fire time %v started %d times", time.UnixMicro(f), n)
		}
	})
}

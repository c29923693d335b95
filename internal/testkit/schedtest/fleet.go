package schedtest

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/await"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/schedule"
)

// EnvSoak sets how long [Fleet] runs its schedulers (a Go duration);
// unset, 12 s. CI keeps the default; set it to 60s for the minute of the
// cron story's proof.
const EnvSoak = "CLAIMLOCK_SCHEDULE_SOAK"

// The scenario's fixed settings: a job every second whose runs take 300
// ms, under a lease of TTL 1 s, on processes whose clocks are 400 ms apart
// either way.
const (
	FleetPeriod = time.Second
	FleetWork   = 300 * time.Millisecond
	FleetTTL    = time.Second
	FleetSkew   = 400 * time.Millisecond
)

// FleetJob is the job name the fleet's processes run.
const FleetJob = "job"

// Fleet runs the cron story's proof against one database: spawn starts a
// process whose scheduler (gocron, robfig/cron...) ticks FleetJob every
// FleetPeriod with its clock skew ahead of the host's (its ticks come skew
// early), through package schedule, each run emitting "start" (fire time,
// fence) and "end" events and working FleetWork. Two processes run, one
// +FleetSkew and one -FleetSkew; halfway through, the one running a job is
// killed with SIGKILL mid-run and a replacement with its skew started.
// Then Fleet checks, from the job's history and the processes' events:
// every fire time in the span run or recorded as skipped exactly once;
// none started twice; the killed run recorded as lost; a run after it
// within the lease's TTL and two periods; skipped fire times only where
// the dead run's lease covered them. It returns the accounting.
func Fleet(t *testing.T, c *testengine.Conn, spawn func(t *testing.T, skew time.Duration) *Child) Accounting {
	t.Helper()
	soak := 12 * time.Second
	if d, err := time.ParseDuration(os.Getenv(EnvSoak)); err == nil && d > 0 {
		soak = d
	}
	start := time.Now()
	kids := []*Child{spawn(t, FleetSkew), spawn(t, -FleetSkew)}
	skews := []time.Duration{FleetSkew, -FleetSkew}
	time.Sleep(soak / 2)
	// Kill the process that is running the job, 100 ms into its run.
	var victim int
	var killed Event
	await.Until(t, "a run to start after half the soak", 10*FleetPeriod, func() (bool, string) {
		for i, k := range kids {
			evs := k.Events()
			if n := len(evs); n > 0 && evs[n-1].Ev == "start" && time.Since(time.Unix(0, evs[n-1].T)) < 150*time.Millisecond {
				victim, killed = i, evs[n-1]
				return true, ""
			}
		}
		return false, "no run in progress"
	})
	time.Sleep(100*time.Millisecond - time.Since(time.Unix(0, killed.T)))
	kids[victim].Signal(t, syscall.SIGKILL)
	killedAt := time.Now()
	dead := kids[victim]
	kids[victim] = spawn(t, skews[victim])
	time.Sleep(soak - time.Since(start))
	for _, k := range kids {
		k.Stop(t)
	}
	end := time.Now()
	all := append([]*Child{dead}, kids...)

	s, err := schedule.New(c.Dialect, schedule.Config{})
	require.NoError(t, err)
	recs := History(t, s, FleetJob)
	require.NotEmpty(t, recs)
	sched := schedule.Every(FleetPeriod)
	// The span: from the first record to the last fire time every process
	// had ticked for before they were stopped.
	a := Account(recs, sched, recs[0].FireTime, end.Add(-2*FleetPeriod))
	t.Logf("%s: %v soak, kill at %v: %s", c.Engine, soak, killedAt.Sub(start).Round(time.Millisecond), a)
	require.Empty(t, a.Twice, "fire times recorded twice")
	require.Empty(t, a.Uncovered, "fire times neither run nor recorded")

	started := map[int64]int{}
	var after *Event
	for _, k := range all {
		for _, ev := range k.Events() {
			if ev.Ev != "start" {
				continue
			}
			started[ev.Fire]++
			if ev.Fire > killed.Fire && (after == nil || ev.Fire < after.Fire) {
				e := ev
				after = &e
			}
		}
	}
	for f, n := range started {
		require.Equal(t, 1, n, "fire time %v started %d times", time.UnixMicro(f).UTC(), n)
	}
	require.NotNil(t, after, "no run after the kill")
	require.Greater(t, after.Fence, killed.Fence)
	gap := time.UnixMicro(after.Fire).Sub(time.UnixMicro(killed.Fire))
	require.LessOrEqual(t, gap, FleetTTL+2*FleetPeriod, "the first run after the kill came %v after the killed one", gap)
	var lost *schedule.Record
	for i, r := range recs {
		if r.FireTime.UnixMicro() == killed.Fire {
			lost = &recs[i]
		}
	}
	require.NotNil(t, lost, "the killed run is in the history")
	require.Equal(t, schedule.Lost, lost.Status, "the killed run: %+v", *lost)
	// Skipped fire times: only those the dead run's lease covered.
	skipped := 0
	for _, r := range recs {
		if r.Status == schedule.Skipped {
			for f := r.FireTime; f.Before(r.Until); f = sched.Next(f) {
				skipped++
				require.True(t, f.UnixMicro() > killed.Fire && f.UnixMicro() < after.Fire,
					"fire time %v skipped (%s) away from the kill at %v", f.UTC(), r.Error, time.UnixMicro(killed.Fire).UTC())
			}
		}
	}
	t.Logf("%s: killed run %v lost; next run %v (%d fire times skipped in between); %d runs started",
		c.Engine, time.UnixMicro(killed.Fire).UTC().Format("15:04:05.000"), time.UnixMicro(after.Fire).UTC().Format("15:04:05.000"), skipped, len(started))
	return a
}

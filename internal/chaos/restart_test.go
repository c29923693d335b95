package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// restartServer restarts the engine's server and waits until it answers.
// CLAIMLOCK_CHAOS_PG_RESTART / CLAIMLOCK_CHAOS_MYSQL_RESTART replace the
// default commands (run with sh -c) for servers managed another way.
func restartServer(t *testing.T, driver string) {
	t.Helper()
	custom := map[string]string{"postgres": os.Getenv("CLAIMLOCK_CHAOS_PG_RESTART"), "mysql": os.Getenv("CLAIMLOCK_CHAOS_MYSQL_RESTART")}[driver]
	if custom != "" {
		out, err := exec.Command("sh", "-c", custom).CombinedOutput()
		require.NoError(t, err, "%s: %s", custom, out)
		return
	}
	switch driver {
	case "postgres":
		vers, err := os.ReadDir("/etc/postgresql")
		require.NoError(t, err, "PostgreSQL clusters")
		require.NotEmpty(t, vers)
		out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", vers[0].Name(), "main", "restart").CombinedOutput()
		require.NoError(t, err, "pg_ctlcluster: %s", out)
	case "mysql":
		out, err := exec.Command("pidof", "mariadbd").Output()
		require.NoError(t, err, "pidof mariadbd")
		pid, err := strconv.Atoi(strings.Fields(string(out))[0])
		require.NoError(t, err)
		require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
		for deadline := time.Now().Add(60 * time.Second); syscall.Kill(pid, 0) == nil; {
			require.True(t, time.Now().Before(deadline), "mariadbd %d did not stop", pid)
			time.Sleep(100 * time.Millisecond)
		}
		out, err = exec.Command("start-stop-daemon", "--start", "--oknodo", "--background", "--exec", "/usr/sbin/mariadbd").CombinedOutput()
		require.NoError(t, err, "start-stop-daemon: %s", out)
		for deadline := time.Now().Add(60 * time.Second); exec.Command("mariadb-admin", "ping").Run() != nil; {
			require.True(t, time.Now().Before(deadline), "mariadbd did not come back")
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// TestServerRestart restarts the PostgreSQL and MariaDB servers in the
// middle of a run. It restarts shared servers, so it runs only with
// CLAIMLOCK_CHAOS_RESTART=1 (never under a plain go test ./...). Nothing is
// lost and the task drains after the server returns.
func TestServerRestart(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			if e.driver == "sqlite" {
				t.Skip("SQLite has no server to restart")
			}
			if os.Getenv(envRestart) != "1" {
				t.Skipf("SKIPPING: restarting the shared %s server would break other test packages; set %s=1 to run it", e.name, envRestart)
			}
			spec := fleetSpec{
				scenario: "server-restart", rows: size(1500, 6000), workers: 3, batch: 10,
				sendDelay: 4 * time.Millisecond, heartbeat: 200 * time.Millisecond, reapTimeout: 2 * time.Second,
				inject: func(f *fleet) int {
					// Restart once the workers are busy.
					for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
						st, err := stats(context.Background(), f.d)
						require.NoError(t, err)
						if st.Done > 0 {
							break
						}
					}
					start := time.Now()
					restartServer(t, e.driver)
					fmt.Printf("chaos: %s restarted in %v\n", e.name, time.Since(start).Round(time.Millisecond))
					return 1
				},
			}
			r := runFleet(t, e, spec)
			require.Zero(t, r.lost)
			require.Zero(t, r.overlaps)
			require.Zero(t, r.dupOther)
		})
	}
}

// envOutage names a command (scripts/restart-servers.sh) that kills or
// restarts the server the DSNs point at: "CMD kill|restart pg|mysql
// SECONDS". The outage scenario runs only when it is set, on servers of
// its own (never the shared ones).
const envOutage = "CLAIMLOCK_CHAOS_OUTAGE"

// outages are the server outages of TestHeldServerOutages: SIGKILLs and
// one clean restart, each followed by SECONDS down before the server starts
// again (its own recovery then adds a few seconds).
var outages = []struct {
	how  string
	down string
}{{"kill", "0.5"}, {"restart", "1"}, {"kill", "3"}, {"kill", "1.5"}}

// runOutages are TestServerOutages' outages by driver. On a quiet 2-core
// machine a SIGKILLed PostgreSQL answers again 5-6 s after the kill (crash
// recovery syncs its data directory) and a MariaDB 3-4 s after a kill or a
// clean shutdown plus the time it is kept down; under load (the two
// engines' scenarios run at once) the outages took 5-11 s.
var runOutages = map[string][]struct {
	how  string
	down string
}{
	"postgres": {{"kill", "0.2"}, {"restart", "3"}, {"kill", "0.5"}, {"kill", "0.2"}},
	"mysql":    {{"kill", "2"}, {"restart", "1.5"}, {"kill", "2.5"}, {"kill", "2"}},
}

// outageReap is TestServerOutages' reap timeout: its outages are about
// 0.6-0.9 of it on a quiet machine, the "up to 0.8". Under load
// they grow past it (1.1-2.1 times an 8 s reap timeout were measured): Run's
// writes outlast such outages too (bounded by ShutdownTimeout), but past
// the reap timeout the scenario is no longer the one asserted. Set
// envOutageReap (a duration) to run it with another, for example one that
// puts a quiet machine's outages (2.5-5 s) near 0.8 of it.
const outageReap = 12 * time.Second

// envOutageReap overrides outageReap.
const envOutageReap = "CLAIMLOCK_CHAOS_OUTAGE_REAP"

// outageReapTimeout is outageReap or envOutageReap's.
func outageReapTimeout(t *testing.T) time.Duration {
	v := os.Getenv(envOutageReap)
	if v == "" {
		return outageReap
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, envOutageReap)
	require.GreaterOrEqual(t, d, 3*time.Second, "%s: the outages alone take 2-5 s", envOutageReap)
	return d
}

// TestServerOutages drains a task with four worker processes running
// claim.Claimer.Run with batches of 20, 50, 200 and 400 rows (long batches:
// at 10 ms a row, a batch of 400 takes longer than a heartbeat interval)
// while the server is SIGKILLed three times and shut down cleanly once,
// each outage meant to be shorter than the reap timeout (outageReap), and
// reports what the outages cost: rows run (sent) more than once, the
// attempts rows ended with, lost and stuck rows. One row in a hundred fails
// its first attempt in the handler; every other row is healthy, and every
// attempt of a healthy row past its first is an outage's. Acks, fails and
// releases outlast the outages, heartbeats land as soon as the server is
// back, and the reaper leaves rows to their holders for as long as it could
// not see the server, so at most 1% of the rows run more than once and no
// healthy row ends with more than one attempt. The engines run at once (a
// server each).
func TestServerOutages(t *testing.T) {
	script := os.Getenv(envOutage)
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			if e.driver == "sqlite" {
				t.Skip("SQLite has no server to restart")
			}
			if script == "" {
				t.Skipf("SKIPPING: set %s to scripts/restart-servers.sh (and the DSNs to its servers) to run it", envOutage)
			}
			t.Parallel() // one server each: their outages do not meet
			const maxAttempts = 5
			rows := size(3000, 20000)
			var longest time.Duration
			reap := outageReapTimeout(t)
			spec := fleetSpec{
				scenario: "server-outages", rows: rows, workers: 4, batch: 50, batches: []int{20, 50, 200, 400},
				run: true, maxAttempts: maxAttempts, failEvery: 100,
				sendDelay: 10 * time.Millisecond, heartbeat: reap / 3, reapTimeout: reap,
				inject: func(f *fleet) int {
					longest = injectOutages(t, f, e, script, rows)
					return len(runOutages[e.driver])
				},
			}
			r := runFleet(t, e, spec)
			line := fmt.Sprintf("chaos: scenario=server-outages engine=%s longest-outage=%v reap-timeout=%v (%.2f)",
				e.name, longest.Round(time.Millisecond), reap, float64(longest)/float64(reap))
			t.Log(line)
			fmt.Println(line)
			require.Zero(t, r.lost)
			require.Zero(t, r.overlaps)
			require.Zero(t, r.run.stuck)
			require.Zero(t, r.run.parked, "no row fails more than once: a parked row is an outage's")
			require.Zero(t, r.run.atMax, "outages moved rows to MaxAttempts")
			require.Equal(t, rows/spec.failEvery, r.run.failing)
			require.LessOrEqual(t, r.run.resent*100, rows, "at most 1%% of the rows run more than once")
			require.Zero(t, r.run.healthyRe, "healthy rows with more than one attempt (highest %d)", r.run.healthyMax)
		})
	}
}

// injectOutages runs runOutages against e's server, each once another
// share of the rows is done, and returns the longest (from the kill or
// shutdown until the server answered again).
func injectOutages(t *testing.T, f *fleet, e engine, script string, rows int) time.Duration {
	which := map[string]string{"postgres": "pg", "mysql": "mysql"}[e.driver]
	var longest time.Duration
	list := runOutages[e.driver]
	for i, o := range list {
		want := int64(rows * (i + 1) / (len(list) + 2))
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			st, err := stats(context.Background(), f.d)
			if err == nil && st.Done >= want {
				break
			}
			require.True(t, time.Now().Before(deadline), "no progress before outage %d", i+1)
		}
		start := time.Now()
		out, err := exec.Command(script, o.how, which, o.down).CombinedOutput()
		require.NoError(t, err, "%s: %s", script, out)
		took := time.Since(start)
		longest = max(longest, took)
		fmt.Printf("chaos: %s %s (down %ss) answering again after %v\n", e.name, o.how, o.down, took.Round(time.Millisecond))
	}
	return longest
}

// TestLeaseContestAcrossRestart: three processes take turns on one lease
// (tasklock, TTL 2 s, KeepAlive) while the server is SIGKILLed and then shut
// down cleanly. Every tenure has its own fence, fences follow the order of
// the tenures, no tenure begins before the one before it ended (the holder's
// context ends before its row is freed or expires), and the fenced write
// holds the largest fence.
func TestLeaseContestAcrossRestart(t *testing.T) {
	script := os.Getenv(envOutage)
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			if e.driver == "sqlite" {
				t.Skip("SQLite has no server to restart")
			}
			if script == "" {
				t.Skipf("SKIPPING: set %s to scripts/restart-servers.sh (and the DSNs to its servers) to run it", envOutage)
			}
			which := map[string]string{"postgres": "pg", "mysql": "mysql"}[e.driver]
			dsn := e.dsn(t)
			d := openT(t, e.driver, dsn)
			setup(t, d, 1) // also the fenced row, fence 0
			const contest = 40 * time.Second
			env := []string{envDriver + "=" + e.driver, envDSN + "=" + dsn, envTTL + "=2s",
				envContest + "=" + contest.String(), envLifetime + "=2m"}
			var holders []*child
			for range 3 {
				holders = append(holders, spawn(t, "leasecontender", env...))
			}
			for _, how := range []string{"kill", "restart"} {
				time.Sleep(4 * time.Second)
				out, err := exec.Command(script, how, which, "1").CombinedOutput()
				require.NoError(t, err, "%s: %s", script, out)
			}
			var held []event
			for _, h := range holders {
				h.wait(t, contest+time.Minute)
				require.NoError(t, h.err)
				for _, ev := range h.Events() {
					if ev.Ev == "held" {
						held = append(held, ev)
					}
				}
			}
			sort.Slice(held, func(i, j int) bool { return held[i].Fence < held[j].Fence })
			require.Greater(t, len(held), 5, "tenures")
			lost := 0
			for i, h := range held {
				if h.Lost {
					lost++
				}
				if i == 0 {
					continue
				}
				p := held[i-1]
				require.Greater(t, h.Fence, p.Fence, "one fence per tenure")
				require.Greater(t, h.T0, p.T0, "fences follow the order of the tenures")
				if h.Owner != p.Owner {
					require.GreaterOrEqual(t, h.T0, p.T, "tenure of fence %d (%s) began %v before tenure %d (%s) ended",
						h.Fence, h.Owner, time.Duration(p.T-h.T0), p.Fence, p.Owner)
				}
			}
			var fence int64
			require.NoError(t, d.sql.QueryRowContext(context.Background(), d.sqlf("SELECT {fence} FROM {chaos_fenced}")).Scan(&fence))
			require.LessOrEqual(t, fence, held[len(held)-1].Fence)
			line := fmt.Sprintf("chaos: scenario=lease-contest-restart engine=%s tenures=%d ended-by-loss=%d fences=%d..%d overlaps=0",
				e.name, len(held), lost, held[0].Fence, held[len(held)-1].Fence)
			t.Log(line)
			fmt.Println(line)
		})
	}
}

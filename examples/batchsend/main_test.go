package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/schedule"
)

// TestMain lets the multi-process test run this program as a child: the
// test binary re-executes itself with BATCHSEND_ARGS set.
func TestMain(m *testing.M) {
	if args := os.Getenv("BATCHSEND_ARGS"); args != "" {
		// As main: SIGTERM ends ctx, and the program stops cleanly.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if err := run(ctx, strings.Split(args, "\x1f"), os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "batchsend:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dbtest.Main(m)
}

type engine struct {
	name string
	// args returns -driver/-dsn for a fresh database.
	args func(t *testing.T) []string
}

func engines() []engine {
	return []engine{
		{"sqlite", func(t *testing.T) []string { return []string{"-driver", "sqlite", "-dsn", dbtest.SQLitePath(t)} }},
		{"postgres", func(t *testing.T) []string { return []string{"-driver", "postgres", "-dsn", dbtest.PostgresDSN(t)} }},
		{"mysql", func(t *testing.T) []string { return []string{"-driver", "mysql", "-dsn", dbtest.MySQLDSN(t)} }},
	}
}

func runReport(t *testing.T, db []string) report {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), append(append([]string{}, db...), "-role", "report"), &out, os.Stderr))
	var r report
	require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
	return r
}

func TestDefaultsRunOnEmbeddedSQLite(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-quiet", "-targets", "300"}, &out, os.Stderr))
	require.Contains(t, out.String(), "duplicate sends: 0")
	require.Contains(t, out.String(), "sent:            300")
}

// TestClaimModeNeverDuplicates and TestNaiveModeDuplicates are the story,
// both halves, on every engine.
func TestClaimModeNeverDuplicates(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db := e.args(t)
			var out bytes.Buffer
			args := append(append([]string{}, db...), "-quiet", "-targets", "400", "-workers", "4", "-batch", "20", "-send-delay", "200us", "-budget", "5ms")
			require.NoError(t, run(context.Background(), args, &out, os.Stderr))
			r := runReport(t, db)
			t.Logf("%s: %+v", e.name, r)
			require.Equal(t, report{Targets: 400, Sent: 400, Sends: 400, TaskStatus: taskDone}, r)
		})
	}
}

func TestNaiveModeDuplicates(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db := e.args(t)
			args := append(append([]string{}, db...), "-quiet", "-mode", "naive", "-targets", "200", "-workers", "2", "-batch", "20", "-send-delay", "1ms", "-budget", "5ms")
			require.NoError(t, run(context.Background(), args, os.Stderr, os.Stderr))
			r := runReport(t, db)
			t.Logf("%s: %+v", e.name, r)
			require.EqualValues(t, 200, r.Sent)
			require.Positive(t, r.DuplicateSends, "the task lock alone lets the next run re-send rows still being sent")
		})
	}
}

func TestBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-mode", "x"}, {"-role", "x"}, {"-ack", "x"}, {"-batch", "0"}, {"-workers", "0"}, {"-budget", "0s"},
		{"-schedule", "-1s"}, {"-schedule", "1s", "-mode", "naive"}, {"-role", "send", "-mode", "naive"},
		{"-role", "worker"}, // SQLite workers need a shared -dsn
		{"-driver", "oracle", "-dsn", "x"},
	} {
		err := run(context.Background(), args, os.Stderr, os.Stderr)
		require.Error(t, err, "%v", args)
	}
}

// TestKilledWorkersAreRecovered starts worker processes, kills some of them
// with SIGKILL mid-run, then runs a reaper and a last worker: every target
// ends sent, nothing stays pending or processing, and a target is sent twice
// only if a killed worker had sent it before dying.
func TestKilledWorkersAreRecovered(t *testing.T) { testKilled(t, "batch") }

// TestKilledTxWorkersLogOnce is TestKilledWorkersAreRecovered with each
// send logged in its ack's transaction (-ack tx): the sends log has exactly
// one row per target however the workers die, while the remote calls made
// outside the transaction may repeat.
func TestKilledTxWorkersLogOnce(t *testing.T) { testKilled(t, "tx") }

func testKilled(t *testing.T, ack string) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db := e.args(t)
			// The claim timeout leaves a live worker's heartbeats (every
			// quarter of it) room to run late on a loaded machine: a live
			// worker whose rows were reaped would repeat its calls too,
			// and the bounds below count only the killed workers'.
			common := append(append([]string{}, db...), "-quiet", "-targets", "600", "-batch", "20", "-send-delay", "2ms", "-budget", "20ms", "-reap-after", "2s", "-ack", ack)
			require.NoError(t, run(context.Background(), append(append([]string{}, common...), "-role", "setup"), os.Stderr, os.Stderr))

			start := func(role string) *exec.Cmd { return startProcess(t, common, "-role", role) }
			var killed []int
			var survivors []*exec.Cmd
			victimSends := 0
			for round := 0; round < 3; round++ {
				victim := start("worker")
				survivor := start("worker")
				survivors = append(survivors, survivor)
				// Kill the victim mid-run: some time after its first
				// logged send (a process takes a while to start on a
				// loaded machine, and a kill before it has sent anything
				// tests nothing), or after 10 s if it never sends.
				mine := fmt.Sprintf("/%d", victim.Process.Pid)
				sent := func() int {
					n := 0
					for _, l := range sendsLog(t, db, 1) {
						if strings.HasSuffix(l.worker, mine) {
							n++
						}
					}
					return n
				}
				for end := time.Now().Add(10 * time.Second); sent() == 0 && time.Now().Before(end); {
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(time.Duration(10+20*round) * time.Millisecond)
				require.NoError(t, victim.Process.Signal(syscall.SIGKILL))
				_ = victim.Wait()
				victimSends += sent()
				killed = append(killed, victim.Process.Pid)
			}
			reaper := start("reaper")
			for _, s := range survivors {
				require.NoError(t, s.Wait(), "a surviving worker failed")
			}
			last := start("worker")
			require.NoError(t, last.Wait())
			require.NoError(t, reaper.Process.Signal(syscall.SIGTERM))
			_ = reaper.Wait()

			r := runReport(t, db)
			t.Logf("%s: killed %d workers after %d sends of theirs: %+v", e.name, len(killed), victimSends, r)
			require.Positive(t, victimSends, "the workers were killed mid-run, after sending rows")
			require.EqualValues(t, 600, r.Targets)
			require.Zero(t, r.Pending)
			require.Zero(t, r.Processing)
			require.EqualValues(t, 600, r.Sent+r.Failed)
			if ack == "tx" {
				require.Zero(t, r.DuplicateSends, "a logged send commits with its ack")
				require.EqualValues(t, r.Sent, r.Sends, "exactly one logged send per sent target")
				require.GreaterOrEqual(t, r.Calls, r.Sends, "every logged send was called")
				require.LessOrEqual(t, r.DuplicateCalls, int64(len(killed)), "a killed worker repeats at most the call it was making")
				return
			}
			// Duplicates are only possible for rows a killed worker sent
			// and never acked: at most one batch per killed worker.
			require.LessOrEqual(t, r.DuplicateSends, int64(len(killed)*20))
			requireDuplicatesFromKilled(t, db, killed)
		})
	}
}

// startProcess starts this program as a child process with args and
// extra.
func startProcess(t *testing.T, args []string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BATCHSEND_ARGS="+strings.Join(append(append([]string{}, args...), extra...), "\x1f"))
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	return cmd
}

// waitFor polls cond every 100 ms until it holds, for at most d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); {
		require.True(t, time.Now().Before(end), "waited %v for %s", d, what)
		time.Sleep(100 * time.Millisecond)
	}
}

// TestScheduledAndManualNeverDuplicate runs the story as a shop would
// deploy it, on the seed's schema as it is: two cron processes run the
// batch-send job through package schedule (-schedule), each fire time once
// across them, over two open tasks, and an operator's manual send of task
// 1 (-role send) starts while the cron runs are sending it. The manual run
// takes no task lease: the row claims alone keep it and the cron runs from
// sending a row twice. Every target of both tasks is sent exactly once, the
// manual and the scheduled sends of task 1 interleave in the sends log,
// the cron runs close both tasks, and the processes stop on SIGTERM.
func TestScheduledAndManualNeverDuplicate(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db := e.args(t)
			const targets = 200
			common := append(append([]string{}, db...), "-quiet", "-targets", fmt.Sprint(targets), "-batch", "10", "-send-delay", "4ms", "-budget", "20ms", "-reap-after", "2s")
			task := func(id int, extra ...string) []string {
				return append(append(append([]string{}, common...), "-task-id", fmt.Sprint(id)), extra...)
			}
			for _, id := range []int{1, 2} {
				require.NoError(t, run(context.Background(), task(id, "-role", "setup"), os.Stderr, os.Stderr))
			}
			crons := []*exec.Cmd{
				startProcess(t, task(1, "-role", "worker", "-schedule", "500ms")),
				startProcess(t, task(1, "-role", "worker", "-schedule", "500ms")),
			}
			defer func() {
				for _, c := range crons {
					_ = c.Process.Kill()
					_ = c.Wait()
				}
			}()
			waitFor(t, time.Minute, "a cron run to send a row of task 1", func() bool { return runReport(t, task(1)).Sends > 0 })
			manual := startProcess(t, task(1, "-role", "send"))
			require.NoError(t, manual.Wait(), "the manual send failed")
			waitFor(t, time.Minute, "the cron runs to close both tasks", func() bool {
				return runReport(t, task(1)).TaskStatus == taskDone && runReport(t, task(2)).TaskStatus == taskDone
			})
			for _, c := range crons {
				require.NoError(t, c.Process.Signal(syscall.SIGTERM))
				require.NoError(t, c.Wait(), "a cron process did not stop cleanly on SIGTERM")
			}
			crons = nil

			for _, id := range []int{1, 2} {
				r := runReport(t, task(id))
				t.Logf("%s: task %d: %+v", e.name, id, r)
				require.Equal(t, report{Targets: targets, Sent: targets, Sends: targets, TaskStatus: taskDone, CronRuns: r.CronRuns, CronWorkers: r.CronWorkers}, r)
				require.GreaterOrEqual(t, r.CronRuns, int64(2), "the job ran on several fire times")
			}
			// The manual send ran at the same time as the cron runs: a
			// cron process logged a send of task 1 between the manual
			// send's first and last.
			manualName := fmt.Sprintf("/%d", manual.Process.Pid)
			first, last, inside := int64(-1), int64(-1), 0
			sends := sendsLog(t, db, 1)
			for _, s := range sends {
				if strings.HasSuffix(s.worker, manualName) {
					if first < 0 {
						first = s.id
					}
					last = s.id
				}
			}
			require.Positive(t, first, "the manual send sent rows of task 1")
			for _, s := range sends {
				if s.id > first && s.id < last && !strings.HasSuffix(s.worker, manualName) {
					inside++
				}
			}
			t.Logf("%s: manual sends %d..%d, %d cron sends between them", e.name, first, last, inside)
			require.Positive(t, inside, "a cron run sent rows of task 1 while the manual send did")
		})
	}
}

// TestKilledCronRunIsRecovered SIGKILLs the cron process that is running
// the scheduled job, mid-run, with -ack tx: the job's lease expires after
// its TTL and the next claim of the job records the killed run as lost;
// the killed run's claimed rows go back to pending after -reap-after (a
// later run's sweep); every target ends sent with exactly one logged send,
// and the remote call repeats at most for the row being called at the
// kill.
func TestKilledCronRunIsRecovered(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db := e.args(t)
			// A run keeps the task for most of the 500 ms between fire
			// times (-budget 400ms, 10 ms a send): the wait below sees a
			// run in progress through polls that each open the database
			// twice, slow on a loaded machine (with a budget of 20 ms and
			// 4 ms sends, runs of about 100 ms in 500 slipped between the
			// polls of a loaded CI run until every row was sent).
			const targets = 300
			common := append(append([]string{}, db...), "-quiet", "-targets", fmt.Sprint(targets), "-batch", "10", "-send-delay", "10ms",
				"-budget", "400ms", "-reap-after", "2s", "-ack", "tx")
			require.NoError(t, run(context.Background(), append(append([]string{}, common...), "-role", "setup"), os.Stderr, os.Stderr))
			crons := map[int]*exec.Cmd{}
			for range 3 {
				c := startProcess(t, common, "-role", "worker", "-schedule", "500ms")
				crons[c.Process.Pid] = c
			}
			defer func() {
				for _, c := range crons {
					_ = c.Process.Kill()
					_ = c.Wait()
				}
			}()
			// Kill the process that is running the job, once it has sent
			// some rows.
			var victim schedule.Record
			var seen report // the last poll's, said if the wait fails
			var runs []string
			t.Cleanup(func() {
				if victim.Worker == "" {
					t.Logf("%s: no run seen in progress; last report %+v, history %v", e.name, seen, runs)
				}
			})
			waitFor(t, time.Minute, "a cron run in progress that has sent rows", func() bool {
				if seen = runReport(t, common); seen.Sends < 20 {
					return false
				}
				runs = runs[:0]
				for _, rec := range cronHistory(t, db) {
					runs = append(runs, string(rec.Status))
					if rec.Status == schedule.Running {
						victim = rec
						return true
					}
				}
				return false
			})
			var pid int
			_, err := fmt.Sscanf(victim.Worker[strings.LastIndex(victim.Worker, "/")+1:], "%d", &pid)
			require.NoError(t, err, "worker %q", victim.Worker)
			c := crons[pid]
			require.NotNil(t, c, "the run's worker %q is one of the cron processes", victim.Worker)
			require.NoError(t, c.Process.Signal(syscall.SIGKILL))
			_ = c.Wait()
			delete(crons, pid)

			waitFor(t, time.Minute, "the cron runs to finish and close the task", func() bool { return runReport(t, common).TaskStatus == taskDone })
			for pid, c := range crons {
				require.NoError(t, c.Process.Signal(syscall.SIGTERM))
				require.NoError(t, c.Wait(), "a cron process did not stop cleanly on SIGTERM")
				delete(crons, pid)
			}
			r := runReport(t, common)
			t.Logf("%s: killed the run of %v: %+v", e.name, victim.FireTime, r)
			require.EqualValues(t, targets, r.Targets)
			require.EqualValues(t, targets, r.Sent)
			require.Zero(t, r.DuplicateSends, "a logged send commits with its ack")
			require.EqualValues(t, targets, r.Sends, "exactly one logged send per target")
			require.LessOrEqual(t, r.DuplicateCalls, int64(1), "the killed run repeats at most the call it was making")
			// The killed run is recorded lost, unless it had just
			// finished when the signal came (then it succeeded).
			for _, rec := range cronHistory(t, db) {
				if rec.FireTime.Equal(victim.FireTime) {
					t.Logf("%s: the killed run: %s", e.name, rec.Status)
					require.Contains(t, []schedule.Status{schedule.Lost, schedule.Succeeded}, rec.Status)
				}
			}
		})
	}
}

// cronHistory returns the scheduled job's history, newest first.
func cronHistory(t *testing.T, dbArgs []string) []schedule.Record {
	t.Helper()
	o, err := parseFlags(append(append([]string{}, dbArgs...), "-role", "report"), os.Stderr)
	require.NoError(t, err)
	a, err := open(context.Background(), o)
	require.NoError(t, err)
	defer a.close()
	s, err := a.newScheduler("test")
	require.NoError(t, err)
	recs, err := s.History(context.Background(), cronJob, time.Time{}, 1000)
	require.NoError(t, err)
	return recs
}

// logged is a row of the sends log.
type logged struct {
	id, target int64
	worker     string
}

// sendsLog returns the sends log of a task in the order of its rows.
func sendsLog(t *testing.T, dbArgs []string, task int) []logged {
	t.Helper()
	o, err := parseFlags(append(append([]string{}, dbArgs...), "-role", "report"), os.Stderr)
	require.NoError(t, err)
	a, err := open(context.Background(), o)
	require.NoError(t, err)
	defer a.close()
	db := a.db
	rows, err := db.SQL.Query(fmt.Sprintf("SELECT %s, %s, %s FROM %s WHERE %s = %d ORDER BY %s",
		db.Q("id"), db.Q("target_id"), db.Q("worker"), db.Q(sendsTable), db.Q("task_id"), task, db.Q("id")))
	require.NoError(t, err)
	defer rows.Close()
	var out []logged
	for rows.Next() {
		var l logged
		require.NoError(t, rows.Scan(&l.id, &l.target, &l.worker))
		out = append(out, l)
	}
	require.NoError(t, rows.Err())
	return out
}

// requireDuplicatesFromKilled checks from the sends log that every send of a
// target except its last came from a killed process.
func requireDuplicatesFromKilled(t *testing.T, dbArgs []string, killed []int) {
	t.Helper()
	sends := map[int64][]string{}
	for _, l := range sendsLog(t, dbArgs, 1) {
		sends[l.target] = append(sends[l.target], l.worker)
	}
	isKilled := func(worker string) bool {
		for _, pid := range killed {
			if strings.HasSuffix(worker, fmt.Sprintf("/%d", pid)) {
				return true
			}
		}
		return false
	}
	for id, ws := range sends {
		for _, w := range ws[:len(ws)-1] {
			require.True(t, isKilled(w), "target %d sent by %v: an earlier send came from a live worker", id, ws)
		}
	}
}

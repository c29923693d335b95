package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestMain lets the multi-process test run this program as a child: the
// test binary re-executes itself with BATCHSEND_ARGS set.
func TestMain(m *testing.M) {
	if args := os.Getenv("BATCHSEND_ARGS"); args != "" {
		if err := run(context.Background(), strings.Split(args, "\x1f"), os.Stdout, os.Stderr); err != nil {
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
			require.Equal(t, report{Targets: 400, Sent: 400, Sends: 400}, r)
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

			start := func(role string) *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "BATCHSEND_ARGS="+strings.Join(append(append([]string{}, common...), "-role", role), "\x1f"))
				cmd.Stderr = os.Stderr
				require.NoError(t, cmd.Start())
				return cmd
			}
			var killed []int
			var survivors []*exec.Cmd
			for round := 0; round < 3; round++ {
				victim := start("worker")
				survivor := start("worker")
				survivors = append(survivors, survivor)
				time.Sleep(time.Duration(150+100*round) * time.Millisecond)
				require.NoError(t, victim.Process.Signal(syscall.SIGKILL))
				_ = victim.Wait()
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
			t.Logf("%s: killed %d workers: %+v", e.name, len(killed), r)
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

// requireDuplicatesFromKilled checks from the sends log that every send of a
// target except its last came from a killed process.
func requireDuplicatesFromKilled(t *testing.T, dbArgs []string, killed []int) {
	t.Helper()
	o, err := parseFlags(append(append([]string{}, dbArgs...), "-role", "report"), os.Stderr)
	require.NoError(t, err)
	a, err := open(context.Background(), o)
	require.NoError(t, err)
	defer a.close()
	db := a.db
	rows, err := db.SQL.Query(fmt.Sprintf("SELECT %s, %s FROM %s ORDER BY %s", db.Q("target_id"), db.Q("worker"), db.Q(sendsTable), db.Q("id")))
	require.NoError(t, err)
	defer rows.Close()
	sends := map[int64][]string{}
	for rows.Next() {
		var id int64
		var w string
		require.NoError(t, rows.Scan(&id, &w))
		sends[id] = append(sends[id], w)
	}
	require.NoError(t, rows.Err())
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

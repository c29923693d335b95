package zombie_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/zombie"
)

// Environment of the helper process.
const (
	envRole  = "ZOMBIE_TEST_ROLE"
	envKind  = "ZOMBIE_TEST_KIND"
	envDSN   = "ZOMBIE_TEST_DSN"
	envTable = "ZOMBIE_TEST_TABLE"
	envStrat = "ZOMBIE_TEST_STRATEGY"
	envLong  = "CLAIMLOCK_LONG"
)

// Crash-test timings: workers heartbeat ten times per reaper timeout.
const (
	crashHeartbeat = 200 * time.Millisecond
	crashTimeout   = 2 * time.Second
)

// TestHelperProcess is not a test: it is the worker process of
// TestCrashRecovery, started by re-executing the test binary with envRole
// set. Without it, it returns at once.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(envRole) != "worker" {
		return
	}
	if err := crashWorker(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// crashWorker plays a user's worker: claim a batch, "send" each row by
// logging it in the sends table, ack the batch, log the ack. It prints "C"
// when it holds a batch and "A" when it acked it, so the parent can kill it
// mid-batch. It exits when nothing is pending or processing.
func crashWorker() error {
	ctx := context.Background()
	e, closeFn, err := openDSN(ctx, os.Getenv(envKind), os.Getenv(envDSN))
	if err != nil {
		return err
	}
	defer closeFn()
	table := os.Getenv(envTable)
	strategy, err := strconv.Atoi(os.Getenv(envStrat))
	if err != nil {
		return err
	}
	cc := claim.Config{
		ClaimTable: dialect.ClaimTable{Table: table, Attempts: "attempts"},
		BatchSize:  10 + rand.IntN(11), Strategy: dialect.Strategy(strategy),
		HeartbeatInterval: crashHeartbeat,
	}
	c, err := claim.New[struct{}](e.d, cc, nil)
	if err != nil {
		return err
	}
	pid := os.Getpid()
	sendQ := e.rebind(fmt.Sprintf("INSERT INTO %s_sends (row_id, pid) VALUES (?, ?)", table))
	ackQ := e.rebind(fmt.Sprintf("INSERT INTO %s_acks (row_id, pid) VALUES (?, ?)", table))
	for {
		b, err := c.Claim(ctx)
		if err != nil {
			return err
		}
		if b.Len() == 0 {
			st, err := c.Stats(ctx)
			if err != nil {
				return err
			}
			if st.Pending == 0 && st.Processing == 0 {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		fmt.Println("C")
		stop := b.KeepAlive(ctx)
		for _, row := range b.Rows() {
			time.Sleep(time.Duration(2+rand.IntN(5)) * time.Millisecond) // the work
			if _, err := e.raw.ExecContext(ctx, sendQ, row.ID, pid); err != nil {
				stop()
				return fmt.Errorf("send %v: %w", row.ID, err)
			}
		}
		if err := b.AckAll(ctx); err != nil {
			stop()
			return fmt.Errorf("ack: %w", err) // a live worker's claim is never lost
		}
		stop()
		for _, row := range b.Rows() {
			if _, err := e.raw.ExecContext(ctx, ackQ, row.ID, pid); err != nil {
				return fmt.Errorf("log ack %v: %w", row.ID, err)
			}
		}
		fmt.Println("A")
	}
}

// worker is one helper process as the parent sees it.
type worker struct {
	cmd     *exec.Cmd
	pid     int
	inBatch atomic.Bool
	exited  chan struct{}
	err     error        // from Wait, valid after exited
	stderr  bytes.Buffer // valid after exited
}

func startWorker(t *testing.T, e *env, table string, s dialect.Strategy) *worker {
	t.Helper()
	w := &worker{exited: make(chan struct{})}
	w.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	w.cmd.Env = append(os.Environ(), envRole+"=worker", envKind+"="+e.kind, envDSN+"="+e.dsn, envTable+"="+table, envStrat+"="+strconv.Itoa(int(s)))
	w.cmd.Stderr = &w.stderr
	out, err := w.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, w.cmd.Start())
	w.pid = w.cmd.Process.Pid
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch sc.Text() {
			case "C":
				w.inBatch.Store(true)
			case "A":
				w.inBatch.Store(false)
			}
		}
		w.err = w.cmd.Wait()
		close(w.exited)
	}()
	return w
}

func logTableDef(table string) store.TableDef {
	return store.TableDef{
		Table: table,
		Columns: []store.ColumnDef{
			{Name: "id", Type: store.TypeSerial, NotNull: true},
			{Name: "row_id", Type: store.TypeInt, NotNull: true},
			{Name: "pid", Type: store.TypeInt, NotNull: true},
		},
		PrimaryKey: []string{"id"},
	}
}

// TestCrashRecovery: worker processes are killed with SIGKILL mid-batch and
// replaced; a reaper returns the dead workers' rows and the survivors finish
// them. Every row ends done (or parked), none is acked twice, and the only
// rows sent twice are rows whose earlier sends came from killed processes.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			for _, s := range engineStrategies(t, en) {
				t.Run(s.String(), func(t *testing.T) {
					t.Parallel()
					crashRecovery(t, open(t, en), s)
				})
			}
		})
	}
}

func crashRecovery(t *testing.T, e *env, s dialect.Strategy) {
	rows, workers, wantKills := 1500, 4, 12
	if os.Getenv(envLong) == "1" {
		rows, workers, wantKills = 20000, 6, 60
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cc := jobsConfig(15)
	cc.Strategy = s
	cs := createTable(t, e, cc, false)
	for _, suffix := range []string{"_sends", "_acks"} {
		ddl, err := store.CreateTableDDL(e.d, logTableDef(cc.Table+suffix))
		require.NoError(t, err)
		require.NoError(t, store.ExecDDL(ctx, e.d, ddl))
	}
	insertRows(t, e, cc.Table, "PENDING", rows, 500)

	var reaped atomic.Int64
	var reapErrs []error
	var mu sync.Mutex
	cc.MaxAttempts = 10 // the reaper's parking rule; the workers' own configs keep the default
	r, err := zombie.New(e.d, cc, zombie.Config{Timeout: crashTimeout, Observer: sweeps(func(res zombie.Result) { reaped.Add(res.Returned + res.Parked) }, func(err error) { mu.Lock(); reapErrs = append(reapErrs, err); mu.Unlock() })})
	require.NoError(t, err)
	rctx, stopReaper := context.WithCancel(ctx)
	reaperDone := make(chan error, 1)
	go func() { reaperDone <- r.Run(rctx, 100*time.Millisecond) }()

	var all []*worker
	killed := map[int]bool{}
	live := map[*worker]bool{}
	t.Cleanup(func() {
		for _, w := range all {
			_ = w.cmd.Process.Kill()
			<-w.exited
		}
	})
	for range workers {
		w := startWorker(t, e, cc.Table, s)
		all = append(all, w)
		live[w] = true
	}
	// Kill a random worker that holds a batch, every ~100 ms, and start
	// a replacement, until wantKills kills.
	for len(killed) < wantKills {
		require.Less(t, time.Since(start), 2*time.Minute, "could not kill %d workers mid-batch", wantKills)
		st, err := cs.Stats(ctx, nil)
		require.NoError(t, err)
		require.NotZero(t, st.Pending, "all rows were claimed after only %d kills; add rows", len(killed))
		var busy []*worker
		for w := range live {
			select {
			case <-w.exited:
				t.Fatalf("worker %d exited early: %v\n%s", w.pid, w.err, w.stderr.String())
			default:
			}
			if w.inBatch.Load() {
				busy = append(busy, w)
			}
		}
		if len(busy) == 0 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		victim := busy[rand.IntN(len(busy))]
		require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
		<-victim.exited
		killed[victim.pid] = true
		delete(live, victim)
		w := startWorker(t, e, cc.Table, s)
		all = append(all, w)
		live[w] = true
		time.Sleep(time.Duration(30+rand.IntN(50)) * time.Millisecond)
	}
	// The survivors finish; each exits once nothing is pending or
	// processing (which needs the reaper to return the dead rows).
	for w := range live {
		select {
		case <-w.exited:
		case <-ctx.Done():
			t.Fatalf("worker %d did not finish", w.pid)
		}
		require.NoError(t, w.err, "worker %d: %s", w.pid, w.stderr.String())
	}
	stopReaper()
	require.NoError(t, <-reaperDone)
	require.Empty(t, reapErrs)

	st, err := cs.Stats(ctx, nil)
	require.NoError(t, err)
	require.Zero(t, st.Pending)
	require.Zero(t, st.Processing)
	require.EqualValues(t, rows, st.Done+st.Failed, "every row done or parked")
	require.Positive(t, reaped.Load(), "the reaper returned the dead workers' rows")

	acks := map[int64]int{}
	q, err := e.raw.QueryContext(ctx, fmt.Sprintf("SELECT row_id FROM %s_acks", cc.Table))
	require.NoError(t, err)
	for q.Next() {
		var id int64
		require.NoError(t, q.Scan(&id))
		acks[id]++
		require.Equal(t, 1, acks[id], "row %d acked twice", id)
	}
	require.NoError(t, q.Err())
	q.Close()

	sends := map[int64][]int{}
	q, err = e.raw.QueryContext(ctx, fmt.Sprintf("SELECT row_id, pid FROM %s_sends ORDER BY id", cc.Table))
	require.NoError(t, err)
	for q.Next() {
		var id int64
		var pid int
		require.NoError(t, q.Scan(&id, &pid))
		sends[id] = append(sends[id], pid)
	}
	require.NoError(t, q.Err())
	q.Close()
	resent := 0
	for id, pids := range sends {
		for _, pid := range pids[:len(pids)-1] {
			require.True(t, killed[pid], "row %d sent by %v: an earlier send came from live process %d", id, pids, pid)
		}
		if len(pids) > 1 {
			resent++
		}
	}
	require.GreaterOrEqual(t, int64(len(sends)), st.Done, "every done row was sent")
	t.Logf("%s %s: %d rows, %d processes (%d killed), %d rows reaped, %d rows sent more than once, %d parked, %d dialect retries, %v",
		e.kind, s, rows, len(all), len(killed), reaped.Load(), resent, st.Failed, store.Retries(e.d), time.Since(start).Round(time.Millisecond))
}

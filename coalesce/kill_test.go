package coalesce_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/zombie"
)

// A child process is this test binary re-run with envRole set: a flusher
// that prints a line after each fold's writes, before its commit, and
// pauses there a little, so that a SIGKILL lands before, during and after
// folds' transactions.
const (
	envRole   = "COALESCE_TEST_ROLE"
	envEngine = "COALESCE_TEST_ENGINE"
	envDSN    = "COALESCE_TEST_DSN"
	// envKeysPerTx is the flusher child's FlusherConfig.KeysPerTx.
	envKeysPerTx = "COALESCE_TEST_KEYS_PER_TX"
)

// Kill-test timings: the child heartbeats ten times per reaper timeout.
const (
	killHeartbeat = 100 * time.Millisecond
	killTimeout   = time.Second
)

// childMain runs a child's role and exits; it returns false in the test
// process.
func childMain() bool {
	if os.Getenv(envRole) == "" {
		return false
	}
	if err := runChild(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

func runChild() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c, closeFn, err := testengine.Connect(ctx, os.Getenv(envEngine), os.Getenv(envDSN), 4, dialect.Options{})
	if err != nil {
		return err
	}
	defer closeFn()
	co, err := coalesce.New(c.Dialect, c.DB, coalesce.Config{})
	if err != nil {
		return err
	}
	if os.Getenv(envRole) == "acceptor" {
		return acceptForever(ctx, co)
	}
	sum := sumFold(c.Dollar)
	keysPerTx, _ := strconv.Atoi(os.Getenv(envKeysPerTx))
	f, err := co.Flusher(coalesce.FlusherConfig{
		BatchSize: 3, KeysPerTx: keysPerTx, PollMax: 20 * time.Millisecond, HeartbeatInterval: killHeartbeat,
		Fold: func(ctx context.Context, tx *sql.Tx, key string, chs []coalesce.Record) error {
			if err := sum(ctx, tx, key, chs); err != nil {
				return err
			}
			fmt.Println("folded", key, len(chs))
			time.Sleep(5 * time.Millisecond)
			return nil
		},
	})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	return f.Run(ctx)
}

// acceptForever accepts changes from four goroutines until the process is
// killed, printing a line per receipt: half for one hot key, each
// goroutine a source of its own with increasing sequences, every fifth
// change sent twice.
func acceptForever(ctx context.Context, co *coalesce.Coalescer) error {
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			for i := 1; ; i++ {
				key := "hot"
				if i%2 == 0 {
					key = "k" + strconv.Itoa(i%7)
				}
				ch := coalesce.Change{Key: key, EventID: fmt.Sprintf("a%d-%d-%d", os.Getpid(), w, i),
					Source: fmt.Sprintf("a%d-%d", os.Getpid(), w), Seq: int64(i), Payload: []byte(strconv.Itoa(i % 13))}
				for range 1 + min(1, i%5) {
					if _, err := co.Accept(ctx, ch); err != nil {
						errs <- err
						return
					}
				}
				fmt.Println("accepted", key)
			}
		}()
	}
	return <-errs
}

// startChild starts a child on c's database in role (flusher or
// acceptor), with the environment's extra variables env, and returns it
// with a channel of its output lines.
func startChild(t *testing.T, c *testengine.Conn, role string, env ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envEngine+"="+c.Engine, envDSN+"="+c.DSN)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // the parent only counts; never block the child
			}
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, lines
}

// TestKillFlusher: while writers accept changes, a flusher child is
// SIGKILLed after a random number of folds, twice (a second child is
// started after the first dies; the first folds each key in a transaction
// of its own, the second three keys per transaction); a reaper returns the keys the dead
// children held, and an in-process flusher finishes: every change is
// folded exactly once.
func TestKillFlusher(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		co := newCoalescer(t, c, coalesce.Config{})
		s := newSent()
		writersDone := make(chan struct{})
		go func() {
			defer close(writersDone)
			writeLoad(t, ctx, co, "kill", 4, 30, s)
		}()
		for round, kills := range []int{3, 8} {
			cmd, lines := startChild(t, c, "flusher", envKeysPerTx+"="+strconv.Itoa(1+2*round))
			folded := 0
			timeout := time.After(60 * time.Second)
		wait:
			for {
				select {
				case l, ok := <-lines:
					require.True(t, ok, "child %d exited early", round)
					if len(l) > 6 && l[:6] == "folded" {
						if folded++; folded >= kills {
							break wait
						}
					}
				case <-timeout:
					t.Fatalf("child %d folded only %d keys in 60 s", round, folded)
				}
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			t.Logf("%s: child %d killed after %d folds", c.Engine, round, folded)
		}
		<-writersDone
		// The dead children's keys: processing until a reaper returns them.
		f := newFlusher(t, c, co, coalesce.FlusherConfig{HeartbeatInterval: killHeartbeat})
		reaper, err := zombie.New(c.Dialect, f.ClaimConfig(), zombie.Config{Timeout: killTimeout})
		require.NoError(t, err)
		deadline := time.Now().Add(30 * time.Second)
		reaped := int64(0)
		for count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE status = 'PROCESSING'") > 0 {
			require.True(t, time.Now().Before(deadline), "keys still processing")
			res, err := reaper.Sweep(ctx)
			require.NoError(t, err)
			reaped += res.Returned
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s: reaper returned %d keys", c.Engine, reaped)
		drain(t, ctx, c, f)
		verify(t, c, s)
	})
}

// TestKillAcceptor: acceptor children, with a flusher running, are
// SIGKILLed after a random number of receipts (some between a change's
// commit and its key's dirty mark, maybe); every change the changes table
// holds is then folded exactly once, the stranded ones through Unstrand.
func TestKillAcceptor(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		co := newCoalescer(t, c, coalesce.Config{})
		f := newFlusher(t, c, co, coalesce.FlusherConfig{PollMax: 20 * time.Millisecond, StrandAfter: 300 * time.Millisecond})
		done := make(chan error, 1)
		go func() { done <- f.Run(ctx) }()
		for round, kills := range []int{40, 90} {
			cmd, lines := startChild(t, c, "acceptor")
			accepted := 0
			timeout := time.After(60 * time.Second)
		wait:
			for {
				select {
				case l, ok := <-lines:
					require.True(t, ok, "acceptor %d exited early", round)
					if strings.HasPrefix(l, "accepted") {
						if accepted++; accepted >= kills {
							break wait
						}
					}
				case <-timeout:
					t.Fatalf("acceptor %d accepted only %d changes in 60 s", round, accepted)
				}
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			t.Logf("%s: acceptor %d killed after %d receipts; unfolded changes of keys not dirty now: %d", c.Engine, round, accepted,
				count(t, c, `SELECT COUNT(*) FROM coalesce_changes c LEFT JOIN coalesce_keys k ON k.change_key = c.change_key
					WHERE c.folded_at IS NULL AND (k.change_key IS NULL OR k.status = 'DONE')`))
		}
		// Run's Unstrand finds changes whose mark the kill prevented.
		deadline := time.Now().Add(30 * time.Second)
		for count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE folded_at IS NULL") > 0 {
			require.True(t, time.Now().Before(deadline), "changes left unfolded")
			time.Sleep(50 * time.Millisecond)
		}
		waitDrained(t, ctx, co, 30*time.Second)
		cancel()
		require.NoError(t, <-done)
		// The expected state, from the changes table itself.
		s := newSent()
		rows, err := c.DB.Query("SELECT change_key, payload FROM coalesce_changes")
		require.NoError(t, err)
		for rows.Next() {
			var key string
			var p []byte
			require.NoError(t, rows.Scan(&key, &p))
			d, err := strconv.ParseInt(string(p), 10, 64)
			require.NoError(t, err)
			s.add(key, d)
		}
		require.NoError(t, rows.Err())
		rows.Close()
		require.NotEmpty(t, s.number)
		verify(t, c, s)
	})
}

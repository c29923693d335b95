package coalesce_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
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
	sum := sumFold(c.Dollar)
	f, err := co.Flusher(coalesce.FlusherConfig{
		BatchSize: 3, PollMax: 20 * time.Millisecond, HeartbeatInterval: killHeartbeat,
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

// startChild starts a flusher child on c's database and returns it with
// a channel of its output lines.
func startChild(t *testing.T, c *testengine.Conn) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=flusher", envEngine+"="+c.Engine, envDSN+"="+c.DSN)
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
// started after the first dies); a reaper returns the keys the dead
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
			cmd, lines := startChild(t, c)
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

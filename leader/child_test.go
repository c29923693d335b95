package leader_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/leader"
	"github.com/claimlock/claimlock/tasklock"
)

// Child processes are this test binary re-run with envRole set; they
// report what they do as JSON lines on stdout.
const (
	envRole   = "LEADER_TEST_ROLE"
	envEngine = "LEADER_TEST_ENGINE"
	envDSN    = "LEADER_TEST_DSN"
	envTTL    = "LEADER_TEST_TTL"
)

// event is one line a child writes. T is the local wall clock in
// nanoseconds (every process runs on this host).
type event struct {
	Ev    string `json:"ev"`
	Pid   int    `json:"pid"`
	Fence int64  `json:"fence,omitempty"`
	OK    bool   `json:"ok,omitempty"`
	T     int64  `json:"t"`
	T0    int64  `json:"t0,omitempty"` // a write: when it was issued
	Err   string `json:"err,omitempty"`
}

var emitMu sync.Mutex

func emit(ev event) {
	ev.Pid, ev.T = os.Getpid(), time.Now().UnixNano()
	b, _ := json.Marshal(ev)
	emitMu.Lock()
	defer emitMu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}

// childMain runs a child's role and reports true; false in the test
// process.
func childMain() bool {
	if os.Getenv(envRole) == "" {
		return false
	}
	if err := runLeader(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// The fenced register the leaders write through: a write is accepted only
// with a fence at least the register's, and then logged.
const (
	regTable = "fence_reg"
	logTable = "fence_log"
)

// runLeader competes for leadership; while leading it writes through the
// fenced register every 20 ms and reports each write.
func runLeader() error {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c, closeFn, err := testengine.Connect(ctx, os.Getenv(envEngine), os.Getenv(envDSN), 4, dialect.Options{})
	if err != nil {
		return err
	}
	defer closeFn()
	ttl, _ := time.ParseDuration(os.Getenv(envTTL))
	el, err := leader.New(c.Dialect, leader.Config{Table: tasklock.KeyTable(leaseTable), Name: "the-election", TTL: ttl, RetryInterval: ttl / 10})
	if err != nil {
		return err
	}
	emit(event{Ev: "ready"})
	return el.Run(ctx, func(ctx context.Context, term leader.Term) error {
		emit(event{Ev: "lead", Fence: term.Fence})
		for ctx.Err() == nil {
			t0 := time.Now().UnixNano()
			ok, err := fencedWrite(c, term.Fence)
			ev := event{Ev: "write", Fence: term.Fence, OK: ok, T0: t0}
			if err != nil {
				ev.Err = err.Error()
			}
			emit(ev)
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		emit(event{Ev: "lost", Fence: term.Fence, Err: context.Cause(ctx).Error()})
		return nil
	})
}

// fencedWrite moves the register to fence unless it holds a greater one,
// and logs the write, in one transaction. It does not use the leader's
// context: a real target sees a write whenever it arrives.
func fencedWrite(c *testengine.Conn, fence int64) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tx, err := c.DB.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, testengine.Rebind(`UPDATE `+regTable+` SET fence = ?, n = n + 1 WHERE k = 1 AND fence <= ?`, c.Dollar), fence, fence)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, testengine.Rebind(`INSERT INTO `+logTable+` (fence, pid) VALUES (?, ?)`, c.Dollar), fence, os.Getpid()); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// child is a running child process and its events.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	events []event
}

func spawn(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envRole+"=leader"), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				c.mu.Lock()
				c.events = append(c.events, ev)
				c.mu.Unlock()
			}
		}
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-c.done
	})
	return c
}

func (c *child) Events() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event(nil), c.events...)
}

func (c *child) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(s))
}

package schedule_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/claimlock/claimlock/schedule"
)

// Child processes are this test binary re-run with envRole set; they
// report what they do as JSON lines on stdout.
const (
	envRole   = "SCHEDULE_TEST_ROLE"
	envEngine = "SCHEDULE_TEST_ENGINE"
	envDSN    = "SCHEDULE_TEST_DSN"
	envPeriod = "SCHEDULE_TEST_PERIOD"
	envWork   = "SCHEDULE_TEST_WORK"
	envTTL    = "SCHEDULE_TEST_TTL"
)

// event is one line a child writes.
type event struct {
	Ev    string `json:"ev"`
	Pid   int    `json:"pid"`
	Fire  int64  `json:"fire,omitempty"` // µs
	Fence int64  `json:"fence,omitempty"`
	Err   string `json:"err,omitempty"`
}

// childMain runs a child's role and reports true; false in the test
// process.
func childMain() bool {
	role := os.Getenv(envRole)
	if role == "" {
		return false
	}
	if err := runChild(role); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

var emitMu sync.Mutex

func emit(ev event) {
	ev.Pid = os.Getpid()
	b, _ := json.Marshal(ev)
	emitMu.Lock()
	defer emitMu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}

func envDur(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// runChild runs a scheduler whose one job reports its start and end and
// works for envWork, until SIGTERM.
func runChild(role string) error {
	if os.Getenv("SCHEDULE_TEST_VERBOSE") != "1" {
		slog.SetDefault(slog.New(slog.DiscardHandler))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c, closeFn, err := testengine.Connect(ctx, os.Getenv(envEngine), os.Getenv(envDSN), 4, dialect.Options{})
	if err != nil {
		return err
	}
	defer closeFn()
	switch role {
	case "runner":
		s, err := schedule.New(c.Dialect, schedule.Config{TTL: envDur(envTTL, time.Second), PollInterval: 20 * time.Millisecond})
		if err != nil {
			return err
		}
		work := envDur(envWork, 0)
		if err := s.Add(schedule.Job{Name: "job", Schedule: schedule.Every(envDur(envPeriod, time.Second)), Func: func(ctx context.Context, r *schedule.Run) error {
			emit(event{Ev: "start", Fire: r.FireTime().UnixMicro(), Fence: r.Fence()})
			t := time.NewTimer(work)
			defer t.Stop()
			select {
			case <-ctx.Done():
				emit(event{Ev: "cut", Fire: r.FireTime().UnixMicro(), Err: context.Cause(ctx).Error()})
				return context.Cause(ctx)
			case <-t.C:
			}
			emit(event{Ev: "end", Fire: r.FireTime().UnixMicro()})
			return nil
		}}); err != nil {
			return err
		}
		emit(event{Ev: "ready"})
		return s.Run(ctx)
	}
	return fmt.Errorf("unknown role %q", role)
}

// child is a running child process and its events.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	events []event
}

// spawn starts a child in role with env added.
func spawn(t *testing.T, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envRole+"="+role), env...)
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
		_, _ = io.Copy(io.Discard, out)
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

// Events returns the events read so far.
func (c *child) Events() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event(nil), c.events...)
}

// pid returns the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// stop ends the child with SIGTERM and waits for it.
func (c *child) stop(t *testing.T) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Errorf("child %d did not stop", c.pid())
	}
}

func childEnv(c *testengine.Conn, extra ...string) []string {
	return append([]string{envEngine + "=" + c.Engine, envDSN + "=" + c.DSN}, extra...)
}

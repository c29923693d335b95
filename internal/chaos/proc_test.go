package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// Child processes are this test binary re-executed with envRole set; their
// settings travel in the other CHAOS_* variables.
const (
	envRole      = "CHAOS_ROLE"
	envDriver    = "CHAOS_DRIVER"
	envDSN       = "CHAOS_DSN"
	envBatch     = "CHAOS_BATCH"
	envSendDelay = "CHAOS_SEND_DELAY"
	envHeartbeat = "CHAOS_HEARTBEAT"
	envLifetime  = "CHAOS_LIFETIME"
	envTTL       = "CHAOS_TTL"
	envAckBatch  = "CHAOS_ACK_BATCH"
	envTxAck     = "CHAOS_TX_ACK"
)

func TestMain(m *testing.M) {
	// Dropped connections make the MySQL driver log every bad connection.
	_ = gomysql.SetLogger(log.New(io.Discard, "", 0))
	if role := os.Getenv(envRole); role != "" {
		if err := runRole(role); err != nil {
			fmt.Fprintln(os.Stderr, "chaos child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dbtest.Main(m)
}

// event is one JSON line a child writes to its stdout. Lines are written
// unbuffered, so everything a killed child wrote before its death is read.
type event struct {
	Ev  string  `json:"ev"`
	Pid int     `json:"pid,omitempty"`
	Tok string  `json:"tok,omitempty"`
	IDs []int64 `json:"ids,omitempty"`
	// T0 and T are wall-clock nanoseconds before the call and after it
	// returned (all processes run on this host).
	T0    int64  `json:"t0,omitempty"`
	T     int64  `json:"t,omitempty"`
	Fence int64  `json:"fence,omitempty"`
	Owner string `json:"owner,omitempty"`
	N     int64  `json:"n,omitempty"`
	OK    bool   `json:"ok,omitempty"`
	Lost  bool   `json:"lost,omitempty"`
	Err   string `json:"err,omitempty"`
}

// emitter writes events as JSON lines.
type emitter struct {
	mu sync.Mutex
	w  io.Writer
}

func (e *emitter) emit(ev event) {
	ev.Pid = os.Getpid()
	b, _ := json.Marshal(ev)
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

func runRole(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), envDuration(envLifetime, time.Minute))
	defer cancel()
	out := &emitter{w: os.Stdout}
	switch role {
	case "worker":
		return workerRole(ctx, out)
	case "runworker":
		return runWorkerRole(ctx, out)
	case "leasecontender":
		return leaseContenderRole(ctx, out)
	case "leaseholder":
		return leaseHolderRole(ctx, out)
	case "frozenclaimer":
		return frozenClaimerRole(ctx, out)
	case "freezesender":
		return freezeSenderRole(ctx, out)
	case "heldworker":
		return heldWorkerRole(ctx, out)
	case "heldrunner":
		return heldRunnerRole(ctx, out)
	}
	return fmt.Errorf("unknown role %q", role)
}

// child is a running child process and the events it wrote.
type child struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{} // closed when its stdout is drained and it exited
	err  error

	mu     sync.Mutex
	events []event
	notify chan struct{} // receives (non-blocking) after each event
}

// spawn starts the test binary in role with env (KEY=VALUE) added.
func spawn(t *testing.T, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envRole+"="+role), env...)
	cmd.Stderr = &prefixWriter{t: t}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{}), notify: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue // a line cut short by SIGKILL
			}
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
			select {
			case c.notify <- struct{}{}:
			default:
			}
		}
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// prefixWriter sends a child's stderr (slog warnings, errors) to the test
// log.
type prefixWriter struct{ t *testing.T }

func (w *prefixWriter) Write(p []byte) (int, error) {
	if os.Getenv("CLAIMLOCK_CHAOS_VERBOSE") == "1" {
		w.t.Logf("child: %s", p)
	}
	return len(p), nil
}

// Events returns a copy of the events read so far.
func (c *child) Events() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event(nil), c.events...)
}

// waitEvent waits until the child wrote an event named ev (counting from
// index from) and returns it.
func (c *child) waitEvent(t *testing.T, ev string, from int, limit time.Duration) (event, int) {
	t.Helper()
	deadline := time.After(limit)
	for {
		evs := c.Events()
		for i := from; i < len(evs); i++ {
			if evs[i].Ev == ev {
				return evs[i], i
			}
		}
		select {
		case <-c.notify:
		case <-c.done:
			evs = c.Events()
			for i := from; i < len(evs); i++ {
				if evs[i].Ev == ev {
					return evs[i], i
				}
			}
			require.FailNow(t, "child exited without the event", "want %q from pid %d: %v; events %+v", ev, c.pid, c.err, evs)
		case <-deadline:
			require.FailNow(t, "timed out waiting for a child event", "want %q from pid %d; events %+v", ev, c.pid, evs)
		}
	}
}

// wait waits for the child's exit.
func (c *child) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(limit):
		require.FailNow(t, "child did not exit", "pid %d after %v", c.pid, limit)
	}
}

// exited reports whether the child has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

package schedtest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Event is one JSON line a child process writes on its stdout. T is the
// local wall clock in nanoseconds (the processes share a host).
type Event struct {
	Ev    string `json:"ev"`
	Pid   int    `json:"pid"`
	Fire  int64  `json:"fire,omitempty"` // µs since the epoch
	Fence int64  `json:"fence,omitempty"`
	T     int64  `json:"t"`
	Err   string `json:"err,omitempty"`
}

var emitMu sync.Mutex

// Emit writes ev as a line of stdout, unbuffered, so that everything a
// killed child wrote before its death is read.
func Emit(ev Event) {
	ev.Pid, ev.T = os.Getpid(), time.Now().UnixNano()
	b, _ := json.Marshal(ev)
	emitMu.Lock()
	defer emitMu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}

// Child is a running child process and the events it wrote.
type Child struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	events []Event
}

// Spawn starts the test binary again with env added (one of them naming
// the role the child's TestMain runs), with no test to run; it is killed
// when the test ends.
func Spawn(t testing.TB, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &Child{cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev Event
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

// Events returns a copy of the events read so far.
func (c *Child) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}

// Pid returns the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Signal sends s to the child.
func (c *Child) Signal(t testing.TB, s syscall.Signal) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(s))
}

// Stop ends the child with SIGTERM and waits for it to exit.
func (c *Child) Stop(t testing.TB) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Errorf("child %d did not stop within 10 s of SIGTERM", c.Pid())
	}
}

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

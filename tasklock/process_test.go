package tasklock_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

// Environment of the re-executed test binary in TestMultiProcess.
const (
	envHelper  = "TASKLOCK_HELPER_PROCESS"
	envEngine  = "TASKLOCK_HELPER_ENGINE"
	envDSN     = "TASKLOCK_HELPER_DSN"
	envLog     = "TASKLOCK_HELPER_LOG"
	envRunTime = "TASKLOCK_HELPER_RUN_MS"
)

// TestHelperProcess is a child of TestMultiProcess: it contends for one key
// until its run time is up, appending "enter" and "exit" lines (fence, pid)
// to a shared file opened with O_APPEND. Each line is one write, so the
// file's order is a total order of events across processes: "enter" is
// written after Acquire returned, "exit" before Release is called.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		t.Skip("helper process for TestMultiProcess")
	}
	e, ok := engineByName(os.Getenv(envEngine))
	require.True(t, ok)
	ms, err := strconv.Atoi(os.Getenv(envRunTime))
	require.NoError(t, err)
	d := e.openDSN(t, os.Getenv(envDSN))
	k, err := tasklock.New(d, tasklock.Config{
		Table: tasklock.KeyTable(leaseTable), TTL: 5 * time.Second,
		PollInterval: time.Millisecond, MaxPollInterval: 5 * time.Millisecond,
	})
	require.NoError(t, err)
	f, err := os.OpenFile(os.Getenv(envLog), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	pid := os.Getpid()
	stop := time.Now().Add(time.Duration(ms) * time.Millisecond)
	ctx := context.Background()
	for time.Now().Before(stop) {
		wctx, cancel := context.WithDeadline(ctx, stop)
		l, err := k.AcquireWait(wctx, "shared")
		cancel()
		if err != nil {
			require.ErrorIs(t, err, dialect.ErrLeaseHeld)
			continue
		}
		_, err = fmt.Fprintf(f, "enter %d %d\n", l.Fence(), pid)
		require.NoError(t, err)
		time.Sleep(time.Millisecond)
		_, err = fmt.Fprintf(f, "exit %d %d\n", l.Fence(), pid)
		require.NoError(t, err)
		ok, err := l.Release(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	}
}

// Two or more OS processes contending for one key never hold it at the
// same time, and fences increase across them.
func TestMultiProcess(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		const procs = 3
		dsn := e.dsn(t)
		d := e.openDSN(t, dsn)
		require.NoError(t, tasklock.CreateTable(ctxT(t), d, leaseTable))
		logPath := t.TempDir() + "/holds.log"
		require.NoError(t, os.WriteFile(logPath, nil, 0o600))

		cmds := make([]*exec.Cmd, procs)
		outs := make([]*strings.Builder, procs)
		for i := range cmds {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), envHelper+"=1", envEngine+"="+e.name, envDSN+"="+dsn,
				envLog+"="+logPath, envRunTime+"=2000")
			outs[i] = &strings.Builder{}
			cmd.Stdout, cmd.Stderr = outs[i], outs[i]
			require.NoError(t, cmd.Start())
			cmds[i] = cmd
		}
		for i, cmd := range cmds {
			require.NoError(t, cmd.Wait(), "child %d:\n%s", i, outs[i])
		}

		f, err := os.Open(logPath)
		require.NoError(t, err)
		defer f.Close()
		sc := bufio.NewScanner(f)
		var (
			lines    int
			holder   string // pid inside, "" when free
			fence    int64
			lastSeen int64
			pids     = map[string]int{}
		)
		for sc.Scan() {
			lines++
			var kind, pid string
			var fn int64
			_, err := fmt.Sscanf(sc.Text(), "%s %d %s", &kind, &fn, &pid)
			require.NoError(t, err, "line %d: %q", lines, sc.Text())
			switch kind {
			case "enter":
				require.Empty(t, holder, "line %d: process %s entered while %s was inside", lines, pid, holder)
				require.Greater(t, fn, lastSeen, "line %d: fence did not increase", lines)
				holder, fence, lastSeen = pid, fn, fn
				pids[pid]++
			case "exit":
				require.Equal(t, holder, pid, "line %d", lines)
				require.Equal(t, fence, fn, "line %d", lines)
				holder = ""
			default:
				t.Fatalf("line %d: %q", lines, sc.Text())
			}
		}
		require.NoError(t, sc.Err())
		require.Empty(t, holder)
		require.GreaterOrEqual(t, len(pids), 2, "at least two processes held the lease: %v", pids)
		t.Logf("%s: %d holds by %d processes", e.name, lines/2, len(pids))
	})
}

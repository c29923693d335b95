package schedule_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/schedtest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/schedule"
)

// Child processes are this test binary re-run with envRole set.
const (
	envRole   = "SCHEDULE_TEST_ROLE"
	envEngine = "SCHEDULE_TEST_ENGINE"
	envDSN    = "SCHEDULE_TEST_DSN"
	envPeriod = "SCHEDULE_TEST_PERIOD"
	envWork   = "SCHEDULE_TEST_WORK"
	envTTL    = "SCHEDULE_TEST_TTL"
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

func envDur(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// runChild runs Scheduler.Run with one job, "job", which reports its start
// and end and works for envWork, until SIGTERM.
func runChild() error {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c, closeFn, err := testengine.Connect(ctx, os.Getenv(envEngine), os.Getenv(envDSN), 4, dialect.Options{})
	if err != nil {
		return err
	}
	defer closeFn()
	s, err := schedule.New(c.Dialect, schedule.Config{TTL: envDur(envTTL, time.Second), PollInterval: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	work := envDur(envWork, 0)
	if err := s.Add(schedule.Job{Name: "job", Schedule: schedule.Every(envDur(envPeriod, time.Second)), Func: func(ctx context.Context, r *schedule.Run) error {
		schedtest.Emit(schedtest.Event{Ev: "start", Fire: r.FireTime().UnixMicro(), Fence: r.Fence()})
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		schedtest.Emit(schedtest.Event{Ev: "end", Fire: r.FireTime().UnixMicro()})
		return nil
	}}); err != nil {
		return err
	}
	schedtest.Emit(schedtest.Event{Ev: "ready"})
	return s.Run(ctx)
}

func childEnv(c *testengine.Conn, extra ...string) []string {
	return append([]string{envRole + "=runner", envEngine + "=" + c.Engine, envDSN + "=" + c.DSN}, extra...)
}

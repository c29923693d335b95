package claimcron_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/claimlock/claimlock/contrib/robfigcron"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/schedtest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/schedule"
)

// A child process is this test binary re-run with envRole set: a robfig
// cron ticking schedtest.FleetJob through claimcron.
const (
	envRole   = "CLAIMCRON_TEST_ROLE"
	envEngine = "CLAIMCRON_TEST_ENGINE"
	envDSN    = "CLAIMCRON_TEST_DSN"
	envSkew   = "CLAIMCRON_TEST_SKEW"
)

// TestMain runs a child's role, or the tests with the default logger
// quiet.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	if os.Getenv(envRole) != "" {
		if err := runChild(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dbtest.Main(m)
}

// runChild runs a cron whose clock is envSkew ahead until SIGTERM.
func runChild() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c, closeFn, err := testengine.Connect(ctx, os.Getenv(envEngine), os.Getenv(envDSN), 4, dialect.Options{})
	if err != nil {
		return err
	}
	defer closeFn()
	skew, err := time.ParseDuration(os.Getenv(envSkew))
	if err != nil {
		return err
	}
	s, err := schedule.New(c.Dialect, schedule.Config{TTL: schedtest.FleetTTL, PollInterval: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	sched := schedule.Every(schedtest.FleetPeriod)
	if err := s.Add(schedule.Job{Name: schedtest.FleetJob, Schedule: sched}); err != nil {
		return err
	}
	cr := cron.New(cron.WithSeconds())
	// The cron sees the schedule through its skewed clock.
	cr.Schedule(schedtest.Skewed(sched, skew), claimcron.Wrap(s, schedtest.FleetJob)(fleetJob()))
	cr.Start()
	schedtest.Emit(schedtest.Event{Ev: "ready"})
	<-ctx.Done()
	<-cr.Stop().Done()
	return nil
}

// fleetJob reports its start and end and works schedtest.FleetWork.
func fleetJob() claimcron.Func {
	return func(ctx context.Context, r *schedule.Run) error {
		schedtest.Emit(schedtest.Event{Ev: "start", Fire: r.FireTime().UnixMicro(), Fence: r.Fence()})
		t := time.NewTimer(schedtest.FleetWork)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		schedtest.Emit(schedtest.Event{Ev: "end", Fire: r.FireTime().UnixMicro()})
		return nil
	}
}

package claimgocron_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"

	"github.com/claimlock/claimlock/contrib/gocron"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/schedtest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/schedule"
)

// A child process is this test binary re-run with envRole set: a gocron
// scheduler ticking schedtest.FleetJob through the Locker.
const (
	envRole   = "CLAIMGOCRON_TEST_ROLE"
	envEngine = "CLAIMGOCRON_TEST_ENGINE"
	envDSN    = "CLAIMGOCRON_TEST_DSN"
	envSkew   = "CLAIMGOCRON_TEST_SKEW"
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

// skewedClock is the real clock as a host whose clock is skew ahead reads
// it: gocron computes its ticks on Now and waits for them with timers, so
// its ticks come skew early.
type skewedClock struct {
	clockwork.Clock
	skew time.Duration
}

func (c skewedClock) Now() time.Time                  { return c.Clock.Now().Add(c.skew) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// newGocron returns a gocron scheduler whose clock is skew ahead, with the
// Locker, and the job every second (crontab with seconds) running fn.
func newGocron(s *schedule.Scheduler, job string, skew time.Duration, fn any) (gocron.Scheduler, error) {
	locker := claimgocron.NewLocker(s)
	g, err := gocron.NewScheduler(gocron.WithClock(skewedClock{clockwork.NewRealClock(), skew}), gocron.WithDistributedLocker(locker), gocron.WithLocation(time.UTC))
	if err != nil {
		return nil, err
	}
	def, opts, err := locker.CronJob(job, "* * * * * *", true, time.UTC)
	if err != nil {
		return nil, err
	}
	if _, err := g.NewJob(def, gocron.NewTask(fn), opts...); err != nil {
		return nil, err
	}
	return g, nil
}

// runChild runs a gocron scheduler whose clock is envSkew ahead until
// SIGTERM; its job reports its start and end and works
// schedtest.FleetWork.
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
	// The Locker gives gocron no run: the job reports the fire time the
	// run history gives it (the latest run of this process).
	g, err := newGocron(s, schedtest.FleetJob, skew, func(ctx context.Context) error {
		fire, fence, ok := currentRun(ctx, s)
		if !ok {
			return fmt.Errorf("no running run")
		}
		schedtest.Emit(schedtest.Event{Ev: "start", Fire: fire, Fence: fence})
		t := time.NewTimer(schedtest.FleetWork)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		schedtest.Emit(schedtest.Event{Ev: "end", Fire: fire})
		return nil
	})
	if err != nil {
		return err
	}
	g.Start()
	schedtest.Emit(schedtest.Event{Ev: "ready"})
	<-ctx.Done()
	return g.Shutdown()
}

// currentRun reads the job's newest run from its history: the one this
// process holds, since gocron calls the job only after the Locker claimed
// it and the job's lease lets no other run start meanwhile.
func currentRun(ctx context.Context, s *schedule.Scheduler) (fire, fence int64, ok bool) {
	recs, err := s.History(ctx, schedtest.FleetJob, time.Time{}, 1)
	if err != nil || len(recs) == 0 || recs[0].Status != schedule.Running {
		return 0, 0, false
	}
	return recs[0].FireTime.UnixMicro(), recs[0].Fence, true
}

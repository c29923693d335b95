package claimprom_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	claimprom "github.com/claimlock/claimlock/contrib/prometheus"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/obstest"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/schedule"
)

// A scheduler observed by Metrics: runs started and finished by job and
// result, pauses as a gauge, a lost run as lost; a failed schedule
// statement counts as an error of its operation.
func TestScheduleEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := obstest.SQLite(t)
	require.NoError(t, schedule.CreateTables(ctx, d, "", ""))

	m := claimprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	s, err := schedule.New(d, schedule.Config{TTL: 10 * time.Second, Observer: m})
	require.NoError(t, err)
	require.NoError(t, s.Add(schedule.Job{Name: "idle", Schedule: schedule.Every(time.Hour), Func: func(context.Context, *schedule.Run) error { return nil }}))
	require.NoError(t, s.Pause(ctx, "idle"))
	require.EqualValues(t, 1, series(t, reg)["claimlock_schedule_paused{job=idle,runs_table="+schedule.DefaultRunsTable+"}"])
	require.NoError(t, s.Resume(ctx, "idle"))
	ok, bad := obstest.ScheduleRuns(t, s)

	got := series(t, reg)
	tbl := ",runs_table=" + schedule.DefaultRunsTable + "}"
	require.EqualValues(t, 0, got["claimlock_schedule_paused{job=idle"+tbl], "resumed")
	require.EqualValues(t, ok, got["claimlock_schedule_runs_started_total{job=ok"+tbl], "%v", got)
	require.EqualValues(t, bad, got["claimlock_schedule_runs_started_total{job=bad"+tbl], "%v", got)
	require.EqualValues(t, ok, got["claimlock_schedule_runs_finished_total{job=ok,result=succeeded"+tbl], "%v", got)
	require.EqualValues(t, bad, got["claimlock_schedule_runs_finished_total{job=bad,result=failed"+tbl], "%v", got)
	_, failedOK := got["claimlock_schedule_runs_finished_total{job=ok,result=failed"+tbl]
	require.False(t, failedOK, "no failed run of the job that succeeds")

	// A run whose lease was lost, and a claim that failed: what a
	// scheduler reports for them (schedule's own tests make them happen).
	m.Observe(ctx, observe.Event{Source: observe.SourceSchedule, Op: schedule.OpFinish, Table: "runs", Key: "lost",
		Err: fmt.Errorf("finish: %w", dialect.ErrLeaseLost), Rows: 1})
	m.Observe(ctx, observe.Event{Source: observe.SourceSchedule, Op: schedule.OpClaim, Table: "runs", Key: "lost",
		Err: errors.New("connection refused")})
	got = series(t, reg)
	require.EqualValues(t, 1, got["claimlock_schedule_runs_finished_total{job=lost,result=lost,runs_table=runs}"], "%v", got)
	require.EqualValues(t, 1, got["claimlock_errors_total{op=schedule.claim,table=runs}"], "%v", got)
	_, started := got["claimlock_schedule_runs_started_total{job=lost,runs_table=runs}"]
	require.False(t, started, "a failed claim started no run")
}

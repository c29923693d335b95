package claimprom_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	claimprom "github.com/claimlock/claimlock/contrib/prometheus"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/obstest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

type row struct{ Payload string }

func fields(r *row) []any { return []any{&r.Payload} }

// gauges gathers reg and returns the value of every gauge sample, keyed by
// name and labels.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetGauge() == nil {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

// A scripted run on every engine: the counters equal what was claimed,
// acked, failed, lost, reaped and parked, and the collector's gauges equal
// Stats for the watched scope and for the whole table.
func TestScriptedRun(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := obstest.New(t, e, 5, 2)
			m := claimprom.New()
			reg := prometheus.NewPedanticRegistry()
			require.NoError(t, reg.Register(m))
			cfg := f.Config
			cfg.Observer = m
			require.NoError(t, m.Watch(f.Dialect, cfg))
			require.NoError(t, m.WatchTable(f.Dialect, cfg))
			require.ErrorIs(t, m.Watch(f.Dialect, cfg), dialect.ErrInvalidConfig, "watched twice")

			c, err := claim.New(f.Dialect, cfg, fields)
			require.NoError(t, err)
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			ids := b.IDs()
			require.NoError(t, b.Ack(ctx, ids[0], ids[1]))
			require.NoError(t, b.Fail(ctx, ids[2], claim.Park(errors.New("smtp 550")))) // parked at once
			f.TakeFrom(t, b.Token(), ids[3])
			require.ErrorIs(t, b.Ack(ctx, ids[3]), dialect.ErrClaimLost)
			_, err = b.Release(ctx)
			require.NoError(t, err)
			dead, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, dead.Len())
			time.Sleep(700 * time.Millisecond)
			r, err := zombie.New(f.Dialect, cfg, zombie.Config{Timeout: 200 * time.Millisecond, Observer: m})
			require.NoError(t, err)
			_, err = r.Sweep(ctx)
			require.NoError(t, err)
			_, err = c.Claim(ctx) // two rows in flight at the scrape
			require.NoError(t, err)

			require.NoError(t, tasklock.CreateTable(ctx, f.Dialect, "leases"))
			require.NoError(t, m.InitLeases(tasklock.KeyTable("leases")))
			k, err := tasklock.New(f.Dialect, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: 5 * time.Second, Observer: m})
			require.NoError(t, err)
			l, err := k.Acquire(ctx, "nightly")
			require.NoError(t, err)
			_, err = k.Acquire(ctx, "nightly")
			require.ErrorIs(t, err, dialect.ErrLeaseHeld)
			_, err = k.ForceRelease(ctx, "nightly")
			require.NoError(t, err)
			require.ErrorIs(t, l.Renew(ctx), dialect.ErrLeaseLost)

			require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP claimlock_rows_acked_total Rows acked (set to done).
# TYPE claimlock_rows_acked_total counter
claimlock_rows_acked_total{table="jobs"} 2
# HELP claimlock_rows_claimed_total Rows claimed.
# TYPE claimlock_rows_claimed_total counter
claimlock_rows_claimed_total{table="jobs"} 9
# HELP claimlock_rows_failed_total Rows failed (retried or parked).
# TYPE claimlock_rows_failed_total counter
claimlock_rows_failed_total{table="jobs"} 1
# HELP claimlock_rows_lost_total Rows an ack, fail or snooze found no longer held by its claim.
# TYPE claimlock_rows_lost_total counter
claimlock_rows_lost_total{table="jobs"} 1
# HELP claimlock_rows_parked_total Rows parked with the failed status, by a fail or by the reaper.
# TYPE claimlock_rows_parked_total counter
claimlock_rows_parked_total{table="jobs"} 1
# HELP claimlock_rows_reaped_total Stale rows the reaper returned to pending.
# TYPE claimlock_rows_reaped_total counter
claimlock_rows_reaped_total{table="jobs"} 2
# HELP claimlock_leases_acquired_total Leases acquired.
# TYPE claimlock_leases_acquired_total counter
claimlock_leases_acquired_total{lease_table="leases"} 1
# HELP claimlock_leases_lost_total Leases lost (taken over, force-released, or past their local deadline).
# TYPE claimlock_leases_lost_total counter
claimlock_leases_lost_total{lease_table="leases"} 1
# HELP claimlock_errors_total Failed operations.
# TYPE claimlock_errors_total counter
claimlock_errors_total{op="ack",table="jobs"} 0
claimlock_errors_total{op="claim",table="jobs"} 0
claimlock_errors_total{op="fail",table="jobs"} 0
claimlock_errors_total{op="heartbeat",table="jobs"} 0
claimlock_errors_total{op="release",table="jobs"} 0
claimlock_errors_total{op="snooze",table="jobs"} 0
claimlock_errors_total{op="sweep",table="jobs"} 0
claimlock_errors_total{op="lease.acquire",table="leases"} 0
claimlock_errors_total{op="lease.finish",table="leases"} 0
claimlock_errors_total{op="lease.force_release",table="leases"} 0
claimlock_errors_total{op="lease.release",table="leases"} 0
claimlock_errors_total{op="lease.renew",table="leases"} 1
claimlock_errors_total{op="lease_sweep",table="leases"} 0
`), "claimlock_rows_acked_total", "claimlock_rows_claimed_total", "claimlock_rows_failed_total", "claimlock_rows_lost_total",
				"claimlock_rows_parked_total", "claimlock_rows_reaped_total", "claimlock_leases_acquired_total",
				"claimlock_leases_lost_total", "claimlock_errors_total"))
			require.Equal(t, 1, testutil.CollectAndCount(m, "claimlock_claim_duration_seconds"), "one histogram series per table")
			require.EqualValues(t, 3, claimCount(t, reg), "three claims observed")

			got := gauges(t, reg)
			statsCfg := cfg
			statsCfg.Columns, statsCfg.Observer = nil, nil
			sc, err := claim.New[struct{}](f.Dialect, statsCfg, nil)
			require.NoError(t, err)
			for _, w := range []struct {
				scope string
				stats func(context.Context) (claim.Stats, error)
			}{{"task_id=42", sc.Stats}, {"", sc.TableStats}} {
				want, err := w.stats(ctx)
				require.NoError(t, err)
				l := "scope=" + w.scope + ",table=jobs"
				require.Equal(t, 1.0, got["claimlock_stats_up{"+l+"}"])
				for status, n := range map[string]int64{"pending": want.Pending, "processing": want.Processing, "done": want.Done, "failed": want.Failed, "other": want.Other} {
					require.EqualValues(t, n, got["claimlock_rows{scope="+w.scope+",status="+status+",table=jobs}"], "%s %s", w.scope, status)
				}
				require.InDelta(t, want.OldestPending.Seconds(), got["claimlock_oldest_pending_age_seconds{"+l+"}"], 1.0)
				require.InDelta(t, want.OldestProcessing.Seconds(), got["claimlock_oldest_processing_age_seconds{"+l+"}"], 1.0)
			}
			require.EqualValues(t, 2, got["claimlock_rows{scope=task_id=42,status=done,table=jobs}"])
			require.EqualValues(t, 1, got["claimlock_rows{scope=task_id=42,status=failed,table=jobs}"])
			require.EqualValues(t, 2, got["claimlock_rows{scope=task_id=42,status=processing,table=jobs}"])
			require.EqualValues(t, 2, got["claimlock_rows{scope=,status=pending,table=jobs}"], "task 7's rows")
			require.Greater(t, got["claimlock_oldest_pending_age_seconds{scope=,table=jobs}"], 5.0, "task 7's rows were created 6 and 7 s ago")
		})
	}
}

// A table that cannot be read reports claimlock_stats_up 0 and no counts;
// the scrape itself succeeds.
func TestStatsDown(t *testing.T) {
	t.Parallel()
	f := obstest.New(t, testengine.All[0], 1, 0)
	m := claimprom.New(claimprom.WithStatsTimeout(time.Second))
	cfg := f.Config
	cfg.Table = "missing"
	require.NoError(t, m.Watch(f.Dialect, cfg))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	got := gauges(t, reg)
	require.Equal(t, map[string]float64{"claimlock_stats_up{scope=task_id=42,table=missing}": 0}, got)
	require.ErrorIs(t, m.Watch(nil, cfg), dialect.ErrInvalidConfig)
	cfg.ScopeValues = nil
	require.ErrorIs(t, m.Watch(f.Dialect, cfg), dialect.ErrInvalidConfig)
}

// claimCount returns the sample count of the claim latency histogram.
func claimCount(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "claimlock_claim_duration_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// series gathers reg and returns every sample's value (a histogram's
// count), keyed by name and labels.
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// A watched table's event series exist at zero before its first event, so
// that rate() sees the first claim and an alert on absence means absence.
func TestSeriesBeforeFirstEvent(t *testing.T) {
	t.Parallel()
	f := obstest.New(t, testengine.All[0], 3, 0)
	m := claimprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	cfg := f.Config
	cfg.Observer = m
	require.NoError(t, m.Watch(f.Dialect, cfg))

	got := series(t, reg)
	for _, name := range []string{"claimed", "acked", "failed", "requeued", "lost", "reaped", "parked"} {
		v, ok := got["claimlock_rows_"+name+"_total{table=jobs}"]
		require.True(t, ok, "claimlock_rows_%s_total{table=jobs} exists before any event", name)
		require.Zero(t, v)
	}
	v, ok := got["claimlock_claim_duration_seconds{table=jobs}"]
	require.True(t, ok, "the claim latency histogram exists before the first claim")
	require.Zero(t, v)
	for _, op := range []string{"claim", "ack", "fail", "snooze", "heartbeat", "release", "sweep"} {
		v, ok := got["claimlock_errors_total{op="+op+",table=jobs}"]
		require.True(t, ok, "claimlock_errors_total{op=%s} exists before any error", op)
		require.Zero(t, v)
	}

	// The first claim moves the series from 0, which rate() sees.
	c, err := claim.New(f.Dialect, cfg, fields)
	require.NoError(t, err)
	_, err = c.Claim(context.Background())
	require.NoError(t, err)
	got = series(t, reg)
	require.EqualValues(t, 3, got["claimlock_rows_claimed_total{table=jobs}"])
	require.EqualValues(t, 1, got["claimlock_claim_duration_seconds{table=jobs}"])
}

// A lease table's series exist at zero once InitLeases names it; InitClaims
// does the same for a claim table a process observes without watching its
// Stats. Both validate their argument.
func TestInitSeries(t *testing.T) {
	t.Parallel()
	m := claimprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	require.NoError(t, m.InitLeases(tasklock.TaskTableNoOwner("xxx_task")))
	require.NoError(t, m.InitLeases(tasklock.TaskTableNoOwner("xxx_task")), "idempotent")
	require.NoError(t, m.InitClaims(obstest.Config()))
	require.ErrorIs(t, m.InitLeases(dialect.LeaseTable{Table: "x; DROP"}), dialect.ErrInvalidConfig)
	require.ErrorIs(t, m.InitClaims(claim.Config{}), dialect.ErrInvalidConfig)

	got := series(t, reg)
	want := map[string]float64{}
	for _, k := range []string{
		"claimlock_leases_acquired_total{lease_table=xxx_task}", "claimlock_leases_lost_total{lease_table=xxx_task}",
		"claimlock_errors_total{op=lease.acquire,table=xxx_task}", "claimlock_errors_total{op=lease.renew,table=xxx_task}",
		"claimlock_errors_total{op=lease.release,table=xxx_task}", "claimlock_errors_total{op=lease.finish,table=xxx_task}",
		"claimlock_errors_total{op=lease.force_release,table=xxx_task}", "claimlock_errors_total{op=lease_sweep,table=xxx_task}",
		"claimlock_claim_duration_seconds{table=jobs}",
	} {
		want[k] = 0
	}
	for _, name := range []string{"claimed", "acked", "failed", "requeued", "lost", "reaped", "parked"} {
		want["claimlock_rows_"+name+"_total{table=jobs}"] = 0
	}
	for _, op := range []string{"claim", "ack", "fail", "snooze", "heartbeat", "release", "sweep"} {
		want["claimlock_errors_total{op="+op+",table=jobs}"] = 0
	}
	require.Equal(t, want, got, "every series at zero, no Stats series (nothing watched)")
}

// Without a CreatedAt column the age of the oldest pending row is unknown:
// it has no series (a 0 would read as an empty, healthy queue); with one it
// is the age on the database clock.
func TestOldestPendingNeedsCreatedAt(t *testing.T) {
	t.Parallel()
	f := obstest.New(t, testengine.All[0], 2, 1)
	m := claimprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	without := f.Config
	without.CreatedAt = ""
	require.NoError(t, m.Watch(f.Dialect, without))
	require.NoError(t, m.WatchTable(f.Dialect, f.Config))

	got := gauges(t, reg)
	_, ok := got["claimlock_oldest_pending_age_seconds{scope=task_id=42,table=jobs}"]
	require.False(t, ok, "no oldest pending age without a CreatedAt column")
	require.Equal(t, 2.0, got["claimlock_rows{scope=task_id=42,status=pending,table=jobs}"], "the other gauges are there")
	_, ok = got["claimlock_oldest_processing_age_seconds{scope=task_id=42,table=jobs}"]
	require.True(t, ok)
	require.InDelta(t, 3, got["claimlock_oldest_pending_age_seconds{scope=,table=jobs}"], 2, "rows created 1 to 3 s ago")
}

package claimprom

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/schedule"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// DefaultStatsTimeout bounds the Stats reads of one scrape when
// [WithStatsTimeout] is not given.
const DefaultStatsTimeout = 5 * time.Second

// Metrics collects claimlock metrics. It implements prometheus.Collector
// and [observe.Observer], for the events of claim, tasklock, zombie,
// schedule and coalesce; it is safe for concurrent use.
type Metrics struct {
	timeout time.Duration

	mu      sync.Mutex
	targets []target

	rows, oldestPending, oldestProcessing, up *prometheus.Desc

	claimDur                                               *prometheus.HistogramVec
	claimed, acked, failed, requeued, lost, reaped, parked *prometheus.CounterVec
	leasesAcquired, leasesLost, errs                       *prometheus.CounterVec

	runsStarted, runsFinished, skips *prometheus.CounterVec
	paused                           *prometheus.GaugeVec

	accepts, folds, changesFolded, keysRequeued *prometheus.CounterVec
}

var (
	_ prometheus.Collector = (*Metrics)(nil)
	_ observe.Observer     = (*Metrics)(nil)
)

// target is one table (and scope) whose Stats a scrape reads.
type target struct {
	// stats reads the counts: the claimer's Stats, or its TableStats
	// for a whole table.
	stats func(context.Context) (claim.Stats, error)
	table string
	scope string
	// created: the table has a CreatedAt column, so the age of its
	// oldest pending row is known.
	created bool
}

// Option configures [New].
type Option func(*Metrics)

// WithStatsTimeout bounds the Stats reads of one scrape (all watched
// targets together); default [DefaultStatsTimeout].
func WithStatsTimeout(d time.Duration) Option {
	return func(m *Metrics) { m.timeout = d }
}

// New builds a Metrics watching nothing yet.
func New(opts ...Option) *Metrics {
	m := &Metrics{timeout: DefaultStatsTimeout}
	for _, o := range opts {
		o(m)
	}
	ts := []string{"table", "scope"}
	m.rows = prometheus.NewDesc("claimlock_rows", "Rows of a claim table by status, from Stats.", append(ts, "status"), nil)
	m.oldestPending = prometheus.NewDesc("claimlock_oldest_pending_age_seconds",
		"Age of the oldest pending row by its CreatedAt column, on the database clock (0 without pending rows; no series for a table without the column).", ts, nil)
	m.oldestProcessing = prometheus.NewDesc("claimlock_oldest_processing_age_seconds",
		"Age of the oldest processing row's claim or last heartbeat, on the database clock (0 without processing rows).", ts, nil)
	m.up = prometheus.NewDesc("claimlock_stats_up", "1 when the last Stats read of the table and scope succeeded.", ts, nil)
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m.claimDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "claimlock_claim_duration_seconds", Help: "Latency of claims, including the wait for a claim slot.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"table"})
	m.claimed = counter("claimlock_rows_claimed_total", "Rows claimed.", "table")
	m.acked = counter("claimlock_rows_acked_total", "Rows acked (set to done).", "table")
	m.failed = counter("claimlock_rows_failed_total", "Rows failed (retried or parked).", "table")
	m.requeued = counter("claimlock_rows_requeued_total", "Rows an ack sent back to pending because their version moved.", "table")
	m.lost = counter("claimlock_rows_lost_total", "Rows an ack, fail or snooze found no longer held by its claim.", "table")
	m.reaped = counter("claimlock_rows_reaped_total", "Stale rows the reaper returned to pending.", "table")
	m.parked = counter("claimlock_rows_parked_total", "Rows parked with the failed status, by a fail or by the reaper.", "table")
	m.leasesAcquired = counter("claimlock_leases_acquired_total", "Leases acquired.", "lease_table")
	m.leasesLost = counter("claimlock_leases_lost_total", "Leases lost (taken over, force-released, or past their local deadline).", "lease_table")
	m.errs = counter("claimlock_errors_total", "Failed operations.", "table", "op")
	m.runsStarted = counter("claimlock_schedule_runs_started_total", "Fire times this process claimed and ran.", "runs_table", "job")
	m.runsFinished = counter("claimlock_schedule_runs_finished_total",
		"Runs this process ended, by result: succeeded, failed (the job's error or the record's) or lost (the run's lease was lost).",
		"runs_table", "job", "result")
	m.skips = counter("claimlock_schedule_skips_total", "Ranges of fire times recorded as skipped (missed past their grace, or due while the job was paused).", "runs_table", "job")
	m.paused = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "claimlock_schedule_paused",
		Help: "1 when this process last paused the job, 0 when it last resumed it (no series before either)."}, []string{"runs_table", "job"})
	m.accepts = counter("claimlock_coalesce_accepts_total",
		"Changes offered to a coalescer, by result: recorded, duplicate, stale, overloaded or error.", "changes_table", "result")
	m.folds = counter("claimlock_coalesce_folds_total", "Fold transactions that wrote a key's state (one state write each).", "keys_table")
	m.changesFolded = counter("claimlock_coalesce_changes_folded_total",
		"Changes folded into state writes: divided by claimlock_coalesce_folds_total, the coalescing ratio.", "keys_table")
	m.keysRequeued = counter("claimlock_coalesce_requeued_total", "Keys a fold's ack sent back to pending because changes arrived during the flush.", "keys_table")
	return m
}

// Watch adds cc's table, restricted to cc's scope (cc.ScopeValues), to the
// tables whose Stats each scrape reads, and creates the table's event
// series at zero as [Metrics.InitClaims] does. cc is validated as
// [claim.New] would; errors wrap [dialect.ErrInvalidConfig].
func (m *Metrics) Watch(d dialect.Dialect, cc claim.Config) error {
	return m.watch(d, cc, false)
}

// WatchTable adds cc's whole table (every scope, label scope="") to the
// tables whose Stats each scrape reads, and creates the table's event
// series at zero as [Metrics.InitClaims] does. A whole-table count reads
// every row: keep it for small tables or long scrape intervals.
func (m *Metrics) WatchTable(d dialect.Dialect, cc claim.Config) error {
	return m.watch(d, cc, true)
}

func (m *Metrics) watch(d dialect.Dialect, cc claim.Config, all bool) error {
	if d == nil {
		return fmt.Errorf("claimprom: watch: %w: nil dialect", dialect.ErrInvalidConfig)
	}
	spec, err := cc.Resolve()
	if err != nil {
		return fmt.Errorf("claimprom: watch: %w", err)
	}
	// The counts read no payload column: the claimer needs no row type.
	cc.Columns, cc.Observer = nil, nil
	c, err := claim.New[struct{}](d, cc, nil)
	if err != nil {
		return fmt.Errorf("claimprom: watch: %w", err)
	}
	t := target{stats: c.TableStats, table: spec.Table, created: spec.CreatedAt != ""}
	if !all && len(cc.ScopeValues) > 0 {
		t.stats = c.Stats
		t.scope = ScopeString(spec.Scope, cc.ScopeValues)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.targets {
		if o.table == t.table && o.scope == t.scope {
			return fmt.Errorf("claimprom: watch: %w: table %s scope %q is already watched", dialect.ErrInvalidConfig, t.table, t.scope)
		}
	}
	m.targets = append(m.targets, t)
	m.initClaims(spec.Table)
	return nil
}

// claimErrorOps are the operations on a claim table whose failures
// claimlock_errors_total counts.
var claimErrorOps = []string{
	claim.OpClaim.Name(), claim.OpAck.Name(), claim.OpFail.Name(), claim.OpSnooze.Name(),
	claim.OpHeartbeat.Name(), claim.OpRelease.Name(), zombie.OpSweep.Name(),
}

// leaseErrorOps are the operations on a lease table whose failures
// claimlock_errors_total counts.
var leaseErrorOps = []string{
	"lease." + tasklock.OpAcquire.Name(), "lease." + tasklock.OpRenew.Name(), "lease." + tasklock.OpRelease.Name(),
	"lease." + tasklock.OpFinish.Name(), "lease." + tasklock.OpForceRelease.Name(), zombie.OpLeaseSweep.Name(),
}

// InitClaims creates the event series of cc's claim table at zero: the row
// counters, the claim latency histogram and claimlock_errors_total for each
// operation of a claimer and a reaper. A series that first appears with
// its first event hides that event from rate() and increase(), and an
// alert on a series' absence cannot tell "nothing happened" from "nothing
// is reported"; [Metrics.Watch] and [Metrics.WatchTable] do this too, so
// call InitClaims for the tables a process observes without watching their
// Stats. It is idempotent; errors wrap [dialect.ErrInvalidConfig].
func (m *Metrics) InitClaims(cc claim.Config) error {
	spec, err := cc.Resolve()
	if err != nil {
		return fmt.Errorf("claimprom: init claims: %w", err)
	}
	m.initClaims(spec.Table)
	return nil
}

func (m *Metrics) initClaims(table string) {
	m.claimDur.WithLabelValues(table)
	for _, c := range []*prometheus.CounterVec{m.claimed, m.acked, m.failed, m.requeued, m.lost, m.reaped, m.parked} {
		c.WithLabelValues(table)
	}
	for _, op := range claimErrorOps {
		m.errs.WithLabelValues(table, op)
	}
}

// InitLeases creates the series of lease table lt at zero:
// claimlock_leases_acquired_total, claimlock_leases_lost_total, and
// claimlock_errors_total for each lease operation and the lease reaper's
// sweep. The lease table is known to Metrics only through this call (or
// its first event): call it for every lease table a process locks in. It
// is idempotent; errors wrap [dialect.ErrInvalidConfig].
func (m *Metrics) InitLeases(lt dialect.LeaseTable) error {
	if err := lt.Validate(); err != nil {
		return fmt.Errorf("claimprom: init leases: %w", err)
	}
	m.leasesAcquired.WithLabelValues(lt.Table)
	m.leasesLost.WithLabelValues(lt.Table)
	for _, op := range leaseErrorOps {
		m.errs.WithLabelValues(lt.Table, op)
	}
	return nil
}

// ScopeString renders scope columns and values as "col=value,col=value",
// the scope label ("" for a whole table).
func ScopeString(cols []string, values []any) string {
	var b strings.Builder
	for i, v := range values {
		if i > 0 {
			b.WriteByte(',')
		}
		if i < len(cols) {
			b.WriteString(cols[i] + "=")
		}
		fmt.Fprint(&b, v)
	}
	return b.String()
}

func (m *Metrics) vecs() []prometheus.Collector {
	return []prometheus.Collector{m.claimDur, m.claimed, m.acked, m.failed, m.requeued, m.lost, m.reaped, m.parked,
		m.leasesAcquired, m.leasesLost, m.errs, m.runsStarted, m.runsFinished, m.skips, m.paused,
		m.accepts, m.folds, m.changesFolded, m.keysRequeued}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.vecs() {
		c.Describe(ch)
	}
	ch <- m.rows
	ch <- m.oldestPending
	ch <- m.oldestProcessing
	ch <- m.up
}

// Collect implements prometheus.Collector: the event counters, then one
// Stats read per watched target, one after the other, within the stats
// timeout. A target whose read fails reports claimlock_stats_up 0 and no
// counts.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.vecs() {
		c.Collect(ch)
	}
	m.mu.Lock()
	targets := append([]target(nil), m.targets...)
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	for _, t := range targets {
		st, err := t.stats(ctx)
		if err != nil {
			ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, 0, t.table, t.scope)
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, 1, t.table, t.scope)
		for _, s := range []struct {
			status string
			n      int64
		}{{"pending", st.Pending}, {"processing", st.Processing}, {"done", st.Done}, {"failed", st.Failed}, {"other", st.Other}} {
			ch <- prometheus.MustNewConstMetric(m.rows, prometheus.GaugeValue, float64(s.n), t.table, t.scope, s.status)
		}
		if t.created {
			// Without a creation time the age is unknown: no series,
			// rather than a 0 that reads as a healthy queue.
			ch <- prometheus.MustNewConstMetric(m.oldestPending, prometheus.GaugeValue, st.OldestPending.Seconds(), t.table, t.scope)
		}
		ch <- prometheus.MustNewConstMetric(m.oldestProcessing, prometheus.GaugeValue, st.OldestProcessing.Seconds(), t.table, t.scope)
	}
}

// Observe counts an event of claim, tasklock, zombie, schedule or
// coalesce; events of other sources are ignored.
func (m *Metrics) Observe(_ context.Context, e observe.Event) {
	switch e.Source {
	case observe.SourceSchedule:
		m.observeSchedule(e)
	case observe.SourceCoalesce:
		m.observeCoalesce(e)
	case observe.SourceClaim:
		m.observeClaim(e)
	case observe.SourceTasklock:
		m.observeLease(e)
	case observe.SourceZombie:
		m.observeSweep(e)
	}
}

// observeClaim counts a claimer's operation.
func (m *Metrics) observeClaim(e observe.Event) {
	if e.Err != nil {
		m.errs.WithLabelValues(e.Table, e.Op.Name()).Inc()
		if e.Op == claim.OpClaim {
			return
		}
	}
	add := func(v *prometheus.CounterVec, n int) {
		if n > 0 {
			v.WithLabelValues(e.Table).Add(float64(n))
		}
	}
	switch e.Op {
	case claim.OpClaim:
		m.claimDur.WithLabelValues(e.Table).Observe(e.Duration.Seconds())
		add(m.claimed, e.Claimed)
	case claim.OpAck:
		add(m.acked, e.Acked)
		add(m.requeued, e.Requeued)
	case claim.OpFail:
		add(m.failed, e.Failed)
		add(m.parked, e.Parked)
	}
	add(m.lost, e.Lost)
}

// observeSchedule counts a scheduler's claims, runs' ends, skips and
// pauses, by runs table and job.
func (m *Metrics) observeSchedule(e observe.Event) {
	job := fmt.Sprint(e.Key)
	switch e.Op {
	case schedule.OpFinish:
		m.runsFinished.WithLabelValues(e.Table, job, schedule.RunResult(e.Err)).Inc()
		return
	case schedule.OpClaim:
		if e.Err == nil && e.Rows > 0 {
			m.runsStarted.WithLabelValues(e.Table, job).Inc()
		}
	case schedule.OpSkip:
		if e.Err == nil && e.Rows > 0 {
			m.skips.WithLabelValues(e.Table, job).Inc()
		}
	case schedule.OpPause:
		if e.Err == nil {
			m.paused.WithLabelValues(e.Table, job).Set(float64(e.Rows))
		}
	}
	if e.Err != nil {
		m.errs.WithLabelValues(e.Table, string(e.Op)).Inc()
	}
}

// observeCoalesce counts a coalescer's accepts and folds, by table (keys
// are unbounded: never labels).
func (m *Metrics) observeCoalesce(e observe.Event) {
	switch e.Op {
	case coalesce.OpAccept:
		result := coalesce.AcceptResult(e)
		if result == "error" {
			m.errs.WithLabelValues(e.Table, string(e.Op)).Inc()
		}
		m.accepts.WithLabelValues(e.Table, result).Inc()
	case coalesce.OpFold:
		switch {
		case e.Err != nil && !errors.Is(e.Err, dialect.ErrClaimLost):
			m.errs.WithLabelValues(e.Table, string(e.Op)).Inc()
		case e.Err == nil && e.Rows > 0:
			m.folds.WithLabelValues(e.Table).Inc()
			m.changesFolded.WithLabelValues(e.Table).Add(float64(e.Rows))
		}
		if e.Requeued > 0 {
			m.keysRequeued.WithLabelValues(e.Table).Add(float64(e.Requeued))
		}
	}
}

// observeLease counts a lease operation.
func (m *Metrics) observeLease(e observe.Event) {
	switch {
	case e.Op == tasklock.OpAcquire && e.OK:
		m.leasesAcquired.WithLabelValues(e.Table).Inc()
	case e.Op == tasklock.OpLost:
		m.leasesLost.WithLabelValues(e.Table).Inc()
	case e.Err != nil && !errors.Is(e.Err, dialect.ErrLeaseHeld):
		m.errs.WithLabelValues(e.Table, "lease."+e.Op.Name()).Inc()
	}
}

// observeSweep counts a reaper's sweep.
func (m *Metrics) observeSweep(e observe.Event) {
	if e.Err != nil {
		m.errs.WithLabelValues(e.Table, e.Op.Name()).Inc()
	}
	if e.Op != zombie.OpSweep {
		return
	}
	if e.Returned > 0 {
		m.reaped.WithLabelValues(e.Table).Add(float64(e.Returned))
	}
	if e.Parked > 0 {
		m.parked.WithLabelValues(e.Table).Add(float64(e.Parked))
	}
}

package claimotel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/claimlock/claimlock/observe"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/claimlock/claimlock/contrib/otel"

// Observer turns claimlock's events into spans and metrics. It implements
// [observe.Observer], for the events of claim, tasklock, zombie and
// schedule and coalesce, and is safe for concurrent use.
type Observer struct {
	tracer      trace.Tracer
	scopeMetric bool

	claimDur                                             metric.Float64Histogram
	claimed, acked, failed, requeued, lost, reaped, park metric.Int64Counter
	leasesAcquired, leasesLost, errs, emptyClaims        metric.Int64Counter
	runsStarted, runsFinished, skips                     metric.Int64Counter
	accepts, folds, changesFolded, keysRequeued          metric.Int64Counter
}

var _ observe.Observer = (*Observer)(nil)

// Option configures [New].
type Option func(*config)

type config struct {
	tp          trace.TracerProvider
	mp          metric.MeterProvider
	scopeMetric bool
}

// WithTracerProvider sets the tracer provider; the default is the global
// one (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets the meter provider; the default is the global one
// (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithScopeMetrics adds the claimlock.scope attribute (the scope values,
// "task_id=42") to row metrics. Use it only when a table's scopes are few:
// each distinct scope is a time series of every row instrument. Spans always
// carry the scope.
func WithScopeMetrics() Option {
	return func(c *config) { c.scopeMetric = true }
}

// New builds an Observer from the options. It fails only if the meter
// refuses to create an instrument.
func New(opts ...Option) (*Observer, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	m := c.mp.Meter(ScopeName)
	o := &Observer{tracer: c.tp.Tracer(ScopeName), scopeMetric: c.scopeMetric}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		ctr, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return ctr
	}
	var err error
	o.claimDur, err = m.Float64Histogram("claimlock.claim.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of claims, including the wait for a claim slot."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	errs = append(errs, err)
	o.claimed = counter("claimlock.rows.claimed", "{row}", "Rows claimed.")
	o.acked = counter("claimlock.rows.acked", "{row}", "Rows acked (set to done).")
	o.failed = counter("claimlock.rows.failed", "{row}", "Rows failed (retried or parked).")
	o.requeued = counter("claimlock.rows.requeued", "{row}", "Rows an ack sent back to pending because their version moved.")
	o.lost = counter("claimlock.rows.lost", "{row}", "Rows an ack, fail or snooze found no longer held by its claim.")
	o.reaped = counter("claimlock.rows.reaped", "{row}", "Stale rows the reaper returned to pending.")
	o.park = counter("claimlock.rows.parked", "{row}", "Rows parked with the failed status, by a fail or by the reaper.")
	o.leasesAcquired = counter("claimlock.leases.acquired", "{lease}", "Leases acquired.")
	o.leasesLost = counter("claimlock.leases.lost", "{lease}", "Leases lost (taken over, force-released, or past their local deadline).")
	o.errs = counter("claimlock.errors", "{error}", "Failed operations.")
	o.emptyClaims = counter("claimlock.claims.empty", "{claim}", "Claims that found nothing pending (idle polls, which make no span).")
	o.runsStarted = counter("claimlock.schedule.runs.started", "{run}", "Fire times this process claimed and ran.")
	o.runsFinished = counter("claimlock.schedule.runs.finished", "{run}",
		"Runs this process ended, by claimlock.schedule.result: succeeded, failed (the job's error or the record's) or lost (the run's lease was lost).")
	o.skips = counter("claimlock.schedule.skips", "{range}", "Ranges of fire times recorded as skipped (missed past their grace, or due while the job was paused).")
	o.accepts = counter("claimlock.coalesce.accepts", "{change}",
		"Changes offered to a coalescer, by claimlock.coalesce.result: recorded, duplicate, stale, overloaded or error.")
	o.folds = counter("claimlock.coalesce.folds", "{write}", "Fold transactions that wrote a key's state (one state write each).")
	o.changesFolded = counter("claimlock.coalesce.changes_folded", "{change}",
		"Changes folded into state writes: divided by claimlock.coalesce.folds, the coalescing ratio.")
	o.keysRequeued = counter("claimlock.coalesce.requeued", "{key}", "Keys a fold's ack sent back to pending because changes arrived during the flush.")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("claimotel: %w", err)
	}
	return o, nil
}

// Attribute keys.
const (
	attrTable      = attribute.Key("claimlock.table")
	attrScope      = attribute.Key("claimlock.scope")
	attrToken      = attribute.Key("claimlock.token")
	attrOp         = attribute.Key("claimlock.op")
	attrBackground = attribute.Key("claimlock.background")
	attrTx         = attribute.Key("claimlock.in_caller_tx")
	attrLeaseTable = attribute.Key("claimlock.lease.table")
	attrLeaseKey   = attribute.Key("claimlock.lease.key")
	attrOwner      = attribute.Key("claimlock.lease.owner")
	attrFence      = attribute.Key("claimlock.lease.fence")
	attrTTL        = attribute.Key("claimlock.lease.ttl_ms")
	attrRunsTable  = attribute.Key("claimlock.schedule.runs_table")
	attrJob        = attribute.Key("claimlock.schedule.job")
	attrResult     = attribute.Key("claimlock.schedule.result")
	attrCoResult   = attribute.Key("claimlock.coalesce.result")
)

// ScopeString renders scope columns and values as "col=value,col=value",
// the claimlock.scope attribute ("" for an unscoped table).
func ScopeString(cols []string, values []any) string {
	if len(values) == 0 {
		return ""
	}
	var b strings.Builder
	for i, v := range values {
		if i > 0 {
			b.WriteByte(',')
		}
		if i < len(cols) {
			b.WriteString(cols[i])
			b.WriteByte('=')
		}
		fmt.Fprint(&b, v)
	}
	return b.String()
}

// startSpan starts the span of an operation that began at start, as a child
// of ctx's span, or for background work as a new root linked to it.
func (o *Observer) startSpan(ctx context.Context, name string, e spanTiming, attrs ...attribute.KeyValue) trace.Span {
	opts := []trace.SpanStartOption{trace.WithTimestamp(e.start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
	if e.background {
		opts = append(opts, trace.WithNewRoot(), trace.WithAttributes(attrBackground.Bool(true)))
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	_, span := o.tracer.Start(ctx, name, opts...)
	return span
}

type spanTiming struct {
	start      time.Time
	background bool
}

// endSpan records err (if any) and ends span at end.
func endSpan(span trace.Span, end time.Time, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

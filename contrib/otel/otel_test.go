package claimotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/claimlock/claimlock/claim"
	claimotel "github.com/claimlock/claimlock/contrib/otel"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/obstest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// bundle is an observer on in-memory exporters.
type bundle struct {
	obs    *claimotel.Observer
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

func setup(t *testing.T, opts ...claimotel.Option) *bundle {
	t.Helper()
	b := &bundle{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	b.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(b.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(b.reader))
	obs, err := claimotel.New(append([]claimotel.Option{claimotel.WithTracerProvider(b.tp), claimotel.WithMeterProvider(mp)}, opts...)...)
	require.NoError(t, err)
	b.obs = obs
	return b
}

// sums returns every counter's total by instrument name, and the claim
// histogram's count.
func (b *bundle) sums(t *testing.T) (map[string]int64, uint64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, b.reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	var claims uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					claims += p.Count
				}
			}
		}
	}
	return out, claims
}

func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// A scripted run on every engine: the exporters see one span per operation
// under the caller's span, and counters equal to what was claimed, acked,
// failed, lost, reaped and parked, and to the leases acquired and lost.
func TestScriptedRun(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			f := obstest.New(t, e, 5, 2)
			b := setup(t)
			ctx, root := b.tp.Tracer("test").Start(context.Background(), "operator script")

			cfg := f.Config
			// MaxAttempts stays the fixture's 3: the reaper returns the dead worker's rows below it
			cfg.Observer = b.obs
			c, err := claim.New[struct{ Payload string }](f.Dialect, cfg, func(r *struct{ Payload string }) []any { return []any{&r.Payload} })
			require.NoError(t, err)
			batch, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 5, batch.Len())
			ids := batch.IDs()
			require.NoError(t, batch.Ack(ctx, ids[0], ids[1]))
			require.NoError(t, batch.Fail(ctx, ids[2], claim.Park(context.DeadlineExceeded))) // parked at once
			f.TakeFrom(t, batch.Token(), ids[3])
			require.ErrorIs(t, batch.Ack(ctx, ids[3]), dialect.ErrClaimLost)
			n, err := batch.Release(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			dead, err := c.Claim(ctx) // the two released rows; their worker dies
			require.NoError(t, err)
			require.Equal(t, 2, dead.Len())

			time.Sleep(700 * time.Millisecond)
			r, err := zombie.New(f.Dialect, cfg, zombie.Config{Timeout: 200 * time.Millisecond, Observer: b.obs})
			require.NoError(t, err)
			res, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 2, res.Returned)

			require.NoError(t, tasklock.CreateTable(ctx, f.Dialect, "leases"))
			k, err := tasklock.New(f.Dialect, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: 5 * time.Second,
				Observer: b.obs})
			require.NoError(t, err)
			l, err := k.Acquire(ctx, "nightly")
			require.NoError(t, err)
			_, err = k.Acquire(ctx, "nightly")
			require.ErrorIs(t, err, dialect.ErrLeaseHeld)
			require.NoError(t, l.Renew(ctx))
			_, err = l.Release(ctx)
			require.NoError(t, err)
			l2, err := k.Acquire(ctx, "nightly")
			require.NoError(t, err)
			_, err = k.ForceRelease(ctx, "nightly")
			require.NoError(t, err)
			require.ErrorIs(t, l2.Renew(ctx), dialect.ErrLeaseLost)
			root.End()

			sums, claims := b.sums(t)
			require.Equal(t, map[string]int64{
				"claimlock.rows.claimed": 7, "claimlock.rows.acked": 2, "claimlock.rows.failed": 1,
				"claimlock.rows.parked": 1, "claimlock.rows.lost": 1, "claimlock.rows.reaped": 2,
				"claimlock.leases.acquired": 2, "claimlock.leases.lost": 1, "claimlock.errors": 1,
			}, sums, "claimlock.errors counts the renewal that found the lease gone")
			require.EqualValues(t, 2, claims, "two claims in the latency histogram")

			byName := map[string][]sdktrace.ReadOnlySpan{}
			for _, s := range b.spans.GetSpans().Snapshots() {
				byName[s.Name()] = append(byName[s.Name()], s)
			}
			counts := map[string]int{}
			for name, ss := range byName {
				counts[name] = len(ss)
			}
			require.Equal(t, map[string]int{
				"operator script": 1, "claimlock.claim": 2, "claimlock.ack": 2, "claimlock.fail": 1, "claimlock.release": 1,
				"claimlock.reap": 1, "claimlock.lease.acquire": 3, "claimlock.lease.renew": 2, "claimlock.lease.release": 1,
				"claimlock.lease.force_release": 1, "claimlock.lease.lost": 1,
			}, counts)
			rootID := root.SpanContext().SpanID()
			for name, ss := range byName {
				if name == "operator script" || name == "claimlock.lease.lost" {
					continue
				}
				for _, s := range ss {
					require.Equal(t, rootID, s.Parent().SpanID(), "%s nests under the caller's span", name)
					require.Equal(t, root.SpanContext().TraceID(), s.SpanContext().TraceID())
				}
			}
			cl := byName["claimlock.claim"][0]
			v, _ := attr(cl, "claimlock.table")
			require.Equal(t, "jobs", v.AsString())
			v, _ = attr(cl, "claimlock.scope")
			require.Equal(t, "task_id=42", v.AsString())
			v, _ = attr(cl, "claimlock.rows.claimed")
			require.EqualValues(t, 5, v.AsInt64())
			v, _ = attr(byName["claimlock.fail"][0], "claimlock.rows.parked")
			require.EqualValues(t, 1, v.AsInt64())
			v, _ = attr(byName["claimlock.reap"][0], "claimlock.rows.returned")
			require.EqualValues(t, 2, v.AsInt64())
			for _, s := range byName["claimlock.lease.acquire"] {
				require.NotEqual(t, codes.Error, s.Status().Code, "contention is not an error")
			}
			lost := byName["claimlock.lease.lost"][0]
			require.NotEqual(t, root.SpanContext().TraceID(), lost.SpanContext().TraceID(), "a loss is the lease's own event: a new trace")
			require.Len(t, lost.Links(), 1)
			require.Equal(t, rootID, lost.Links()[0].SpanContext.SpanID(), "linked to the span that acquired the lease")
			v, _ = attr(lost, "claimlock.lease.fence")
			require.EqualValues(t, 2, v.AsInt64())
			v, _ = attr(lost, "claimlock.lease.key")
			require.Equal(t, "nightly", v.AsString())
			var renewErr int
			for _, s := range byName["claimlock.lease.renew"] {
				if s.Status().Code == codes.Error {
					renewErr++
				}
			}
			require.Equal(t, 1, renewErr)
			require.False(t, cl.StartTime().After(cl.EndTime()))
		})
	}
}

// Background work starts its own trace, linked to the span that started it;
// WithScopeMetrics adds the scope to row metrics.
func TestBackgroundLinkAndScopeMetrics(t *testing.T) {
	t.Parallel()
	f := obstest.New(t, testengine.All[0], 3, 0)
	b := setup(t, claimotel.WithScopeMetrics())
	ctx, root := b.tp.Tracer("test").Start(context.Background(), "request")
	cfg := f.Config
	cfg.AckDelay = time.Millisecond
	cfg.Observer = b.obs
	c, err := claim.New[struct{ Payload string }](f.Dialect, cfg, func(r *struct{ Payload string }) []any { return []any{&r.Payload} })
	require.NoError(t, err)
	batch, err := c.Claim(ctx)
	require.NoError(t, err)
	for _, id := range batch.IDs() {
		require.NoError(t, batch.Ack(ctx, id)) // deferred: AckDelay is set
	}
	require.Eventually(t, func() bool {
		for _, s := range b.spans.GetSpans().Snapshots() {
			if s.Name() == "claimlock.ack" {
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, batch.Flush(ctx))
	root.End()
	var ack sdktrace.ReadOnlySpan
	for _, s := range b.spans.GetSpans().Snapshots() {
		if s.Name() == "claimlock.ack" {
			ack = s
		}
	}
	require.NotEqual(t, root.SpanContext().TraceID(), ack.SpanContext().TraceID(), "a new trace")
	v, _ := attr(ack, "claimlock.background")
	require.True(t, v.AsBool())

	var rm metricdata.ResourceMetrics
	require.NoError(t, b.reader.Collect(context.Background(), &rm))
	found := false
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != "claimlock.rows.acked" {
			continue
		}
		p := m.Data.(metricdata.Sum[int64]).DataPoints[0]
		scope, ok := p.Attributes.Value("claimlock.scope")
		require.True(t, ok)
		require.Equal(t, "task_id=42", scope.AsString())
		require.EqualValues(t, 3, p.Value)
		found = true
	}
	require.True(t, found)
}

// An idle service's claims that find nothing make no spans: they are
// counted in claimlock.claims.empty and their latency recorded. A claim
// that fails still makes a span with the error.
func TestEmptyClaimsMakeNoSpan(t *testing.T) {
	t.Parallel()
	f := obstest.New(t, testengine.All[0], 2, 0)
	b := setup(t)
	ctx, root := b.tp.Tracer("test").Start(context.Background(), "worker")
	cfg := f.Config
	cfg.Observer = b.obs
	c, err := claim.New[struct{ Payload string }](f.Dialect, cfg, func(r *struct{ Payload string }) []any { return []any{&r.Payload} })
	require.NoError(t, err)
	batch, err := c.Claim(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, batch.Len())
	for range 3 { // idle polls
		empty, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Zero(t, empty.Len())
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Claim(cancelled)
	require.Error(t, err)
	root.End()

	var claims []sdktrace.ReadOnlySpan
	for _, s := range b.spans.GetSpans().Snapshots() {
		if s.Name() == "claimlock.claim" {
			claims = append(claims, s)
		}
	}
	require.Len(t, claims, 2, "the claim that took rows and the one that failed; no span for the idle polls")
	v, _ := attr(claims[0], "claimlock.rows.claimed")
	require.EqualValues(t, 2, v.AsInt64())
	require.Equal(t, codes.Error, claims[1].Status().Code, "a failed claim still makes a span, with its error")

	sums, durations := b.sums(t)
	require.EqualValues(t, 3, sums["claimlock.claims.empty"])
	require.EqualValues(t, 2, sums["claimlock.rows.claimed"])
	require.EqualValues(t, 1, sums["claimlock.errors"])
	require.EqualValues(t, 4, durations, "every successful claim's latency, empty ones included")
}

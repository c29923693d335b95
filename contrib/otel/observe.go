package claimotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/schedule"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// Observe records an event of claim, tasklock, zombie, schedule or
// coalesce as a span and metrics; events of other sources are ignored.
func (o *Observer) Observe(ctx context.Context, e observe.Event) {
	switch e.Source {
	case observe.SourceSchedule:
		o.observeSchedule(ctx, e)
	case observe.SourceCoalesce:
		o.observeCoalesce(ctx, e)
	case observe.SourceClaim:
		o.observeClaim(ctx, e)
	case observe.SourceTasklock:
		o.observeLease(ctx, e)
	case observe.SourceZombie:
		o.observeSweep(ctx, e)
	}
}

// observeClaim records a claimer's operation. A claim that found nothing
// (an idle poll) makes no span: it is counted in claimlock.claims.empty and
// its latency recorded.
func (o *Observer) observeClaim(ctx context.Context, e observe.Event) {
	scope := ScopeString(e.Scope, e.ScopeValues)
	mattrs := []attribute.KeyValue{attrTable.String(e.Table)}
	if o.scopeMetric && scope != "" {
		mattrs = append(mattrs, attrScope.String(scope))
	}
	set := metric.WithAttributeSet(attribute.NewSet(mattrs...))
	if e.Op == claim.OpClaim && e.Err == nil && e.Claimed == 0 {
		// An idle service polls all the time: a span per empty claim
		// would flood its traces with nothing.
		o.claimDur.Record(ctx, e.Duration.Seconds(), set)
		o.emptyClaims.Add(ctx, 1, set)
		return
	}
	attrs := []attribute.KeyValue{attrTable.String(e.Table)}
	if scope != "" {
		attrs = append(attrs, attrScope.String(scope))
	}
	if e.Token != "" {
		attrs = append(attrs, attrToken.String(e.Token))
	}
	if e.Tx {
		attrs = append(attrs, attrTx.Bool(true))
	}
	switch e.Op {
	case claim.OpClaim:
		attrs = append(attrs, attribute.Int("claimlock.rows.claimed", e.Claimed))
	case claim.OpAck:
		attrs = append(attrs, attribute.Int("claimlock.rows.acked", e.Acked), attribute.Int("claimlock.rows.requeued", e.Requeued),
			attribute.Int("claimlock.rows.lost", e.Lost))
	case claim.OpFail:
		attrs = append(attrs, attribute.Int("claimlock.rows.failed", e.Failed), attribute.Int("claimlock.rows.parked", e.Parked),
			attribute.Int("claimlock.rows.lost", e.Lost), attribute.Int64("claimlock.retry_in_ms", e.RetryIn.Milliseconds()))
	case claim.OpSnooze:
		attrs = append(attrs, attribute.Int("claimlock.rows.snoozed", e.Rows), attribute.Int("claimlock.rows.lost", e.Lost))
	case claim.OpHeartbeat:
		attrs = append(attrs, attribute.Int("claimlock.rows.held", e.Rows))
	case claim.OpRelease:
		attrs = append(attrs, attribute.Int("claimlock.rows.released", e.Rows))
	}
	span := o.startSpan(ctx, "claimlock."+e.Op.Name(), spanTiming{start: e.Start, background: e.Background}, attrs...)
	endSpan(span, e.Start.Add(e.Duration), e.Err)

	if e.Err != nil {
		o.errs.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(append(mattrs, attrOp.String(e.Op.Name()))...)))
		if e.Op == claim.OpClaim {
			return // a failed claim's latency would blur the histogram
		}
	}
	add := func(c metric.Int64Counter, n int) {
		if n > 0 {
			c.Add(ctx, int64(n), set)
		}
	}
	switch e.Op {
	case claim.OpClaim:
		o.claimDur.Record(ctx, e.Duration.Seconds(), set)
		add(o.claimed, e.Claimed)
	case claim.OpAck:
		add(o.acked, e.Acked)
		add(o.requeued, e.Requeued)
	case claim.OpFail:
		add(o.failed, e.Failed)
		add(o.park, e.Parked)
	}
	add(o.lost, e.Lost)
}

// observeSchedule records a scheduler's claims, runs' ends, skips and
// pauses. A claim that found no fire time for this process (another
// process's, or none due) makes no span, as an empty claim of rows makes
// none: every process asks at every fire time.
func (o *Observer) observeSchedule(ctx context.Context, e observe.Event) {
	job := fmt.Sprint(e.Key)
	set := metric.WithAttributeSet(attribute.NewSet(attrRunsTable.String(e.Table), attrJob.String(job)))
	attrs := []attribute.KeyValue{attrRunsTable.String(e.Table), attrJob.String(job)}
	err := e.Err
	switch e.Op {
	case schedule.OpClaim:
		if err == nil && e.Rows == 0 {
			return
		}
		if err == nil {
			o.runsStarted.Add(ctx, 1, set)
		}
	case schedule.OpSkip:
		if err == nil && e.Rows == 0 {
			return
		}
		if err == nil {
			o.skips.Add(ctx, 1, set)
		}
	case schedule.OpPause:
		attrs = append(attrs, attribute.Bool("claimlock.schedule.paused", e.Rows > 0))
	case schedule.OpFinish:
		result := schedule.RunResult(err)
		attrs = append(attrs, attrResult.String(result))
		o.runsFinished.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attrRunsTable.String(e.Table), attrJob.String(job), attrResult.String(result))))
	}
	span := o.startSpan(ctx, "claimlock."+string(e.Op), spanTiming{start: e.Start, background: e.Background}, attrs...)
	endSpan(span, e.Start.Add(e.Duration), err)
	if err != nil && e.Op != schedule.OpFinish {
		o.errs.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attrTable.String(e.Table), attrOp.String(string(e.Op)))))
	}
}

// observeCoalesce records a coalescer's accepts (metrics only: one per
// request of a hot path, whose own span is the caller's) and folds (a
// span each, with the key and the changes folded).
func (o *Observer) observeCoalesce(ctx context.Context, e observe.Event) {
	switch e.Op {
	case coalesce.OpAccept:
		result := coalesce.AcceptResult(e)
		if result == "error" {
			o.errs.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attrTable.String(e.Table), attrOp.String(string(e.Op)))))
		}
		o.accepts.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attrTable.String(e.Table), attrCoResult.String(result))))
	case coalesce.OpFold:
		err := e.Err
		if errors.Is(err, dialect.ErrClaimLost) {
			err = nil // the key went to another flusher: claim's lost row, not a failure
		}
		span := o.startSpan(ctx, "claimlock.coalesce.fold", spanTiming{start: e.Start, background: e.Background},
			attrTable.String(e.Table), attribute.String("claimlock.coalesce.key", fmt.Sprint(e.Key)),
			attribute.Int("claimlock.coalesce.changes", e.Rows), attribute.Bool("claimlock.coalesce.requeued", e.Requeued > 0))
		endSpan(span, e.Start.Add(e.Duration), err)
		set := metric.WithAttributeSet(attribute.NewSet(attrTable.String(e.Table)))
		switch {
		case err != nil:
			o.errs.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attrTable.String(e.Table), attrOp.String(string(e.Op)))))
		case e.Err == nil && e.Rows > 0:
			o.folds.Add(ctx, 1, set)
			o.changesFolded.Add(ctx, int64(e.Rows), set)
		}
		if e.Requeued > 0 {
			o.keysRequeued.Add(ctx, int64(e.Requeued), set)
		}
	}
}

// observeLease records a lease operation.
func (o *Observer) observeLease(ctx context.Context, e observe.Event) {
	attrs := []attribute.KeyValue{
		attrLeaseTable.String(e.Table), attrLeaseKey.String(fmt.Sprint(e.Key)),
		attrTTL.Int64(e.TTL.Milliseconds()),
	}
	if e.Token != "" {
		attrs = append(attrs, attrOwner.String(e.Token), attrFence.Int64(e.Fence))
	}
	err := e.Err
	switch e.Op {
	case tasklock.OpAcquire:
		attrs = append(attrs, attribute.Bool("claimlock.lease.acquired", e.OK))
		if errors.Is(err, dialect.ErrLeaseHeld) {
			err = nil // contention is the normal case, not a failure
		}
	case tasklock.OpRelease, tasklock.OpFinish:
		attrs = append(attrs, attribute.Bool("claimlock.lease.freed", e.OK))
	case tasklock.OpForceRelease:
		attrs = append(attrs, attribute.Bool("claimlock.lease.was_held", e.OK))
	case tasklock.OpLost:
		attrs = append(attrs, attribute.String("claimlock.lease.cause", fmt.Sprint(e.Err)))
		err = nil // the loss is the span's subject; its cause is an attribute
	}
	span := o.startSpan(ctx, "claimlock.lease."+e.Op.Name(), spanTiming{start: e.Start, background: e.Background}, attrs...)
	endSpan(span, e.Start.Add(e.Duration), err)

	set := metric.WithAttributeSet(attribute.NewSet(attrLeaseTable.String(e.Table)))
	switch {
	case e.Op == tasklock.OpAcquire && e.OK:
		o.leasesAcquired.Add(ctx, 1, set)
	case e.Op == tasklock.OpLost:
		o.leasesLost.Add(ctx, 1, set)
	case err != nil:
		o.errs.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attrLeaseTable.String(e.Table), attrOp.String("lease."+e.Op.Name()))))
	}
}

// observeSweep records a reaper's sweep or change of leadership.
func (o *Observer) observeSweep(ctx context.Context, e observe.Event) {
	if e.Op == zombie.OpLeader {
		// Not an operation: an event on the caller's span, if any.
		attrs := []attribute.KeyValue{attrTable.String(e.Table), attribute.Bool("claimlock.leading", e.Leading)}
		span := o.startSpan(ctx, "claimlock.reaper.leader", spanTiming{start: e.Start}, attrs...)
		endSpan(span, e.Start, nil)
		return
	}
	scope := ScopeString(e.Scope, e.ScopeValues)
	name := "claimlock.reap"
	tableKey := attrTable
	if e.Op == zombie.OpLeaseSweep {
		name, tableKey = "claimlock.lease_reap", attrLeaseTable
	}
	attrs := []attribute.KeyValue{
		tableKey.String(e.Table),
		attribute.Int("claimlock.rows.returned", e.Returned),
		attribute.Int("claimlock.rows.parked", e.Parked),
		attribute.Int("claimlock.statements", e.Statements),
	}
	if scope != "" {
		attrs = append(attrs, attrScope.String(scope))
	}
	span := o.startSpan(ctx, name, spanTiming{start: e.Start}, attrs...)
	endSpan(span, e.Start.Add(e.Duration), e.Err)

	mattrs := []attribute.KeyValue{tableKey.String(e.Table)}
	if o.scopeMetric && scope != "" {
		mattrs = append(mattrs, attrScope.String(scope))
	}
	set := metric.WithAttributeSet(attribute.NewSet(mattrs...))
	if e.Err != nil {
		o.errs.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(append(mattrs, attrOp.String(e.Op.Name()))...)))
	}
	if e.Op == zombie.OpSweep {
		if e.Returned > 0 {
			o.reaped.Add(ctx, int64(e.Returned), set)
		}
		if e.Parked > 0 {
			o.park.Add(ctx, int64(e.Parked), set)
		}
	}
}

package coalesce

import (
	"context"
	"errors"
	"time"

	"github.com/claimlock/claimlock/observe"
)

// The operations a coalescer and its flushers report to [Config.Observer],
// as [observe.Event] with Source [observe.SourceCoalesce], Key the change's
// key, Start, Duration and Err. The flushers' claims, acks and fails of the
// keys table are package claim's events (claim.OpClaim, claim.OpAck, ...).
const (
	// OpAccept is an [Coalescer.Accept] or [Coalescer.AcceptTx] (Event.Tx),
	// or one change of an [Coalescer.AcceptBatch] or
	// [Coalescer.AcceptBatchTx] (the batch's Start and Duration):
	// Event.Table is the changes table; Event.Rows is 1 when the change was
	// recorded, 0 for a duplicate (Event.Err nil) and for a refusal or a
	// failure (Event.Err set: errors.Is(err, ErrStale) for a stale
	// sequence, errors.Is(err, ErrOverloaded) for backpressure).
	OpAccept observe.Op = "coalesce.accept"
	// OpFold is one key's fold transaction in a flush: Event.Table is
	// the keys table; Event.Rows the changes folded (the coalescing ratio
	// is the sum of Rows over the number of events with Rows > 0);
	// Event.Requeued is 1 when the key's ack sent it back to pending
	// because changes arrived during the flush; Event.Err the fold's or
	// the transaction's error (a key lost to a reaper matches
	// dialect.ErrClaimLost). Keys folded in one transaction
	// (FlusherConfig.KeysPerTx) report one event each, with their
	// transaction's Start and Duration.
	OpFold observe.Op = "coalesce.fold"
)

// AcceptResult names the outcome of an [OpAccept] event: "recorded",
// "duplicate" (a resent event id: Rows 0, no error), "stale" ([ErrStale]),
// "overloaded" ([ErrOverloaded]) or "error" (the accept failed). The
// Prometheus and OpenTelemetry adapters label accepts with it.
func AcceptResult(e observe.Event) string {
	switch {
	case errors.Is(e.Err, ErrStale):
		return "stale"
	case errors.Is(e.Err, ErrOverloaded):
		return "overloaded"
	case e.Err != nil:
		return "error"
	case e.Rows == 0:
		return "duplicate"
	}
	return "recorded"
}

// observeAccept reports an accept that started at start.
func (c *Coalescer) observeAccept(ctx context.Context, start time.Time, key string, r Receipt, tx bool, err error) {
	if c.cfg.Observer == nil {
		return
	}
	rows := 0
	if err == nil && !r.Duplicate {
		rows = 1
	}
	c.cfg.Observer.Observe(ctx, observe.Event{Source: observe.SourceCoalesce, Op: OpAccept, Table: c.cfg.ChangesTable,
		Key: key, Start: start, Duration: time.Since(start), Err: err, Rows: rows, Tx: tx})
}

// observeBatch reports a batch's accepts that started at start, one
// event per change: its own outcome, or the batch's error.
func (c *Coalescer) observeBatch(ctx context.Context, start time.Time, chs []Change, res []BatchResult, tx bool, err error) {
	if c.cfg.Observer == nil {
		return
	}
	d := time.Since(start)
	for i, ch := range chs {
		e := observe.Event{Source: observe.SourceCoalesce, Op: OpAccept, Table: c.cfg.ChangesTable,
			Key: ch.Key, Start: start, Duration: d, Err: err, Tx: tx}
		if err == nil {
			e.Err = res[i].Err
			if e.Err == nil && !res[i].Receipt.Duplicate {
				e.Rows = 1
			}
		}
		c.cfg.Observer.Observe(ctx, e)
	}
}

// observeFold reports a key's fold that started at start.
func (c *Coalescer) observeFold(ctx context.Context, start time.Time, key string, folded int, requeued bool, err error) {
	if c.cfg.Observer == nil {
		return
	}
	e := observe.Event{Source: observe.SourceCoalesce, Op: OpFold, Table: c.cfg.KeysTable,
		Key: key, Start: start, Duration: time.Since(start), Err: err}
	if err == nil {
		e.Rows = folded
		if requeued {
			e.Requeued = 1
		}
	}
	var fe *foldError
	if errors.As(err, &fe) {
		e.Err = fe.err
	}
	c.cfg.Observer.Observe(ctx, e)
}

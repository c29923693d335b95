package claim

// Group commit of acks: Ack calls of one batch made concurrently (workers
// that process the rows of a batch in parallel and ack each row when it is
// done) share statements. The first call writes at once; calls arriving
// while its statement is in flight queue up, and the next statement carries
// them all. Each call gets its own rows' outcome.

import (
	"context"
	"slices"
	"sync/atomic"
)

// ackGroup is the state of a batch's grouped acks. Every field is guarded
// by the batch's mutex, which is never held while a statement runs.
//
// Invariant: calls are queued only while a statement is in flight (landed
// non-nil). When a statement lands with calls queued, the landing takes
// them all for the next statement at once and hands it to the first of
// them to run, so that no other write of the batch (AckAll, Flush, Release,
// which wait for landed) slips in between and finds rows half taken.
type ackGroup struct {
	busy   []bool        // by row index: in a queued or in-flight call; nil until the first call
	landed chan struct{} // closed when the statement in flight lands; nil when none
	queue  []*ackCall    // calls waiting for the next statement, in arrival order
}

// ackCall is one grouped [Batch.Ack] call.
type ackCall struct {
	ctx   context.Context
	idx   []int      // its rows
	taken bool       // carried by the statement in flight (it can no longer withdraw)
	run   bool       // its goroutine runs the statement carrying calls
	calls []*ackCall // when run: the calls of that statement
	done  bool       // its outcome is in err
	err   error      // nil, a [*LostError] of its own rows, or the statement's error
}

// busyRow reports whether row i is in a grouped ack not landed yet.
func (g *ackGroup) busyRow(i int) bool { return g.busy != nil && g.busy[i] }

func (g *ackGroup) mark(idx []int, on bool) {
	for _, i := range idx {
		g.busy[i] = on
	}
}

// writing reports, with b.mu held, whether an ack of row i was made and is
// not written yet: deferred (Config.AckDelay) or in a grouped ack. Such a
// row is still held in the database, and the batch refuses to ack, fail or
// release it through any other call.
func (b *Batch[T]) writing(i int) bool { return b.later.isLater(i) || b.grp.busyRow(i) }

// ackGrouped acks rows idx of one [Batch.Ack] call, with b.mu held on entry
// and on return (it is released while the call waits and while a
// statement runs). Alone, the call writes at once; while another
// statement of the batch's acks is in flight, it queues and is carried by
// the next one. A queued call whose ctx ends before a statement took it
// withdraws, writing nothing; once taken, it waits for the statement, which
// ends early only when the contexts of all the calls it carries have ended.
func (b *Batch[T]) ackGrouped(ctx context.Context, idx []int) error {
	g := &b.grp
	if g.busy == nil {
		g.busy = make([]bool, len(b.rows))
	}
	c := &ackCall{ctx: ctx, idx: idx}
	g.mark(idx, true)
	if g.landed == nil {
		g.landed = make(chan struct{})
		c.taken, c.run, c.calls = true, true, []*ackCall{c}
	} else {
		g.queue = append(g.queue, c)
	}
	cdone := ctx.Done()
	for !c.done {
		if c.run {
			c.run = false
			b.writeGroup(c.calls)
			continue
		}
		landed := g.landed
		b.mu.Unlock()
		ended := false
		select {
		case <-landed:
		case <-cdone:
			ended = true
		}
		b.mu.Lock()
		if ended && !c.taken && !c.done {
			g.queue = slices.DeleteFunc(g.queue, func(x *ackCall) bool { return x == c })
			g.mark(idx, false)
			return storeError("ack", context.Cause(ctx))
		}
		if ended {
			cdone = nil // taken: wait for its statement
		}
	}
	return c.err
}

// writeGroup writes the acks of calls in one statement, with b.mu held on
// entry and on return but not while the statement runs, records the
// outcome of each call, lands the statement and, when calls queued
// meanwhile, hands them all to the next statement.
func (b *Batch[T]) writeGroup(calls []*ackCall) {
	g := &b.grp
	var idx []int
	for _, c := range calls {
		idx = append(idx, c.idx...)
	}
	p := b.doneParams(idx)
	ctx, stop := groupContext(calls)
	b.mu.Unlock()

	res, err := b.core.cs.Ack(ctx, p)

	stop()
	b.mu.Lock()
	g.mark(idx, false)
	b.noteUnknown(err)
	if err == nil && len(res.Lost) > 0 && b.writtenBefore() {
		b.core.logger.Info("claimlock: rows an earlier write of unknown outcome completed", "token", b.token, "rows", len(res.Lost))
		res.Lost = nil
	}
	if err != nil {
		err = storeError("ack", err)
		for _, c := range calls {
			c.err, c.done = err, true
		}
	} else {
		lostPos := b.recordDone(idx, p, res)
		// Each lost row is reported to the call that acked it.
		owner := make([]int, 0, len(idx))
		for j, c := range calls {
			for range c.idx {
				owner = append(owner, j)
			}
		}
		lost := make([][]any, len(calls))
		for _, pos := range lostPos {
			lost[owner[pos]] = append(lost[owner[pos]], b.rows[idx[pos]].ID)
		}
		for j, c := range calls {
			c.err, c.done = lostError("ack", lost[j]), true
		}
	}
	close(g.landed)
	g.landed = nil
	if len(g.queue) > 0 {
		next := g.queue
		g.queue = nil
		g.landed = make(chan struct{})
		for _, c := range next {
			c.taken = true
		}
		next[0].run, next[0].calls = true, next
	}
}

// groupContext returns the context of a statement carrying calls: a lone
// call's own, or one that keeps the values of the first call's and ends
// once the contexts of all of them have ended (so that no call's
// cancellation fails the others' acks), with the last one's cause. stop
// releases it.
func groupContext(calls []*ackCall) (ctx context.Context, stop func()) {
	if len(calls) == 1 {
		return calls[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(calls[0].ctx))
	var left atomic.Int64
	left.Store(int64(len(calls)))
	stops := make([]func() bool, len(calls))
	for j, c := range calls {
		stops[j] = context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel(context.Cause(c.ctx))
			}
		})
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel(context.Canceled)
	}
}

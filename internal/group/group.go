// Package group runs calls that arrive while others are in flight together,
// in one run of a function that takes many: the calls of concurrent
// callers share the round trips and the commit of one statement batch,
// and a call that arrives while nothing runs starts at once, with no added
// delay. It knows nothing of SQL; a caller such as the coalescer's intake
// gives it the function that writes many inputs at once.
package group

import (
	"context"
	"errors"
	"sync"
)

// Group runs the calls of [Group.Do] in runs of Run, at most InFlight runs
// at once and at most Max calls per run. Calls that arrive while InFlight
// runs are in progress wait and go together into the next run. The zero
// Group is not usable: set Run, Max and InFlight.
type Group[In, Out any] struct {
	// Run writes ins and returns one result per input, in order (an error
	// of its own, returned as err, is every input's). ctx lasts while at
	// least one of the run's callers still waits, and then ends with the
	// cause of the last one's context; it carries the values of the
	// context of the run's first call.
	Run func(ctx context.Context, ins []In) (outs []Out, errs []error, err error)
	// Max bounds the calls of one run (at least 1).
	Max int
	// InFlight bounds the runs in progress at once (at least 1).
	InFlight int

	mu      sync.Mutex
	running int
	queue   []*call[In, Out]
}

// call is one Do waiting for its run.
type call[In, Out any] struct {
	ctx   context.Context
	in    In
	out   Out
	err   error
	done  chan struct{} // closed once out and err are set
	taken bool          // a run has the call (under the group's mutex)
}

// ErrShape reports a Run that returned a number of results other than the
// number of its inputs.
var ErrShape = errors.New("group: Run returned a result count other than its input count")

// Do runs in, at once if fewer than InFlight runs are in progress, or
// else together with the calls queued meanwhile in the next run, and
// returns its result. When ctx ends first, Do returns ctx's cause at once:
// a call not yet in a run is never run; one in a run that goes on for the
// others has an outcome unknown to the caller, as for any statement whose
// caller stopped waiting.
func (g *Group[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	c := &call[In, Out]{ctx: ctx, in: in, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.running < max(g.InFlight, 1) {
		g.running++
		go g.runQueue()
	}
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		g.mu.Lock()
		if !c.taken {
			g.remove(c)
		}
		g.mu.Unlock()
		select {
		case <-c.done: // its run ended meanwhile: the result is known
			return c.out, c.err
		default:
		}
		var zero Out
		return zero, context.Cause(ctx)
	}
}

// Queued reports the calls waiting for a run.
func (g *Group[In, Out]) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// runQueue holds one of the InFlight slots and runs batches of the queue
// until it is empty.
func (g *Group[In, Out]) runQueue() {
	for {
		g.mu.Lock()
		batch := g.take()
		if len(batch) == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.run(batch)
	}
}

// take removes up to Max calls from the queue, dropping those whose
// context has ended (their Do returns on its own), and marks them taken.
// g.mu is held.
func (g *Group[In, Out]) take() []*call[In, Out] {
	n := max(g.Max, 1)
	var batch []*call[In, Out]
	i := 0
	for ; i < len(g.queue) && len(batch) < n; i++ {
		c := g.queue[i]
		if c.ctx.Err() != nil {
			continue
		}
		c.taken = true
		batch = append(batch, c)
	}
	g.queue = append(g.queue[:0], g.queue[i:]...)
	return batch
}

// remove drops c from the queue. g.mu is held.
func (g *Group[In, Out]) remove(c *call[In, Out]) {
	for i, q := range g.queue {
		if q == c {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return
		}
	}
}

// run runs one batch and delivers its results. Its context keeps the
// first call's values and ends once every call of the batch has stopped
// waiting, with the cause of the last one's context.
func (g *Group[In, Out]) run(batch []*call[In, Out]) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(batch[0].ctx))
	defer cancel(nil)
	var mu sync.Mutex
	waiting := len(batch)
	for _, c := range batch {
		stop := context.AfterFunc(c.ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			if waiting--; waiting == 0 {
				cancel(context.Cause(c.ctx))
			}
		})
		defer stop()
	}
	ins := make([]In, len(batch))
	for i, c := range batch {
		ins[i] = c.in
	}
	outs, errs, err := g.Run(ctx, ins)
	if err == nil && (len(outs) != len(batch) || len(errs) != len(batch)) {
		err = ErrShape
	}
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.out, c.err = outs[i], errs[i]
		}
		close(c.done)
	}
}

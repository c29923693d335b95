package claim

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// turns hands the loops of one [Claimer.Run] the scopes they claim from
// (WorkerConfig.Scopes; the claimer's own scope without them): in turn,
// round robin over the scopes not known to be empty, each holding at most
// WorkerConfig.ScopeInFlight rows at once; and, with WorkerConfig.Drain,
// it finds the moment nothing is left.
//
// Without Drain, each loop skips the scopes its own claims found empty
// since it last polled, and polls (with the claimer's waker) once every
// scope it may claim from was empty: each loop, as with one scope, claims
// for itself whenever it wakes.
//
// With Drain, the loops share what they know: a scope is known to be
// empty when a claim found nothing in it and no batch of that scope
// finished since that claim started, as a finished batch may have made
// rows of its scope pending again (a failure retried without a delay),
// which a claim that started before it could not see. Rows only go back to
// pending in their own scope, so one scope's batches never make another
// scope's emptiness doubtful. Drained means every scope is known to be
// empty while no claim runs and no batch is processed.
type turns[T any] struct {
	mu      sync.Mutex
	lanes   []*lane[T]
	next    int           // the lane the next pick tries first
	batch   int           // rows per claim at most
	limit   int           // rows in flight per lane at most; 0: no limit
	drain   bool          // WorkerConfig.Drain
	busy    int           // claims running and batches being processed
	changed chan struct{} // closed and replaced when a claim or a batch ends
	drained chan struct{} // closed once, in drain mode, when nothing is left
	// onDrained, if set, is called once with drained closed.
	onDrained func()
}

// lane is one scope served by a Run.
type lane[T any] struct {
	c        *Claimer[T] // the claimer of the scope (a view, or the Run's claimer)
	inFlight int         // rows claimed by the Run and not yet finished, or reserved by a running claim
	gen      uint64      // batches of the scope finished so far
	empty    bool        // known to be empty (see turns); with Drain only
	paused   bool        // found paused (ErrPaused); with Drain only
	i        int         // its index in turns.lanes
}

func newTurns[T any](cs []*Claimer[T], batch, limit int, drain bool) *turns[T] {
	t := &turns[T]{batch: batch, limit: limit, drain: drain, changed: make(chan struct{}), drained: make(chan struct{})}
	for i, c := range cs {
		t.lanes = append(t.lanes, &lane[T]{c: c, i: i})
	}
	return t
}

// wait says what a loop does when pick finds no scope to claim from.
type wait int

const (
	waitChange  wait = iota // until a claim or a batch ends (scopes at their limit; drain mode)
	waitPoll                // poll: every scope open to a claim was empty
	waitDrained             // nothing is left: Run returns
)

// pick chooses the scope of the next claim, the one after the last scope
// picked that is not known to be empty (to all loops with Drain, or else
// to this loop: skip, indexed like t.lanes) and is below its in-flight
// limit, and reserves the rows the claim may take (n). gen is the scope's
// count of finished batches, for claimed. Without a scope it says what to
// do, and ch is the channel that announces the next change.
func (t *turns[T]) pick(skip []bool) (l *lane[T], n int, gen uint64, w wait, ch <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	empty := 0
	for j := range t.lanes {
		i := (t.next + j) % len(t.lanes)
		l := t.lanes[i]
		if l.empty || l.paused || skip[i] {
			empty++
			continue
		}
		n := t.batch
		if t.limit > 0 {
			n = min(n, t.limit-l.inFlight)
		}
		if n <= 0 {
			continue
		}
		t.next = (i + 1) % len(t.lanes)
		l.inFlight += n
		t.busy++
		return l, n, l.gen, waitChange, nil
	}
	switch {
	case !t.drain && empty > 0:
		return nil, 0, 0, waitPoll, t.changed
	case t.drain && empty == len(t.lanes) && t.busy == 0:
		select {
		case <-t.drained:
		default:
			close(t.drained)
			if t.onDrained != nil {
				t.onDrained()
			}
		}
		return nil, 0, 0, waitDrained, t.changed
	}
	return nil, 0, 0, waitChange, t.changed
}

// claimed records the end of a claim of l that reserved n rows and got m
// (read or unreadable; got of them handed out), started when l had
// finished gen batches; failed says it returned an error. A claim that
// got rows keeps the loop busy until finished.
func (t *turns[T]) claimed(l *lane[T], n, m, got int, gen uint64, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l.inFlight -= n - got
	if t.drain && m == 0 && !failed && gen == l.gen {
		l.empty = true
	}
	if got == 0 {
		t.busy--
	}
	t.signal()
}

// finished records that a batch of l holding m rows ended (acked, failed,
// released). It returns l's count of finished batches.
func (t *turns[T]) finished(l *lane[T], m int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	l.inFlight -= m
	l.gen++
	l.empty = false
	t.busy--
	t.signal()
	return l.gen
}

// piped records the batch that an ack claimed together with it
// (pipeline.go), once the acked batch is finished: m rows claimed, got of
// them handed out (as for claimed); gen is the count of l's finished
// batches when the acked batch's processing started, plus one. If another
// batch of l finished meanwhile, an empty claim proves nothing.
func (t *turns[T]) piped(l *lane[T], m, got int, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.drain && m == 0 && gen == l.gen {
		l.empty = true
	}
	if got > 0 {
		l.inFlight += got
		t.busy++
	}
}

// gen returns the count of l's finished batches.
func (t *turns[T]) gen(l *lane[T]) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return l.gen
}

// signal wakes the loops waiting for a change; t.mu is held.
func (t *turns[T]) signal() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// await waits for a change (ch, from pick), the end of the drain, or the
// end of ctx.
func (t *turns[T]) await(ctx context.Context, ch <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-ch:
	case <-t.drained:
	}
}

// done reports whether the drain ended.
func (t *turns[T]) done() bool {
	select {
	case <-t.drained:
		return true
	default:
		return false
	}
}

// pause records, in drain mode, that a claim found l paused: the drain
// leaves it (a scope resumed during the drain waits for the next one).
func (t *turns[T]) pause(l *lane[T]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l.paused = true
	t.signal()
}

// pausedErr returns, once the drain ended, an error matching [ErrPaused]
// when it left paused scopes; nil otherwise.
func (t *turns[T]) pausedErr() error {
	if !t.done() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var paused []string
	for _, l := range t.lanes {
		if l.paused {
			paused = append(paused, fmt.Sprint(l.c.core.scope))
		}
	}
	if len(paused) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the drain left %d paused scope(s) %s; their rows stay pending", ErrPaused, len(paused), strings.Join(paused, " "))
}

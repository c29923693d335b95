package loop

import (
	"context"
	"time"
)

// Sleep waits d, or less when ctx ends or wake receives (or is closed; a
// nil wake never is). It reports whether ctx is still live. A non-positive
// d does not wait.
func Sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	pause(ctx, d, nil, wake)
	return ctx.Err() == nil
}

// pause waits d, or less when ctx ends, stop is closed or wake receives.
// It reports whether the caller may go on: ctx live and stop open (checked
// first, so a step never starts after either ended, even when the wait was
// over at the same time).
func pause(ctx context.Context, d time.Duration, stop, wake <-chan struct{}) bool {
	if ended(ctx, stop) {
		return false
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-stop:
	case <-wake:
	case <-t.C:
	}
	return !ended(ctx, stop)
}

// ended reports whether ctx has ended or stop is closed.
func ended(ctx context.Context, stop <-chan struct{}) bool {
	if ctx.Err() != nil {
		return true
	}
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// Next is what a loop does after a step. The zero Next runs the next step
// at once; [After], [Poll] and [End] say otherwise.
type Next struct {
	wait time.Duration
	wake bool // Loop.Wake cuts the wait short
	end  bool
	err  error
}

// After waits d before the next step (at once when d is not positive). A
// wake-up does not cut the wait short: use it for pauses after a failure,
// a lingering pause, a fixed interval.
func After(d time.Duration) Next { return Next{wait: d} }

// Poll waits d before the next step, or less when [Loop.Wake] receives:
// use it for the wait of a loop that found nothing to do.
func Poll(d time.Duration) Next { return Next{wait: d, wake: true} }

// End ends the loop: [Loop.Run] returns err (nil for a loop whose work is
// done).
func End(err error) Next { return Next{end: true, err: err} }

// Loop runs a step again and again until its context ends, Stop is closed
// or a step ends it ([End]). The zero Loop steps at once and has no wake-up
// and no stop channel.
type Loop struct {
	// First is the wait before the first step (ctx and Stop cut it short,
	// Wake does not); zero steps at once.
	First time.Duration
	// Wake, when it receives (or is closed), cuts a [Poll] wait short.
	Wake <-chan struct{}
	// Stop, once closed, ends the loop as the end of its context does.
	Stop <-chan struct{}
}

// Run calls step until ctx ends or l.Stop is closed, when it returns nil
// (whatever the step in progress returned: its failure is the shutdown's),
// or until a step returns [End], when it returns End's error. Between
// steps it waits as the step's [Next] says. No step starts once ctx has
// ended or Stop is closed, the first one included.
func (l Loop) Run(ctx context.Context, step func(ctx context.Context) Next) error {
	next := After(l.First)
	for {
		var wake <-chan struct{}
		if next.wake {
			wake = l.Wake
		}
		if !pause(ctx, next.wait, l.Stop, wake) {
			return nil
		}
		next = step(ctx)
		if ended(ctx, l.Stop) {
			return nil
		}
		if next.end {
			return next.err
		}
	}
}

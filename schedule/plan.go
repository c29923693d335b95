package schedule

import (
	"errors"
	"math"
	"time"
)

// This file decides, from a job's cursor (the latest fire time handled) and
// the database's now, what is due: pure arithmetic on the job's schedule,
// in microseconds since the epoch, so that every process reading the same
// row at the same database time decides the same.

// noEnd is the end of a window that never closes.
const noEnd = math.MaxInt64

// maxSteps bounds the fire times walked through to find the latest one: a
// schedule that needs more (one firing every microsecond, days behind) is
// refused rather than walked for minutes.
const maxSteps = 1 << 20

var errTooManyFires = errors.New("schedule: too many fire times to walk (a schedule firing more often than the database can record?)")

// timeline is a job's schedule in microseconds.
type timeline struct {
	s     Schedule
	loc   *time.Location
	grace int64 // µs
}

// next returns the first fire time strictly after t.
func (tl timeline) next(t int64) (int64, bool) {
	at := t
	for range 3 {
		n := tl.s.Next(time.UnixMicro(at).In(tl.loc))
		if n.IsZero() {
			return 0, false
		}
		if us := n.UnixMicro(); us > t {
			return us, true
		}
		// A schedule with sub-microsecond fire times: look past this one.
		at++
	}
	return 0, false
}

// deadline returns the end of f's window: f + grace, and never after the
// next fire time.
func (tl timeline) deadline(f int64) int64 {
	d := f + tl.grace
	if d < f {
		d = noEnd
	}
	if n, ok := tl.next(f); ok && n < d {
		d = n
	}
	return d
}

// latest returns the latest fire time at or before now, given first, the
// first fire time after the cursor, with first <= now. It gallops back
// from now so that a job far behind (every second, down for a day) costs a
// few steps, not one per fire time.
func (tl timeline) latest(first, now int64) (int64, error) {
	f := first
	gap := int64(1)
	if n, ok := tl.next(first); ok && n-first > gap {
		gap = n - first
	}
	for step := gap; ; step *= 2 {
		a := now - step
		if a <= f || step > now-f {
			break
		}
		if n, ok := tl.next(a); ok && n <= now {
			f = n
			break
		}
	}
	for range maxSteps {
		n, ok := tl.next(f)
		if !ok || n > now {
			return f, nil
		}
		f = n
	}
	return 0, errTooManyFires
}

// plan is what a job's state calls for at the database's now.
type plan struct {
	// run is the fire time to run now (0: none), in the database window
	// [runFrom, runTo); late marks a catch-up of a missed fire time.
	run, runFrom, runTo int64
	late                bool
	// skipFrom and skipUntil, when skipUntil > skipFrom, are missed fire
	// times to record as skipped: those in [skipFrom, skipUntil).
	skipFrom, skipUntil int64
	// skipTo is the cursor after a claim that only skips, allowed once the
	// database's now reaches skipAfter.
	skipTo, skipAfter int64
	// next is the first fire time after now (0: none).
	next int64
}

// decide computes the plan for cursor at now under policy.
func (tl timeline) decide(cursor, now int64, policy Missed) (plan, error) {
	var p plan
	first, ok := tl.next(cursor)
	if !ok {
		return p, nil // the schedule is over
	}
	if first > now {
		p.next = first
		return p, nil
	}
	last, err := tl.latest(first, now)
	if err != nil {
		return p, err
	}
	after, hasAfter := tl.next(last)
	if hasAfter {
		p.next = after
	}
	end := tl.deadline(last)
	switch {
	case now < end:
		// last is due; the ones before it were missed.
		p.run, p.runFrom, p.runTo = last, last, end
		p.skipFrom, p.skipUntil = first, last
	case policy == CatchUp:
		// Every fire time up to last was missed: run last, late, until the
		// next one comes.
		p.run, p.runFrom, p.runTo, p.late = last, end, noEnd, true
		if hasAfter {
			p.runTo = after
		}
		p.skipFrom, p.skipUntil = first, last
	default:
		p.skipFrom, p.skipTo, p.skipAfter = first, last, end
		p.skipUntil = last + 1
		if hasAfter {
			p.skipUntil = after
		}
	}
	return p, nil
}

// skipOnly reports whether the plan only records missed fire times.
func (p plan) skipOnly() bool { return p.run == 0 && p.skipUntil > p.skipFrom }

package claim

import "time"

// deferred is the state of one batch's deferred acks (Config.AckDelay):
// rows the caller acked that are not written yet. A deferred row is still
// held in the database (processing under the token) until a write of it
// commits; until then it stays open in the batch, and the batch refuses to
// ack, fail or release it through any other call.
//
// A deferred row is in one of two places: waiting (in wait, to be taken by
// the next write) or in flight (taken by the background write in progress,
// which runs without the batch's lock). A write that fails puts its rows back
// in front of wait, so no row is ever in two writes and none is forgotten.
//
// Every method is called with the batch's mutex held; the type holds no
// lock of its own.
type deferred struct {
	delay  time.Duration // Config.AckDelay
	buffer int           // Config.AckBuffer

	later []bool // by row index: deferred and not written yet (waiting or in flight)
	n     int    // rows marked in later
	wait  []int  // deferred rows no write has taken, in call order
	lost  []any  // keys of deferred rows a write found lost, not reported yet

	flight []int         // rows the background write in progress took
	landed chan struct{} // closed when that write ends; nil when none is in progress

	timer    *time.Timer // starts a background write
	armed    bool        // timer is scheduled
	rerun    bool        // rows came to wait while a write was in flight: write again at once when it lands
	failures int         // consecutive failed timer writes
}

func newDeferred(rows int, delay time.Duration, buffer int) *deferred {
	return &deferred{
		delay: delay, buffer: buffer,
		later: make([]bool, rows),
		wait:  make([]int, 0, min(rows, buffer)),
	}
}

// isLater reports whether row i is deferred and not written yet.
func (d *deferred) isLater(i int) bool { return d != nil && d.later[i] }

// add defers row i.
func (d *deferred) add(i int) {
	d.later[i] = true
	d.n++
	d.wait = append(d.wait, i)
}

// urgent reports whether the waiting rows should be written now rather than
// after the delay: the buffer is full, or every row the batch still holds
// (nOpen) is deferred.
func (d *deferred) urgent(nOpen int) bool {
	return len(d.wait) >= d.buffer || d.n == nOpen
}

// written ends the deferral of rows idx, which a write committed (acked or
// found lost) or the batch otherwise closed.
func (d *deferred) written(idx []int) {
	if d == nil {
		return
	}
	for _, i := range idx {
		if d.later[i] {
			d.later[i] = false
			d.n--
		}
	}
}

// takeOff hands the waiting rows to a background write and marks it in
// flight. The caller writes them without the batch's lock and then calls
// land.
func (d *deferred) takeOff() []int {
	d.flight, d.wait = d.wait, nil
	d.landed = make(chan struct{})
	return d.flight
}

// land ends the write in flight. When it failed, its rows go back in front
// of the waiting ones, still deferred. It reports whether rows are waiting
// that the write left behind and that should be written at once.
func (d *deferred) land(failed bool) (again bool) {
	if failed {
		d.wait = append(d.flight, d.wait...)
	}
	d.flight = nil
	close(d.landed)
	d.landed = nil
	again = d.rerun && len(d.wait) > 0
	d.rerun = false
	return again
}

// takeLost returns the lost deferred rows not reported yet, once.
func (d *deferred) takeLost() []any {
	if d == nil {
		return nil
	}
	lost := d.lost
	d.lost = nil
	return lost
}

// arm schedules f after after, or sooner if it is already scheduled
// earlier: an armed timer is only ever moved forward to now.
func (d *deferred) arm(after time.Duration, f func()) {
	switch {
	case d.timer == nil:
		d.timer = time.AfterFunc(after, f)
	case d.armed:
		if after == 0 {
			d.timer.Reset(0)
		}
	default:
		d.timer.Reset(after)
	}
	d.armed = true
}

// stop cancels the scheduled write, if any. A timer function already
// running finds nothing to write or writes what is waiting; either is safe.
func (d *deferred) stop() {
	if d != nil && d.armed {
		d.timer.Stop()
		d.armed = false
	}
}

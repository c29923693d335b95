package render

import "time"

// Unit is the integer unit an engine's time arithmetic takes durations in.
type Unit int

// The time units of durations passed to statements.
const (
	Microseconds Unit = iota
	Milliseconds
)

// convert returns d in u, at least 1 (a positive duration never rounds to an
// empty interval).
func (u Unit) convert(d time.Duration) int64 {
	n := d.Microseconds()
	if u == Milliseconds {
		n = d.Milliseconds()
	}
	return max(n, 1)
}

// ceil returns d in u, rounded up (zero stays zero).
func (u Unit) ceil(d time.Duration) int64 {
	step := time.Microsecond
	if u == Milliseconds {
		step = time.Millisecond
	}
	return int64((d + step - 1) / step)
}

// epoch returns t as an integer count of u since the Unix epoch, rounded
// up: a hold read back early would let a key go early.
func (u Unit) epoch(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Sub(time.UnixMicro(us)) > 0 {
		us++
	}
	if u == Milliseconds {
		return (us + 999) / 1000 // the times of interest are after 1970
	}
	return us
}

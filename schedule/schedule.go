package schedule

import (
	"time"
)

// Schedule says when a job fires. Next returns the first fire time
// strictly after t, or the zero time when the job never fires again. Every
// process of a fleet must give the same answer for the same t: a schedule
// is a pure function of t (robfig/cron's cron.Schedule, for one, fits as
// it is).
//
// Fire times are kept to the microsecond. Next is called with times in the
// job's [Job.Location], so calendar schedules ("02:00 every day") mean the
// same instants on every host whatever its own time zone.
type Schedule interface {
	Next(t time.Time) time.Time
}

// Every returns a schedule that fires at every multiple of d since the
// Unix epoch: Every(time.Minute) fires at each whole minute (UTC), on
// every host alike, so interval jobs need no start time agreed between
// processes. A d below one microsecond never fires.
func Every(d time.Duration) Schedule { return every(d) }

type every time.Duration

// Next implements [Schedule].
func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	if d < time.Microsecond {
		return time.Time{}
	}
	us := d.Microseconds()
	at := t.UnixMicro()
	n := (at/us + 1) * us
	if at < 0 && at%us != 0 {
		n = (at / us) * us
	}
	return time.UnixMicro(n).In(t.Location())
}

// String returns "every <d>".
func (e every) String() string { return "every " + time.Duration(e).String() }

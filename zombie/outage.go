package zombie

import (
	"sync"
	"time"
)

// outageGrace keeps a reaper from taking rows that went stale only because
// their holders, like the reaper, could not reach the database.
//
// While the database is away, no holder can heartbeat, so when it comes
// back every live batch looks as old as the outage. A holder whose ack or
// heartbeat waited the outage out writes within its heartbeat interval
// (less than the timeout) of the reconnect. So for one timeout after its
// first good sweep following failed ones, a reaper treats as stale only
// rows that were already stale when its last good sweep before the
// failures ran: it adds the time since that sweep to the timeout. After
// that window the timeout is the configured one again, so the rows of
// holders that died during the outage are taken at most one timeout late.
// Reaping later is always safe; it never lets a second holder in early.
//
// Only a sweep's own failures open the window: a reaper that starts after
// an outage, or that did not sweep because another held its lease, has no
// outage of its own to allow for (the reaper that swept meanwhile saw the
// database).
type outageGrace struct {
	mu      sync.Mutex
	lastOK  time.Time     // the last good sweep's start
	failing time.Time     // the first failed sweep since lastOK; zero while none
	extra   time.Duration // the grace of the current window
	until   time.Time     // the window's end
}

// timeout is the staleness limit for a sweep starting at now: base, plus
// the outage so far while sweeps fail, or the window's grace.
func (g *outageGrace) timeout(base time.Duration, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case !g.failing.IsZero():
		return base + g.outage(now)
	case now.Before(g.until):
		return base + g.extra
	}
	return base
}

// outage is how long the database may have been away for holders: since
// the last good sweep, or since the first failure when none succeeded.
func (g *outageGrace) outage(now time.Time) time.Duration {
	from := g.lastOK
	if from.IsZero() {
		from = g.failing
	}
	return now.Sub(from)
}

// done records the end of a sweep that started at start: a good one after
// failed ones opens a window of one base timeout from now, with the outage
// as its grace, and reports that grace (zero otherwise).
func (g *outageGrace) done(start, now time.Time, base time.Duration, failed bool) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if failed {
		if g.failing.IsZero() {
			g.failing = start
		}
		return 0
	}
	var opened time.Duration
	if !g.failing.IsZero() {
		g.extra, g.until = g.outage(start), now.Add(base)
		opened = g.extra
		g.failing = time.Time{}
	}
	g.lastOK = start
	return opened
}

package schedule

import (
	"sync"
	"time"
)

// clock relates the local clock to the database's: the offset between
// them, measured at each read of a job's state (the database's now minus
// the local time halfway through the read). It turns a fire time on the
// database clock into a local duration to sleep; nothing is decided on
// it, so a wrong host clock or a stale offset only makes a tick early or
// late, which the claim corrects on the database clock.
type clock struct {
	now func() time.Time

	mu     sync.Mutex
	offset time.Duration // database minus local
	known  bool
}

// observe records a database time read between two local readings.
func (c *clock) observe(db int64, before, after time.Time) {
	mid := before.Add(after.Sub(before) / 2)
	c.mu.Lock()
	c.offset, c.known = time.UnixMicro(db).Sub(mid), true
	c.mu.Unlock()
}

// until returns the local duration until the database clock reads at
// (microseconds since the epoch), by the last offset.
func (c *clock) until(at int64) time.Duration {
	c.mu.Lock()
	offset := c.offset
	c.mu.Unlock()
	return time.UnixMicro(at).Sub(c.now().Add(offset))
}

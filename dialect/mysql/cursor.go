package mysql

import (
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/internal/store"
)

// cursorRescan is how long claims may start above the key cursor before one
// starts from the beginning of the scope again, so pending rows below the
// cursor (released, retried or reaped rows) wait about that long at most even
// while the queue never drains. A claim from the start walks the index
// entries that purge has not removed yet: under 16 concurrent claimers, one
// every 64 claims spent a fifth of the claim time there.
const cursorRescan = time.Second

// keyCursor lets claims on an integer key start just above the last key of
// the last full batch instead of at the start of the scope. Claimed rows
// leave delete-marked entries in the claim index until InnoDB's purge
// removes them, and a claim from the start walks all of them (thousands per
// claim under concurrency); starting above the cursor skips that region.
//
// Any cursor value is safe: a claim that comes back short above the cursor
// claims again from the start before it reports fewer rows than asked, so a
// pending row is never skipped by a claim that reports the queue drained. One
// cursor is shared by the store's callers; races between them only change
// where the next claim starts.
type keyCursor struct {
	enabled bool // integer keys only
	set     atomic.Bool
	key     atomic.Int64
	// scanned is when a claim last started from the beginning, in
	// nanoseconds since epoch (the monotonic clock: see from).
	scanned atomic.Int64
}

// epoch anchors the cursor's monotonic timestamps.
var epoch = time.Now()

// from returns the key to claim above, and false to claim from the start.
func (c *keyCursor) from() (int64, bool) {
	if !c.enabled || !c.set.Load() {
		return 0, false
	}
	now := int64(time.Since(epoch))
	if last := c.scanned.Load(); now-last >= int64(cursorRescan) && c.scanned.CompareAndSwap(last, now) {
		return 0, false
	}
	return c.key.Load(), true
}

// advance moves the cursor to the last key of a full batch.
func (c *keyCursor) advance(last int64) {
	if !c.enabled {
		return
	}
	c.key.Store(last)
	c.set.Store(true)
}

// reset makes the next claim start from the beginning of the scope.
func (c *keyCursor) reset() {
	c.set.Store(false)
	c.scanned.Store(int64(time.Since(epoch)))
}

// lastKey is a [store.Scanner] that remembers the integer key (the first
// column) of the last row it scanned.
type lastKey struct {
	rows store.Scanner
	key  int64
	ok   bool
}

// Scan implements [store.Scanner].
func (l *lastKey) Scan(dest ...any) error {
	if err := l.rows.Scan(dest...); err != nil {
		return err
	}
	if len(dest) > 0 {
		if p, isInt := dest[0].(*int64); isInt {
			l.key, l.ok = *p, true
		}
	}
	return nil
}

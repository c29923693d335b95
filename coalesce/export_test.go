package coalesce

import (
	"context"
	"sync/atomic"
)

// SetMarkRead makes c call fn in its dirty mark between the first read of
// the key's row and the write that follows it (nil to stop).
func SetMarkRead(c *Coalescer, fn func(key string)) { c.markRead = fn }

// SetBeforeInsert makes c call fn in the transaction of each batch
// (AcceptBatch, and the grouped runs of Config.Group) with the batch's
// context, before the insert of its changes and after the write of its
// sources' rows (nil to stop); call it before the first Accept.
func SetBeforeInsert(c *Coalescer, fn func(ctx context.Context)) { c.beforeInsert = fn }

// CountGroups makes c count the grouped transactions of its Accepts
// (Config.Group) and their changes; call it before the first Accept.
func CountGroups(c *Coalescer) (groups, changes *atomic.Int64) {
	groups, changes = new(atomic.Int64), new(atomic.Int64)
	run := c.group.Run
	c.group.Run = func(ctx context.Context, chs []Change) ([]Receipt, []error, error) {
		groups.Add(1)
		changes.Add(int64(len(chs)))
		return run(ctx, chs)
	}
	return groups, changes
}

// GateGroups makes c's grouped runs (Config.Group) wait for a receive
// from the returned channel before they write, and reports each run's
// size on sizes; call it before the first Accept. Queued reports the
// Accepts waiting for a run.
func GateGroups(c *Coalescer) (gate chan<- struct{}, sizes <-chan int, queued func() int) {
	g, sz := make(chan struct{}), make(chan int, 64)
	run := c.group.Run
	c.group.Run = func(ctx context.Context, chs []Change) ([]Receipt, []error, error) {
		sz <- len(chs)
		<-g
		return run(ctx, chs)
	}
	return g, sz, func() int { return c.group.Queued() }
}

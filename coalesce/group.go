package coalesce

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/claimlock/claimlock/dialect"
)

// MaxGroup is the most changes one group commit ([Config.GroupCommit])
// records in a transaction.
const MaxGroup = 64

// waiter is one Accept waiting for its group's commit.
type waiter struct {
	ch   Change
	r    Receipt
	err  error
	done chan struct{}
}

// acceptGrouped queues ch for the next group commit and waits for its
// outcome. The first caller to find no group running leads: it commits
// groups of the queued changes until the queue is empty, then returns with
// its own result like the others.
func (c *Coalescer) acceptGrouped(ctx context.Context, ch Change) (Receipt, error) {
	w := &waiter{ch: ch, done: make(chan struct{})}
	c.gmu.Lock()
	c.queue = append(c.queue, w)
	lead := !c.leading
	c.leading = true
	c.gmu.Unlock()
	if lead {
		// The groups run on the leader's values but not its cancellation:
		// they carry other callers' changes.
		gctx := context.WithoutCancel(ctx)
		for {
			c.gmu.Lock()
			n := min(len(c.queue), MaxGroup)
			if n == 0 {
				c.leading = false
				c.gmu.Unlock()
				break
			}
			group := slices.Clone(c.queue[:n])
			c.queue = c.queue[n:]
			c.gmu.Unlock()
			c.commitGroup(gctx, group)
		}
	}
	select {
	case <-w.done:
		return w.r, w.err
	case <-ctx.Done():
		return Receipt{}, fmt.Errorf("coalesce: accept: %w: %w", dialect.ErrOutcomeUnknown, context.Cause(ctx))
	}
}

// commitGroup records the group's changes in one transaction, in (key,
// source, sequence) order so that concurrent groups lock source rows in
// one order and a source's changes pass its check in sequence order; then
// marks each distinct key dirty once, and tells every waiter its outcome.
// A stale change is refused alone; any other error fails the whole group
// (after the retries of deadlocks and serialization failures).
func (c *Coalescer) commitGroup(ctx context.Context, group []*waiter) {
	defer func() {
		for _, w := range group {
			close(w.done)
		}
	}()
	slices.SortStableFunc(group, func(a, b *waiter) int {
		return cmp.Or(cmp.Compare(a.ch.Key, b.ch.Key), cmp.Compare(a.ch.Source, b.ch.Source), cmp.Compare(a.ch.Seq, b.ch.Seq))
	})
	err := dialect.Retry(ctx, c.cfg.Retry, "coalesce accept", func() error {
		tx, err := c.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, w := range group {
			w.r, _, w.err = c.record(ctx, tx, w.ch)
			var stale *StaleError
			if w.err != nil && !errors.As(w.err, &stale) {
				_ = tx.Rollback()
				return w.err
			}
		}
		return tx.Commit()
	})
	if err != nil {
		for _, w := range group {
			w.r, w.err = Receipt{}, c.wrap("accept", err)
		}
		return
	}
	var last string
	var markErr error
	for _, w := range group {
		if w.err != nil {
			continue
		}
		if w.r.Key != last {
			last = w.r.Key
			markErr = dialect.Retry(ctx, c.cfg.Retry, "coalesce mark dirty", func() error { return c.markDirty(ctx, last) })
		}
		if markErr != nil {
			w.r, w.err = Receipt{}, c.wrap("accept: mark dirty", markErr)
		}
	}
}

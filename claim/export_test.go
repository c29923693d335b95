package claim

import "github.com/claimlock/claimlock/internal/store"

// StoreOf returns the claim store of c (with its observer's wrapper), for
// tests that reap, heartbeat or read what the claimer wrote.
func StoreOf[T any](c *Claimer[T]) store.ClaimStore { return c.core.cs }

// FreezeDeadlineTimer stops b's local-deadline timer, as for a process
// frozen (SIGSTOP, a paused VM) past its deadline whose timer has not run
// yet on resuming: only the batch's own reading of the clock can then tell
// it that the deadline passed.
func FreezeDeadlineTimer[T any](b *Batch[T]) {
	b.lmu.Lock()
	defer b.lmu.Unlock()
	b.gen++ // a timer that fired already and waits for lmu does nothing
	if b.timer != nil {
		b.timer.Stop()
	}
}

// FreezeHeldKeepAlive stops b's keep-alive, which pings and cancels the
// held batch's context at its local deadline, as for a process frozen past
// that deadline whose goroutines have not run yet on resuming: only the
// batch's own reading of the clock can then tell that the deadline passed.
// The batch can still be committed or rolled back.
func FreezeHeldKeepAlive[T any](b *Held[T]) {
	close(b.stop)
	<-b.stopped
	b.stop = make(chan struct{})
}

// AckGroupState reports whether a grouped ack of b is in flight and how
// many Ack calls wait for the next statement.
func AckGroupState[T any](b *Batch[T]) (inFlight bool, queued int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.grp.landed != nil, len(b.grp.queue)
}

// HeldOpen returns the keys of the rows b's book counts open (asking its
// held claim), and of those the held claim (the store's record, which
// decides) holds open: none once the batch has ended, its transaction
// gone. Both are in key order.
func HeldOpen[T any](b *Held[T]) (book, held []any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	book = b.idsOf(b.openIndexes())
	if b.ended {
		return book, nil
	}
	for _, r := range b.rows {
		if b.h.Open(r.ID) {
			held = append(held, r.ID)
		}
	}
	return book, held
}

// WrapStore replaces c's claim store with wrap's result, for tests that
// make the store answer as a server under fault would.
func WrapStore[T any](c *Claimer[T], wrap func(store.ClaimStore) store.ClaimStore) {
	c.core.cs = wrap(c.core.cs)
}

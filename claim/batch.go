package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// Row is one claimed row.
type Row[T any] struct {
	// ID is the row's key: an int64 for integer keys, a string for text
	// keys.
	ID any
	// Version is the version read by the claim (zero without a
	// Version column).
	Version int64
	// Attempts is how many times the row has been claimed, this claim
	// included (zero without an Attempts column): 1 on its first run. The
	// default retry backoff grows with it.
	Attempts int64
	// Value holds the table's Columns, filled through the fields function.
	Value T
}

// Batch is the set of rows one claim took, all held under one token. Its
// methods are safe for concurrent use; those that write (AckAll, Fail,
// Flush, Release, Heartbeat) run one at a time. Concurrent [Batch.Ack]
// calls share statements (group commit, see there), and an ack statement,
// like the background write of deferred acks (Config.AckDelay), holds the
// batch only to take its rows and to record the outcome, never while it
// runs, so a slow database does not make the other methods wait behind it;
// Flush, AckAll and Release, which report their outcome, wait for them
// without holding the batch.
//
// Every row must end in exactly one of [Batch.Ack], [Batch.AckAll],
// [Batch.Ack] with Config.AckDelay (written by [Batch.Flush] or automatically, see there),
// [Batch.Fail] or [Batch.Release]; a row left alone stays processing until a
// reaper returns it to pending. Each of these statements is conditioned on
// the token, so a batch whose rows were reaped and re-claimed by someone else
// can never overwrite the new owner's work: it gets [dialect.ErrClaimLost].
type Batch[T any] struct {
	// Set by the claim, never changed: read without the lock.
	token string
	core  *core
	// rowBook holds the rows (its unreadable ones the claim failed
	// already), which are open, guarded by mu, and which were found lost.
	rowBook[T]

	mu       sync.Mutex
	requeued []any
	inTx     []int         // rows completed in a caller's transaction (tx.go)
	later    *deferred     // deferred acks; nil until the first deferred Ack
	grp      ackGroup      // grouped acks of concurrent Ack calls (ackgroup.go)
	closed   chan struct{} // closed when nOpen reaches 0
	unknown  bool          // a write of the batch had an unknown outcome (outage.go)
	unheard  []any         // keys of rows KeepAlive's heartbeats found lost, not reported to a caller yet

	// Loss signal (context.go): ctx ends when the batch does. lmu guards the
	// deadline and its timer; it is never held while a statement runs.
	ctx      context.Context
	cancel   context.CancelCauseFunc
	lmu      sync.Mutex
	deadline time.Time   // local; zero without Config.ReapTimeout
	timer    *time.Timer // fires at deadline
	gen      uint64      // bumped whenever timer is re-armed or stopped
}

// Token returns the claim token written to every row of the batch.
func (b *Batch[T]) Token() string { return b.token }

// Rows returns the claimed rows in key order. The slice is a copy: changing
// it does not change what the batch acks.
func (b *Batch[T]) Rows() []Row[T] { return b.copyRows() }

// Unreadable returns the rows the claim took but could not read into the
// row type (a NULL scanned into a string field, say). They are not in
// [Batch.Rows]: the claim failed each of them at once, as [Batch.Fail]
// would, so they count as a failed attempt (parked at MaxAttempts, or at
// once with FailPark) and the batch's other rows proceed. Use pointer or
// sql.Null* fields for columns that may hold NULL.
func (b *Batch[T]) Unreadable() []RowError { return b.copyUnreadable() }

// Len returns the number of rows claimed.
func (b *Batch[T]) Len() int { return len(b.rows) }

// IDs returns the keys of all rows of the batch, in order.
func (b *Batch[T]) IDs() []any { return b.ids() }

// Unacked returns the keys of the rows the batch still holds: not yet acked
// (by [Batch.Ack], [Batch.AckAll] or [Batch.Ack] with Config.AckDelay), failed, released or
// found lost.
func (b *Batch[T]) Unacked() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx := b.openIndexes()
	idx = slices.DeleteFunc(idx, b.writing)
	return b.idsOf(idx)
}

// Requeued returns the keys of rows that acks of this batch sent back to
// pending instead of done because their version moved since the claim (a
// writer changed them while they were being processed). They will be claimed
// again with their new content. Always empty without a Version column.
func (b *Batch[T]) Requeued() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]any(nil), b.requeued...)
}

// closeRows records that rows idx are no longer held: written (acked, failed
// or found lost) or released. It ends their deferral, if any.
func (b *Batch[T]) closeRows(idx []int) {
	for _, i := range idx {
		if b.closeRow(i) && b.nOpen == 0 {
			close(b.closed)
			b.end(ErrBatchDone)
		}
	}
	b.later.written(idx)
}

// lookup maps caller ids to open row indexes. Each id is normalised once,
// by [rowBook.find]: a key of the wrong type or out of range
// is an error wrapping [dialect.ErrInvalidConfig]; an unknown, closed, deferred or
// repeated one is [ErrNotHeld]. op names the calling method in errors. The
// keys of rows found lost already (rowloss.go) are returned in lost, not as
// an error: the caller writes the others and reports these lost.
func (b *Batch[T]) lookup(op string, ids []any) (idx []int, lost []any, err error) {
	idx = make([]int, 0, len(ids))
	var seen map[int]bool // for long lists; short ones are scanned
	if len(ids) > 16 {
		seen = make(map[int]bool, len(ids))
	}
	for _, id := range ids {
		i, ok, err := b.find(b.core.spec.IDKind, id)
		if err != nil {
			return nil, nil, fmt.Errorf("claim: %s: %w", op, err)
		}
		if ok && !b.isOpen(i) && b.rowLost(i) {
			lost = append(lost, b.rows[i].ID)
			continue
		}
		repeated := seen != nil && seen[i] || seen == nil && slices.Contains(idx, i)
		if !ok || !b.isOpen(i) || b.writing(i) || repeated {
			return nil, nil, &notHeldError{op: op, id: id}
		}
		if seen != nil {
			seen[i] = true
		}
		idx = append(idx, i)
	}
	return idx, lost, nil
}

// Release returns the rows the batch still holds to pending, clearing their
// token and undoing the claim's attempt increment, and reports how many it
// released. Rows that were reaped meanwhile are not counted and not touched;
// that is not an error. Afterwards the batch holds nothing.
//
// Deferred acks (Config.AckDelay) are written first, as by [Batch.Flush],
// and are not released. If that write fails, Release releases nothing and
// returns its error; the rows stay held so the call can be repeated. Rows
// that write finds lost (or that background writes found lost since the last
// Flush) are reported by an error matching [dialect.ErrClaimLost] after the release
// of the others, with the count of released rows.
func (b *Batch[T]) Release(ctx context.Context) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	flushErr := b.flushLocked(ctx, "release")
	if flushErr != nil && !errors.Is(flushErr, dialect.ErrClaimLost) {
		return 0, flushErr
	}
	idx := slices.DeleteFunc(b.openIndexes(), b.writing)
	// Rows completed in a caller's transaction that rolled back are still
	// held under the token: release them too (a committed one is not held,
	// and the token condition leaves it alone).
	all := append(slices.Clone(idx), b.inTx...)
	if len(all) == 0 {
		return 0, flushErr
	}
	n, err := b.core.cs.Release(ctx, b.token, b.idsOf(all))
	if err != nil {
		return 0, storeError("release", err)
	}
	b.inTx = nil
	b.closeRows(idx)
	return n, flushErr
}

package claim

import (
	"slices"
	"sync"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// rowBook is the bookkeeping of the rows of one claimed batch, shared by
// [Batch] and [Held]: the rows in key order and their index by key, the
// rows the row type could not read, which rows are still open (neither
// settled by an ack, a fail or a release nor lost), and which were found
// lost, with the contexts watching single rows.
//
// Which rows are open has one record. A [Batch] keeps it here (open and
// nOpen; closeRow closes a row once). A [Held] batch's record is its held
// claim in the store, which refuses keys it does not hold and which a
// savepoint rollback restores: the book asks it, through holds, whenever
// it is read, and keeps no copy.
//
// Locking: rows, index, unreadable and holds are set before the batch is
// handed out and never changed, so they are read without a lock; open and
// nOpen, and what holds reads, are guarded by the owner's mutex (Batch.mu,
// Held.mu); rl has its own mutex (see [rowLoss]).
type rowBook[T any] struct {
	rows       []Row[T]    // in key order
	index      map[any]int // normalised key -> index into rows
	unreadable []RowError  // claimed rows the row type could not hold
	open       []bool      // by row index: the row is still held (nil with holds)
	nOpen      int
	holds      func(key any) bool // the record of the open rows, when the batch keeps none (Held)
	rl         rowLoss            // rows found lost, and who watches single rows (partial loss: rowloss.go)
}

// rowLoss records the rows of a batch found lost and the contexts watching
// single rows. Its mutex is taken after the owner's (never the other way
// round) and never held while a statement runs or a watcher is called, so
// that [Batch.RowContext] does not wait behind an ack in progress.
type rowLoss struct {
	mu    sync.Mutex
	cause []error         // by row index: the loss that closed the row; nil until the first loss
	watch [][]*rowWatcher // by row index: who is told when the row is lost; nil until the first watcher
}

// rowWatcher is one registration of [Batch.onRowLoss].
type rowWatcher struct{ f func(cause error) }

// setRows records the claimed rows, whose keys are normalised, all open.
func (rb *rowBook[T]) setRows(rows []Row[T]) {
	rb.rows = rows
	rb.index = make(map[any]int, len(rows))
	rb.open = make([]bool, len(rows))
	for i, r := range rows {
		rb.index[r.ID] = i
		rb.open[i] = true
	}
	rb.nOpen = len(rows)
}

// setHeldRows records the claimed rows, whose keys are normalised, with
// holds, the record that says which are open (see [rowBook]).
func (rb *rowBook[T]) setHeldRows(rows []Row[T], holds func(key any) bool) {
	rb.setRows(rows)
	rb.open, rb.nOpen = nil, 0
	rb.holds = holds
}

// copyRows returns a copy of the rows: a caller changing it changes
// nothing the batch writes.
func (rb *rowBook[T]) copyRows() []Row[T] { return slices.Clone(rb.rows) }

// copyUnreadable returns a copy of the rows the row type could not hold.
func (rb *rowBook[T]) copyUnreadable() []RowError { return slices.Clone(rb.unreadable) }

// ids returns the keys of every row, in key order.
func (rb *rowBook[T]) ids() []any {
	ids := make([]any, len(rb.rows))
	for i, r := range rb.rows {
		ids[i] = r.ID
	}
	return ids
}

// idsOf returns the keys of rows idx. It reads only what the claim set, so
// it needs no lock.
func (rb *rowBook[T]) idsOf(idx []int) []any {
	ids := make([]any, len(idx))
	for j, i := range idx {
		ids[j] = rb.rows[i].ID
	}
	return ids
}

// isOpen reports whether row i is open, with the owner's mutex held.
func (rb *rowBook[T]) isOpen(i int) bool {
	if rb.holds != nil {
		return rb.holds(rb.rows[i].ID)
	}
	return rb.open[i]
}

// openIndexes returns the indexes of the open rows, in key order, with the
// owner's mutex held.
func (rb *rowBook[T]) openIndexes() []int {
	idx := make([]int, 0, rb.nOpen)
	for i := range rb.rows {
		if rb.isOpen(i) {
			idx = append(idx, i)
		}
	}
	return idx
}

// closeRow closes row i of a batch that keeps its record of open rows
// (not with holds), with the owner's mutex held, and reports whether it
// was open: a row is closed once, and closing it again changes nothing.
func (rb *rowBook[T]) closeRow(i int) bool {
	if !rb.open[i] {
		return false
	}
	rb.open[i] = false
	rb.nOpen--
	return true
}

// find maps a caller's key to the index of its row, open or not: ok is
// false for a key that is no row of the batch. Each key is normalised
// once, here, with [store.NormalizeKey]: a key of the wrong type or out of
// range is an error wrapping [dialect.ErrInvalidConfig].
func (rb *rowBook[T]) find(kind dialect.IDKind, id any) (i int, ok bool, err error) {
	key, err := store.NormalizeKey(kind, id)
	if err != nil {
		return 0, false, err
	}
	i, ok = rb.index[key]
	return i, ok, nil
}

// lostCause returns the loss that closed row i, nil if it was not found
// lost.
func (rb *rowBook[T]) lostCause(i int) error {
	rb.rl.mu.Lock()
	defer rb.rl.mu.Unlock()
	if rb.rl.cause == nil {
		return nil
	}
	return rb.rl.cause[i]
}

// lostIDs returns the keys of the rows found lost, in key order.
func (rb *rowBook[T]) lostIDs() []any {
	rb.rl.mu.Lock()
	defer rb.rl.mu.Unlock()
	var ids []any
	for i, c := range rb.rl.cause {
		if c != nil {
			ids = append(ids, rb.rows[i].ID)
		}
	}
	return ids
}

// recordLost records rows idx as lost with cause, each once, and returns the
// watchers to tell (outside any lock).
func (rb *rowBook[T]) recordLost(idx []int, cause error) []*rowWatcher {
	rl := &rb.rl
	var tell []*rowWatcher
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.cause == nil {
		rl.cause = make([]error, len(rb.rows))
	}
	for _, i := range idx {
		if rl.cause[i] != nil {
			continue
		}
		rl.cause[i] = cause
		if rl.watch != nil {
			tell = append(tell, rl.watch[i]...)
			rl.watch[i] = nil
		}
	}
	return tell
}

// watchRow registers f to be told of row i's loss, and returns the cause
// instead when the row is lost already (f is then not registered). stop
// withdraws the registration.
func (rb *rowBook[T]) watchRow(i int, f func(cause error)) (stop func(), lost error) {
	rl := &rb.rl
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.cause != nil && rl.cause[i] != nil {
		return func() {}, rl.cause[i]
	}
	if rl.watch == nil {
		rl.watch = make([][]*rowWatcher, len(rb.rows))
	}
	w := &rowWatcher{f: f}
	rl.watch[i] = append(rl.watch[i], w)
	return func() {
		rl.mu.Lock()
		defer rl.mu.Unlock()
		if rl.watch != nil {
			rl.watch[i] = slices.DeleteFunc(rl.watch[i], func(x *rowWatcher) bool { return x == w })
		}
	}, nil
}

package claim

import (
	"context"
	"fmt"
	"sync"
)

// Row is one claimed row.
type Row[T any] struct {
	// ID is the row's key: an int64 for integer keys, a string for text
	// keys.
	ID any
	// Version is the version read by the claim (zero without a
	// VersionColumn).
	Version int64
	// Value holds Config.Columns, filled through the fields function.
	Value T
}

// Batch is the set of rows one claim took, all held under one token. Its
// methods are safe for concurrent use; they run one at a time.
//
// Every row must end in exactly one of [Batch.Ack], [Batch.AckAll],
// [Batch.Fail] or [Batch.Release]; a row left alone stays processing until a
// reaper returns it to pending. Each of these statements is conditioned on
// the token, so a batch whose rows were reaped and re-claimed by someone else
// can never overwrite the new owner's work: it gets [ErrClaimLost].
type Batch[T any] struct {
	// Token is the claim token written to every row of the batch.
	Token string
	// Rows are the claimed rows in key order.
	Rows []Row[T]

	core *core

	mu       sync.Mutex
	index    map[any]int // normalised key -> index into Rows
	open     []bool      // row still held by this batch as far as it knows
	nOpen    int
	requeued []any
}

func (b *Batch[T]) init() {
	b.index = make(map[any]int, len(b.Rows))
	b.open = make([]bool, len(b.Rows))
	for i, r := range b.Rows {
		b.index[r.ID] = i
		b.open[i] = true
	}
	b.nOpen = len(b.Rows)
}

// Len returns the number of rows claimed.
func (b *Batch[T]) Len() int { return len(b.Rows) }

// IDs returns the keys of all rows of the batch, in order.
func (b *Batch[T]) IDs() []any {
	ids := make([]any, len(b.Rows))
	for i, r := range b.Rows {
		ids[i] = r.ID
	}
	return ids
}

// Unacked returns the keys of the rows the batch still holds: not yet acked,
// failed, released or found lost.
func (b *Batch[T]) Unacked() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openIDs(b.openIndexes())
}

// Requeued returns the keys of rows that acks of this batch sent back to
// pending instead of done because their version moved since the claim (a
// writer changed them while they were being processed). They will be claimed
// again with their new content. Always empty without a VersionColumn.
func (b *Batch[T]) Requeued() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]any(nil), b.requeued...)
}

func (b *Batch[T]) openIndexes() []int {
	idx := make([]int, 0, b.nOpen)
	for i, o := range b.open {
		if o {
			idx = append(idx, i)
		}
	}
	return idx
}

func (b *Batch[T]) openIDs(idx []int) []any {
	ids := make([]any, len(idx))
	for j, i := range idx {
		ids[j] = b.Rows[i].ID
	}
	return ids
}

func (b *Batch[T]) close(idx []int) {
	for _, i := range idx {
		if b.open[i] {
			b.open[i] = false
			b.nOpen--
		}
	}
}

// lookup maps caller ids to open row indexes, rejecting unknown, closed and
// repeated ids with [ErrNotHeld].
func (b *Batch[T]) lookup(ids []any) ([]int, error) {
	idx := make([]int, 0, len(ids))
	seen := make(map[int]bool, len(ids))
	for _, id := range ids {
		i, ok := b.index[normalizeID(id)]
		if !ok || !b.open[i] || seen[i] {
			return nil, fmt.Errorf("%w: %v (%T)", ErrNotHeld, id, id)
		}
		seen[i] = true
		idx = append(idx, i)
	}
	return idx, nil
}

// normalizeID turns the integer and byte-slice forms a caller may pass into
// the int64 or string a claim returns.
func normalizeID(id any) any {
	switch x := id.(type) {
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint:
		return int64(x)
	case uint64:
		return int64(x)
	case []byte:
		return string(x)
	}
	return id
}

// Release returns the rows the batch still holds to pending, clearing their
// token and undoing the claim's attempt increment, and reports how many it
// released. Rows that were reaped meanwhile are not counted and not touched;
// that is not an error. Afterwards the batch holds nothing.
func (b *Batch[T]) Release(ctx context.Context) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx := b.openIndexes()
	if len(idx) == 0 {
		return 0, nil
	}
	n, err := b.core.store.Release(ctx, b.Token, b.openIDs(idx))
	if err != nil {
		return 0, fmt.Errorf("claim: release: %w", err)
	}
	b.close(idx)
	return n, nil
}

// Heartbeat moves the claim time of every row the token still holds to the
// database's now, so that a reaper does not take them back, and returns how
// many rows it holds. When fewer rows are held than the batch expects, the
// error wraps [ErrClaimLost] (the count is still returned); the lost rows are
// found by the next ack.
func (b *Batch[T]) Heartbeat(ctx context.Context) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nOpen == 0 {
		return 0, nil
	}
	n, err := b.core.store.Heartbeat(ctx, b.Token)
	if err != nil {
		return 0, fmt.Errorf("claim: heartbeat: %w", err)
	}
	if n < int64(b.nOpen) {
		return n, fmt.Errorf("claim: heartbeat: token holds %d of %d rows: %w", n, b.nOpen, ErrClaimLost)
	}
	return n, nil
}

package store

import (
	"cmp"
	"fmt"
	"math"
	"sync"

	"github.com/claimlock/claimlock/dialect"
)

// Fair claim order. A claim that always took pending rows from the lowest
// key starved high keys whenever rows went back to pending (retried, dirty
// again, reaped) faster than the workers drained them: the low keys were
// always first. Claims therefore take rows from a rotating key cursor: each
// claim takes the pending rows above the cursor in key order and, when
// those are fewer than its limit, goes on from the lowest key up to the
// cursor (wrapping around), and the cursor moves to the last key the claim
// took (after a wrap, the last key of the wrapped part). Claims sweep the
// key space like a clock hand, so a row that is pending is claimed before
// the cursor reaches it again: no row that became pending after it, or is
// pending again, is claimed twice before it (per cursor; see
// docs/claim.md for the bound).
//
// The cursor decides only where a claim starts, never whether a row may
// be claimed: every claim statement still takes only pending rows, and the
// part above the cursor and the wrapped part together cover every key, so
// any cursor value (stale, raced by another caller of the store, of another
// process) is safe, and a claim that finds fewer rows than its limit has
// looked at every pending row.

// keyCursor is one rotating claim cursor. Its zero value starts at the
// lowest key.
type keyCursor struct {
	mu  sync.Mutex
	key any // int64 or string; nil: the lowest key
}

// maxCursors bounds the cursors a store keeps, one per scope claimed: past
// it the map starts again (every scope then starts at its lowest key once).
const maxCursors = 4096

// cursors holds the rotating cursors of a store, by scope.
type cursors struct {
	mu sync.Mutex
	m  map[string]*keyCursor
}

// get returns the cursor of the scope values.
func (cs *cursors) get(scope []any) *keyCursor {
	k := fmt.Sprintf("%#v", scope)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.m[k]; ok {
		return c
	}
	if cs.m == nil || len(cs.m) >= maxCursors {
		cs.m = map[string]*keyCursor{}
	}
	c := &keyCursor{}
	cs.m[k] = c
	return c
}

// lowest returns the value below (or, for text, at) every key of kind: a
// cursor there makes the part above the cursor every key but the empty
// string, which the wrapped part (keys up to the cursor) then covers.
func lowest(kind dialect.IDKind) any {
	if kind == dialect.IDText {
		return ""
	}
	return int64(math.MinInt64)
}

// after returns the key a claim starts above.
func (c *keyCursor) after(kind dialect.IDKind) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == nil {
		return lowest(kind)
	}
	return c.key
}

// advance moves the cursor after a claim that started above from and took
// keys: to the largest key up to from when the claim wrapped around (it
// took such a key), else to the largest key; to the lowest key when it took
// none (nothing pending: the next claim starts from the beginning).
// Keys are compared in Go's order (integers; text byte by byte), which for
// text keys may differ from the column's collation: that moves where a
// claim starts, never which rows it may take.
func (c *keyCursor) advance(from any, keys []any) {
	next, wrapped := any(nil), false
	for _, k := range keys {
		w := compareKeys(k, from) <= 0
		switch {
		case w && !wrapped:
			next, wrapped = k, true
		case w == wrapped && (next == nil || compareKeys(k, next) > 0):
			next = k
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.key = next
}

// compareKeys compares two normalised keys of one kind (int64 or string).
func compareKeys(a, b any) int {
	switch x := a.(type) {
	case int64:
		if y, ok := b.(int64); ok {
			return cmp.Compare(x, y)
		}
	case string:
		if y, ok := b.(string); ok {
			return cmp.Compare(x, y)
		}
	}
	return 0
}

// keyRecorder is a [Scanner] that records the key (the first column, as
// the claim's scan reads it: *int64, *string or *any) of each row it
// scans, normalised.
type keyRecorder struct {
	rows Scanner
	kind dialect.IDKind
	keys *[]any
}

// Scan implements [Scanner].
func (k keyRecorder) Scan(dest ...any) error {
	if err := k.rows.Scan(dest...); err != nil {
		return err
	}
	if len(dest) == 0 {
		return nil
	}
	var v any
	switch p := dest[0].(type) {
	case *int64:
		v = *p
	case *string:
		v = *p
	case *any:
		v = *p
	default:
		return nil
	}
	if key, err := NormalizeKey(k.kind, v); err == nil {
		*k.keys = append(*k.keys, key)
	}
	return nil
}

// CursorAfter returns the key the next claim in scope starts above (the
// rotating cursor: see above), for a [Claimer] override that writes its
// own claim statements; set is false while the cursor is at the lowest key,
// where a claim from the lowest key is the same claim.
func (s *Claims) CursorAfter(scope []any) (after any, set bool) {
	after = s.cursors.get(scope).after(s.Spec.IDKind)
	return after, after != lowest(s.Spec.IDKind)
}

// CursorAdvance moves the rotating cursor of scope after a claim that
// started above from and took keys (normalised), for a [Claimer] override.
func (s *Claims) CursorAdvance(scope []any, from any, keys []any) {
	s.cursors.get(scope).advance(from, keys)
}

// KeyRecorder wraps a [Scanner] of claimed rows so that the key of each row
// it scans (the first column) is appended to *keys, normalised: for a
// [Claimer] override, whose read-back then tells [Claims.CursorAdvance]
// which keys the claim took.
func (s *Claims) KeyRecorder(rows Scanner, keys *[]any) Scanner {
	return keyRecorder{rows: rows, kind: s.Spec.IDKind, keys: keys}
}

// recordKeys wraps scan so that the keys of the rows it scans are
// appended to *keys.
func (s *Claims) recordKeys(scan func(Scanner) error, keys *[]any) func(Scanner) error {
	return func(r Scanner) error {
		return scan(keyRecorder{rows: r, kind: s.Spec.IDKind, keys: keys})
	}
}

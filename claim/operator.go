package claim

import (
	"context"
	"time"

	"github.com/claimlock/claimlock/internal/store"
)

// Stats are the counts of a claimer's rows by status and the ages of the
// oldest pending and processing rows, on the database clock.
type Stats struct {
	// Pending, Processing, Done and Failed count rows with those statuses;
	// Other counts rows with any other status value.
	Pending, Processing, Done, Failed, Other int64
	// OldestPending is the age of the oldest pending row by CreatedAt
	// (zero without that column or without pending rows).
	OldestPending time.Duration
	// OldestProcessing is the age of the oldest processing row's claim or
	// last heartbeat (zero without processing rows).
	OldestProcessing time.Duration
}

// Stats counts the rows in the claimer's scope by status, with the ages of
// the oldest pending and processing rows on the database clock. It is a
// count, so it reads every row of the scope (through an index); call it for
// reports, not in a loop over a large table.
func (c *Claimer[T]) Stats(ctx context.Context) (Stats, error) {
	st, err := c.core.cs.Stats(ctx, c.core.scopeValues())
	if err != nil {
		return Stats{}, storeError("stats", err)
	}
	return Stats(st), nil
}

// TableStats is [Claimer.Stats] for the whole table: it counts every row,
// whatever its scope (for a table without Scope, the same as Stats). A
// whole-table count reads every row of the table: keep it for small tables
// or for reports.
func (c *Claimer[T]) TableStats(ctx context.Context) (Stats, error) {
	st, err := c.core.cs.Stats(ctx, nil)
	if err != nil {
		return Stats{}, storeError("table stats", err)
	}
	return Stats(st), nil
}

// Bounds of the operator methods.
const (
	// MaxListLimit is the largest limit [Claimer.List] takes.
	MaxListLimit = store.MaxListLimit
	// MaxRowIDs is the most keys one [Claimer.Unpark] or
	// [Claimer.RetryNow] call takes.
	MaxRowIDs = store.MaxFilterIDs
)

// RowSet is a set of rows [Claimer.List] lists.
type RowSet int

// The sets of rows an operator lists.
const (
	// Parked rows (the failed status), oldest claim first.
	Parked RowSet = RowSet(store.SetFailed)
	// Stuck rows: processing for longer than List's olderThan, oldest
	// claim or heartbeat first.
	Stuck RowSet = RowSet(store.SetProcessing)
	// Scheduled rows: pending, waiting for a RunAt in the future, soonest
	// first (needs RunAt).
	Scheduled RowSet = RowSet(store.SetScheduled)
)

// RowInfo is one row as an operator sees it. Ages are on the database
// clock.
type RowInfo struct {
	// ID is the key: an int64 for integer keys, a string for text keys.
	ID any
	// Token is the claim token ("" when none).
	Token string
	// Attempts is the Attempts column (0 without it).
	Attempts int64
	// ClaimedAge is how long ago ClaimedAt was set (the claim or the last
	// heartbeat); -1 when ClaimedAt is NULL.
	ClaimedAge time.Duration
	// RunIn is how long until RunAt (0 when it is NULL or past, and
	// without the column).
	RunIn time.Duration
	// Error is the Error column's text ("" when NULL or without it).
	Error string
	// Worker is the Worker column's text: the [Config.Worker] of the row's
	// last claim ("" when NULL or without the column).
	Worker string
}

// Unpark returns parked rows of the claimer's scope (all of them, or only
// ids when given) to pending: token, error and RunAt cleared, and attempts
// reset to zero with resetAttempts (so that they get Config.MaxAttempts
// fresh attempts). It takes at most [MaxRowIDs] ids. It returns how many it
// unparked. Use it after an outage that parked rows which would now
// succeed. Large scopes are unparked in bounded statements, not
// atomically.
func (c *Claimer[T]) Unpark(ctx context.Context, resetAttempts bool, ids ...any) (int64, error) {
	p := &store.UnparkParams{RowFilter: c.filter(ids), ResetAttempts: resetAttempts}
	n, err := c.core.cs.Unpark(ctx, p)
	if err != nil {
		return n, storeError("unpark", err)
	}
	return n, nil
}

// RetryNow makes pending rows of the claimer's scope that wait for a
// future RunAt (a backoff or a snooze) claimable at once: all of them, or
// only ids when given (at most [MaxRowIDs]). It returns how many it
// changed. It needs a RunAt column.
func (c *Claimer[T]) RetryNow(ctx context.Context, ids ...any) (int64, error) {
	n, err := c.core.cs.RetryNow(ctx, c.filter(ids))
	if err != nil {
		return n, storeError("retry now", err)
	}
	return n, nil
}

// List returns up to limit rows (at most [MaxListLimit]) of the claimer's
// scope in set: parked rows with their attempts and stored error, stuck rows
// (processing for longer than olderThan, oldest first) or rows scheduled
// for later. Ages are on the database clock. It reads through the
// recommended indexes; it is for operators and reports.
func (c *Claimer[T]) List(ctx context.Context, set RowSet, olderThan time.Duration, limit int) ([]RowInfo, error) {
	rows, err := c.core.cs.List(ctx, &store.ListParams{Set: store.RowSet(set), ScopeValues: c.core.scopeValues(), OlderThan: olderThan, Limit: limit})
	if err != nil {
		return nil, storeError("list", err)
	}
	out := make([]RowInfo, len(rows))
	for i, r := range rows {
		out[i] = RowInfo(r)
	}
	return out, nil
}

func (c *Claimer[T]) filter(ids []any) store.RowFilter {
	f := store.RowFilter{ScopeValues: c.core.scopeValues()}
	if len(ids) > 0 {
		f.IDs = ids
	}
	return f
}

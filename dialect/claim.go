package dialect

import (
	"context"
	"fmt"
	"time"
)

// IDKind is the type of a key column. It matters for ordering expressions
// (PostgreSQL's plan-stable ORDER BY id + 0 needs an integer) and for DDL.
type IDKind int

const (
	// IDInt is an integer key (the default).
	IDInt IDKind = iota
	// IDText is a string key, including UUIDs stored as text.
	IDText
)

// ClaimTable describes a table whose rows are claimed. Column fields name the
// user's existing columns; the optional ones enable features.
type ClaimTable struct {
	// Table is the table name, optionally schema-qualified.
	Table string
	// ID is the primary key column (required). Claims order by it.
	ID string
	// IDKind is the key's type; zero means integer.
	IDKind IDKind
	// Status is the status column (required).
	Status string
	// Token is the claim token column, at least VARCHAR(40) (required).
	Token string
	// ClaimedAt is the claim time column (required); heartbeats move it and
	// the reaper compares it with the database clock.
	ClaimedAt string
	// Attempts, if set, is incremented by every claim; it lets the reaper
	// and Fail park rows that keep failing.
	Attempts string
	// Version, if set, is an integer that writers increment when the row
	// changes. A claim returns it and a version-conditioned ack puts a row
	// whose version moved back to pending instead of done.
	Version string
	// CreatedAt, if set, is used by Stats for the age of the oldest pending
	// row.
	CreatedAt string
	// RunAt, if set, is a nullable time column saying when a pending row
	// may be claimed, on the database clock: claims take only rows whose
	// RunAt is NULL or not in the future. A retried fail with a delay and a
	// snooze set it to the database's now plus the delay; unparking and
	// retrying now clear it. Same type conventions as ClaimedAt.
	RunAt string
	// Error, if set, is a nullable text column where failing a row stores
	// the error's text, cut to the column's declared width (learnt from the
	// catalog by VerifySchema, whole characters only); an ack to done
	// clears it, so a parked row says why it was parked.
	Error string
	// ClearClaimedAt sets ClaimedAt to NULL whenever a row goes back to
	// pending (a release, a reap, a retried fail, a requeued versioned
	// ack), as the cron story's own release does, so that existing code
	// reading the column sees only times of rows in flight. The column must
	// be nullable (verification checks it). Rows that end done or failed
	// keep their last claim time.
	ClearClaimedAt bool
	// TextTimes (SQLite only) stores and compares ClaimedAt and CreatedAt
	// as text in SQLite's own format, 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, as
	// datetime('now') and CURRENT_TIMESTAMP write them, for tables whose
	// code already keeps dates there as text. Without it claimlock writes
	// integer milliseconds; verification refuses a column declared as a
	// date or text type unless TextTimes is set, and one declared INTEGER if
	// it is, so the two conventions never mix in one column.
	TextTimes bool
	// Columns are extra columns returned by a claim, in this order, after
	// the key (and the version, if set).
	Columns []string
	// Scope are the columns of the equality conditions every claim, reap and
	// stats call is restricted to (task_id = ?); values come per call.
	Scope []string
	// Status values, all required (string values default to PENDING,
	// PROCESSING, DONE and FAILED). Failed is the status of parked rows: a
	// row that keeps failing is parked, never retried forever.
	Pending, Processing, Done, Failed Status
}

// Validate checks every identifier and status value, returning an error
// wrapping [ErrInvalidConfig] that names the first bad field.
func (s ClaimTable) Validate() error {
	if err := ValidateIdent("Table", s.Table); err != nil {
		return err
	}
	req := []struct{ f, v string }{{"ID", s.ID}, {"Status", s.Status}, {"Token", s.Token}, {"ClaimedAt", s.ClaimedAt}}
	for _, c := range req {
		if err := ValidateColumn(c.f, c.v); err != nil {
			return err
		}
	}
	opt := []struct{ f, v string }{{"Attempts", s.Attempts}, {"Version", s.Version}, {"CreatedAt", s.CreatedAt}, {"RunAt", s.RunAt}, {"Error", s.Error}}
	for _, c := range opt {
		if c.v == "" {
			continue
		}
		if err := ValidateColumn(c.f, c.v); err != nil {
			return err
		}
	}
	for i, c := range s.Columns {
		if err := ValidateColumn(fmt.Sprintf("Columns[%d]", i), c); err != nil {
			return err
		}
	}
	for i, c := range s.Scope {
		if err := ValidateColumn(fmt.Sprintf("Scope[%d]", i), c); err != nil {
			return err
		}
	}
	if s.IDKind != IDInt && s.IDKind != IDText {
		return fmt.Errorf("%w: IDKind: unknown kind %d", ErrInvalidConfig, s.IDKind)
	}
	if err := s.checkStatuses(); err != nil {
		return err
	}
	if err := s.checkRoles(); err != nil {
		return err
	}
	all := []Status{s.Pending, s.Processing, s.Done, s.Failed}
	for i := range all {
		if all[i].IsNumeric() != all[0].IsNumeric() {
			return fmt.Errorf("%w: status values mix strings and integers", ErrInvalidConfig)
		}
		for j := i + 1; j < len(all); j++ {
			if all[i] == all[j] {
				return fmt.Errorf("%w: status value %s is used twice", ErrInvalidConfig, all[i])
			}
		}
	}
	return nil
}

// Scanner reads one result row; *sql.Rows satisfies it.
type Scanner interface {
	Scan(dest ...any) error
}

// ClaimParams are the inputs of one claim.
type ClaimParams struct {
	// Token is the fresh claim token written to every claimed row.
	Token string
	// Limit is the most rows to claim (positive).
	Limit int
	// ScopeValues are the values of [ClaimTable.Scope], in order.
	ScopeValues []any
	// Strategy is StrategyTokenUpdate or StrategySkipLocked (resolved by
	// the caller from StrategyAuto).
	Strategy Strategy
}

// AckOutcome is what an ack does to the rows still held by the token.
type AckOutcome int

const (
	// OutcomeDone sets the done status (or pending, for a version-
	// conditioned ack whose row's version moved).
	OutcomeDone AckOutcome = iota
	// OutcomeFailed parks the rows with the failed status.
	OutcomeFailed
	// OutcomeRetry returns the rows to pending, or parks them as failed when
	// MaxAttempts is positive and their attempts reached it.
	OutcomeRetry
)

// AckParams are the inputs of one ack of rows held by a token.
type AckParams struct {
	// Token is the claim token that must still hold the rows.
	Token string
	// IDs are the keys to ack, as returned by the claim.
	IDs []any
	// Versions, if not nil, are the versions read by the claim, one per ID:
	// a row whose version moved goes back to pending instead of done. Only
	// with OutcomeDone and a Version column.
	Versions []int64
	// Outcome is done, failed or retry.
	Outcome AckOutcome
	// MaxAttempts bounds OutcomeRetry (0: unbounded; needs Attempts).
	MaxAttempts int
	// Error is the failure's text. With an Error column, OutcomeFailed and
	// OutcomeRetry store it there (cut to the column's width; "" stores
	// NULL) and OutcomeDone clears the column (a version-conditioned ack
	// that requeues a row leaves it as it was).
	Error string
	// Delay, with a RunAt column, is how long rows an OutcomeRetry returns
	// to pending wait before they can be claimed again: their RunAt becomes
	// the database's now plus Delay (zero: now). It must not be negative,
	// and needs a RunAt column when positive.
	Delay time.Duration
}

// AckResult says what happened to each ID of an ack, by index into
// AckParams.IDs. Indexes in neither list were acked as asked.
type AckResult struct {
	// Lost are the rows the token no longer held ([ErrClaimLost]); they
	// were not touched.
	Lost []int
	// Requeued are rows that went back to pending instead of done because
	// their version moved since the claim.
	Requeued []int
	// Parked are rows an OutcomeRetry parked as failed (attempts reached
	// MaxAttempts).
	Parked []int
}

// RowFilter selects the rows of an operator action or listing.
type RowFilter struct {
	// ScopeValues, if not nil, restrict the rows to [ClaimTable.Scope].
	ScopeValues []any
	// IDs, if not nil, restrict the rows to these keys (at most
	// [MaxFilterIDs]).
	IDs []any
}

// MaxFilterIDs bounds [RowFilter.IDs]: one statement lists every key.
const MaxFilterIDs = 10000

// UnparkParams are the inputs of [ClaimStore.Unpark].
type UnparkParams struct {
	RowFilter
	// ResetAttempts sets the Attempts column to zero, so that the rows get
	// MaxAttempts fresh attempts (needs Attempts).
	ResetAttempts bool
}

// RowSet is the set of rows [ClaimStore.List] lists.
type RowSet int

const (
	// SetFailed lists parked rows (the failed status), oldest claim
	// first.
	SetFailed RowSet = iota
	// SetProcessing lists rows being processed (claimed), oldest claim or
	// heartbeat first.
	SetProcessing
	// SetScheduled lists pending rows whose RunAt is in the future,
	// soonest first (needs RunAt).
	SetScheduled
)

// ListParams are the inputs of [ClaimStore.List].
type ListParams struct {
	// Set is which rows to list.
	Set RowSet
	// ScopeValues, if not nil, restrict the rows to [ClaimTable.Scope].
	ScopeValues []any
	// OlderThan, for SetProcessing, lists only rows whose claim or last
	// heartbeat is older than this on the database clock (stuck rows).
	OlderThan time.Duration
	// Limit is the most rows listed (1 to [MaxListLimit]).
	Limit int
}

// MaxListLimit bounds [ListParams.Limit].
const MaxListLimit = 10000

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
}

// ReapParams are the inputs of one bounded reaper statement pair.
type ReapParams struct {
	// Timeout is how long a row may stay processing without a heartbeat,
	// measured on the database clock (positive).
	Timeout time.Duration
	// Limit bounds the rows touched per statement (positive).
	Limit int
	// MaxAttempts parks a stale row whose attempts reached it instead of
	// returning it (0: never park; needs Attempts).
	MaxAttempts int
	// ScopeValues, if not nil, restrict the sweep to [ClaimTable.Scope].
	ScopeValues []any
}

// ReapResult counts what one reap call did.
type ReapResult struct {
	// Returned rows went back to pending with their token cleared.
	Returned int64
	// Parked rows were set to the failed status.
	Parked int64
}

// Stats are counts per status and ages on the database clock.
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

// ClaimStore holds one claim table's prepared statements. Every method that
// changes rows runs in READ COMMITTED where the engine has isolation levels,
// and retries deadlocks and serialization failures internally.
type ClaimStore interface {
	// Claim marks up to p.Limit pending rows in scope as processing under
	// p.Token (incrementing Attempts, if configured), ordered by the key,
	// and calls scan once per claimed row with the columns: key, version
	// (if configured), attempts (if configured: the count after this
	// claim's increment), then ClaimTable.Columns. It returns the number of
	// rows claimed. A scan error aborts; rows already marked stay claimed
	// under the token (the caller releases them).
	//
	// When an attempt fails with a retryable error after scan was called,
	// the dialect runs the claim again and calls scan for the new attempt's
	// rows: the rows of the committed attempt are always the last n passed
	// to scan, where n is the returned count. Callers keep those.
	Claim(ctx context.Context, p *ClaimParams, scan func(Scanner) error) (int, error)

	// Ack applies p.Outcome to the rows of p.IDs that p.Token still holds,
	// clearing their token. Rows it no longer holds are reported in
	// AckResult.Lost and left untouched.
	Ack(ctx context.Context, p *AckParams) (AckResult, error)

	// AckTx is Ack inside the caller's transaction tx, so that the
	// caller's own writes and the ack commit or roll back together: a
	// *sql.Tx on the same database, or a pgx.Tx for the PostgreSQL dialect
	// on a pgxpool (another type is an error wrapping [ErrInvalidConfig]).
	// The same token and version conditions hold, the acked rows stay
	// locked until the caller commits, and lost rows are reported before
	// the caller commits: a caller that must not commit its writes for a
	// lost claim rolls back. AckTx neither retries (a deadlock aborts the
	// caller's transaction, which the caller runs again) nor commits. On
	// SQLite, begin the transaction as a write (BEGIN IMMEDIATE: what
	// sqlite.Open's handle does, or _txlock=immediate in a DSN of one's
	// own) or it may fail with SQLITE_BUSY.
	AckTx(ctx context.Context, tx any, p *AckParams) (AckResult, error)

	// ReleaseTx is Release of the ids rows inside the caller's
	// transaction tx (see AckTx).
	ReleaseTx(ctx context.Context, tx any, token string, ids []any) (int64, error)

	// Read calls scan for each row token holds (only those of ids when ids
	// is not nil), in key order, with the columns a claim returns, and
	// returns how many it read. It changes nothing: a claimer uses it to
	// salvage a batch when one of its rows cannot be read.
	Read(ctx context.Context, token string, ids []any, scan func(Scanner) error) (int, error)

	// Heartbeat moves ClaimedAt to the database's now for every row token
	// still holds (strictly forward, so the write always changes the row) and
	// returns how many it holds.
	Heartbeat(ctx context.Context, token string) (int64, error)

	// Release returns the rows token still holds to pending (all of them if
	// ids is nil), clearing the token and undoing the claim's Attempts
	// increment, and returns how many it released.
	Release(ctx context.Context, token string, ids []any) (int64, error)

	// Snooze returns the processing rows of ids that token still holds to
	// pending like Release (the claim's attempt undone: a snooze is not a
	// failure), with RunAt set to the database's now plus delay, and returns
	// how many it snoozed. It needs a RunAt column.
	Snooze(ctx context.Context, token string, ids []any, delay time.Duration) (int64, error)

	// Unpark returns the failed rows that p selects to pending, clearing
	// their token, error and RunAt (and attempts, with ResetAttempts), and
	// returns how many. It works in bounded statements (scope-wide unparks
	// of many rows take several) and is not atomic across them.
	Unpark(ctx context.Context, p *UnparkParams) (int64, error)

	// RetryNow clears the RunAt of the pending rows f selects that wait for
	// a future RunAt, so that the next claims can take them, and returns
	// how many. It needs a RunAt column; like Unpark it works in bounded
	// statements.
	RetryNow(ctx context.Context, f RowFilter) (int64, error)

	// List returns up to p.Limit rows of p.Set (in scope, when
	// p.ScopeValues is not nil): parked rows oldest claim first, processing rows
	// oldest claim first, scheduled rows soonest RunAt first. It reads
	// through the recommended indexes; it is for operators, not for loops.
	List(ctx context.Context, p *ListParams) ([]RowInfo, error)

	// Reap parks (attempts at MaxAttempts) and returns to pending (the rest)
	// at most p.Limit rows each that have been processing longer than
	// p.Timeout on the database clock, oldest claim (or last heartbeat)
	// first. Each statement reads the stale rows through the reap index,
	// never the table; parking reads the stale rows until it has found
	// p.Limit at MaxAttempts, so its cost grows with a backlog of stale
	// rows (not with the table). A dialect may skip
	// rows locked by a concurrent ack or heartbeat (SKIP LOCKED), so a
	// statement can touch fewer rows than the limit while stale rows remain:
	// callers sweep again later rather than treating a short count as "all
	// done forever".
	Reap(ctx context.Context, p *ReapParams) (ReapResult, error)

	// Stats counts rows per status (in scope when scopeValues is not nil).
	// It is a count, so it reads every row it counts: scoped, the scope's
	// rows through an index (the scope index on PostgreSQL and SQLite, the
	// claim index on MySQL); unscoped, the whole table, by design. Call it
	// for reports, not in a loop over a large table.
	Stats(ctx context.Context, scopeValues []any) (Stats, error)

	// IndexDDL returns the CREATE INDEX statements recommended for this
	// table ([ClaimTable.Indexes]): the claim index, the token index, the
	// reaper's (status, claimed_at) index and, for a scoped table on the
	// engines that use it, the scope index (scope..., status, claimed_at).
	// They block writes to the table while they build: for a table in use,
	// build them online ([IndexDDLer], [IndexOptions]).
	IndexDDL() []string

	// MissingIndexes returns the recommended indexes (as DDL) that the
	// database does not have, so callers can warn at start-up. An index
	// that exists but that queries cannot use (PostgreSQL's INVALID index,
	// left by a failed CREATE INDEX CONCURRENTLY) is missing too, its DDL
	// preceded by the DROP INDEX that removes it.
	MissingIndexes(ctx context.Context) ([]string, error)

	// VerifySchema reads the table's columns from the catalog and returns
	// an error wrapping [ErrInvalidConfig] when the table or a configured
	// column is missing, the token column is shorter than a token (a
	// non-strict MySQL would truncate tokens silently and strand the rows
	// it claimed), or the status column cannot hold a status value as it
	// is: an integer out of the column's range, a string too long, not a
	// member of an enum type, or of the other kind than the column's (an
	// integer in a text column, a string in an integer one). Claimers,
	// reapers and lockers call it once before their first statement.
	//
	// It also learns the column types against which later calls check
	// their values before any statement runs: a MaxAttempts the Attempts
	// column cannot hold, and scope values outside their column's range or
	// of the other kind, are errors wrapping [ErrInvalidConfig].
	VerifySchema(ctx context.Context) error
}

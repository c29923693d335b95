package store

import (
	"context"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

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
	// ScopeValues are the values of [dialect.ClaimTable.Scope], in order.
	ScopeValues []any
	// Strategy is StrategyTokenUpdate or StrategySkipLocked (resolved by
	// the caller from StrategyAuto).
	Strategy dialect.Strategy
	// Worker is the name a claim writes to [dialect.ClaimTable.Worker],
	// cut to the column's width (ignored without the column).
	Worker string
}

// AckOutcome is what an ack does to the rows still held by the token.
type AckOutcome int

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
	// Lost are the rows the token no longer held ([dialect.ErrClaimLost]); they
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
	// ScopeValues, if not nil, restrict the rows to [dialect.ClaimTable.Scope].
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

// ListParams are the inputs of [ClaimStore.List].
type ListParams struct {
	// Set is which rows to list.
	Set RowSet
	// ScopeValues, if not nil, restrict the rows to [dialect.ClaimTable.Scope].
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
	// Worker is the Worker column's text: the worker of the row's last
	// claim ("" when NULL or without the column).
	Worker string
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
	// ScopeValues, if not nil, restrict the sweep to [dialect.ClaimTable.Scope].
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
	// IndexDDLer builds the recommended indexes online.
	IndexDDLer

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
	// on a pgxpool (another type is an error wrapping [dialect.ErrInvalidConfig]).
	// The same token and version conditions hold, the acked rows stay
	// locked until the caller commits, and lost rows are reported before
	// the caller commits: a caller that must not commit its writes for a
	// lost claim rolls back. AckTx neither retries (a deadlock aborts the
	// caller's transaction, which the caller runs again) nor commits. On
	// SQLite, begin the transaction as a write (BEGIN IMMEDIATE: what
	// sqlite.Open's handle does, or _txlock=immediate in a DSN of one's
	// own) or it may fail with SQLITE_BUSY.
	AckTx(ctx context.Context, tx dialect.Tx, p *AckParams) (AckResult, error)

	// Read calls scan for each row token holds (only those of ids when ids
	// is not nil), in key order, with the columns a claim returns, and
	// returns how many it read. It changes nothing: a claimer uses it to
	// salvage a batch when one of its rows cannot be read.
	Read(ctx context.Context, token string, ids []any, scan func(Scanner) error) (int, error)

	// Heartbeat moves ClaimedAt to the database's now for every row token
	// still holds (strictly forward, so the write always changes the row) and
	// returns their keys, normalised as by [NormalizeKey], in no particular
	// order: a caller compares them with the rows it expects to hold, and
	// the missing ones are lost (reaped, released, reset or deleted by
	// someone else).
	Heartbeat(ctx context.Context, token string) (held []any, err error)

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
	// table ([recommendedIndexes]): the claim index, the token index, the
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
	// an error wrapping [dialect.ErrInvalidConfig] when the table or a configured
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
	// of the other kind, are errors wrapping [dialect.ErrInvalidConfig].
	VerifySchema(ctx context.Context) error
}

// LeaseInfo is the state of a lease as written by an acquire or renew.
type LeaseInfo struct {
	// Fence is the fencing token: the Fence column after this acquisition
	// (0 without one). Renew returns the same fence.
	Fence int64
	// ExpiresAt is the expiry on the database clock, for display; holders
	// must use a local monotonic deadline instead.
	ExpiresAt time.Time
	// Owner is the token that renewals, releases and Finish must present
	// from now on: the owner passed to Acquire, or, in a table without an
	// Owner column, the lease's stamp (the LockedAt value written, as a
	// decimal integer), which a renewal may move.
	Owner string
}

// LeaseState is a lease row as read by Inspect.
type LeaseState struct {
	// Owner is the owner token, "" when free.
	Owner string
	// Fence is the fence column (0 without one).
	Fence int64
	// ExpiresAt is the expiry on the database clock (zero when free).
	ExpiresAt time.Time
	// Expired is true when the lease has an owner but its expiry passed, by
	// the database clock.
	Expired bool
	// Exists is false when no row has the key.
	Exists bool
	// Status is the Status column's value as text ("" without the column
	// or when NULL); Inspect reads it, Held does not.
	Status string
}

// LeaseHolder is one lease [LeaseStore.Held] lists.
type LeaseHolder struct {
	// Key is the lease's key: a string for text keys, an int64 otherwise.
	Key any
	// LeaseState is its owner, fence, expiry and whether it expired.
	LeaseState
	// Remaining is the time left until the expiry on the database clock
	// (zero once expired).
	Remaining time.Duration
}

// MaxHeldLimit bounds the limit of [LeaseStore.Held].
const MaxHeldLimit = 10000

// LeaseStore holds one lease table's prepared statements. Each method is one
// short autocommit statement (plus a read-back where the engine has no
// RETURNING), retried on deadlocks.
type LeaseStore interface {
	// Acquire takes key for owner for ttl if it is free or expired, by one
	// compare-and-set on the database clock, incrementing the fence. A
	// lease held by anyone, the same owner included, is [dialect.ErrLeaseHeld]; a
	// missing row of a non-keyed table is [dialect.ErrKeyNotFound].
	Acquire(ctx context.Context, key any, owner string, ttl time.Duration) (LeaseInfo, error)

	// Renew extends the lease to now + ttl on the database clock while owner
	// still holds it, even if it has just expired and nobody took it yet.
	// Otherwise it returns [dialect.ErrLeaseLost]. The new expiry is always later
	// than the old one, so the write changes the row even within one
	// microsecond (MySQL reports changed, not matched, rows).
	Renew(ctx context.Context, key any, owner string, ttl time.Duration) (LeaseInfo, error)

	// Release frees the lease if owner still holds it and reports whether it
	// did. Releasing someone else's lease is a no-op (false, nil).
	//
	// A non-zero holdUntil is a minimum hold: a time on the database clock
	// (the acquisition time, as the acquire statement wrote it, plus the
	// hold) before which the key must not be acquired again. While it is
	// ahead of the database's now, Release leaves owner in place and moves
	// the expiry to holdUntil (plus the resolution of the time columns)
	// instead of freeing the lease, so that acquisitions are refused until
	// then, whatever the callers' clocks; past it, Release frees the lease
	// as with a zero holdUntil. A minimum hold needs Owner and ExpiresAt
	// columns; without them it is [dialect.ErrInvalidConfig]. ForceRelease and
	// ReapExpired end a hold like any lease.
	Release(ctx context.Context, key any, owner string, holdUntil time.Time) (bool, error)

	// Finish sets the table's Status column to status and frees the lease,
	// in one statement conditioned on owner still holding it, and reports
	// whether it did: a task is marked done only by its current holder. It
	// needs LeaseTable.Status. holdUntil is a minimum hold, as for Release.
	Finish(ctx context.Context, key any, owner string, status any, holdUntil time.Time) (bool, error)

	// ForceRelease frees the lease whoever holds it (an operator's tool),
	// and reports whether it was held.
	ForceRelease(ctx context.Context, key any) (bool, error)

	// Inspect reads the lease of key. Without an ExpiresAt column the
	// expiry is LockedAt + ttl and Expired says whether an acquisition with
	// ttl would take the lease now (ttl must then be positive; with an
	// ExpiresAt column it is ignored).
	Inspect(ctx context.Context, key any, ttl time.Duration) (LeaseState, error)

	// Held lists up to limit leases that are held (or expired but not yet
	// freed or reaped), soonest expiry first: key, owner (the stamp without
	// an Owner column), fence, expiry and the time left until it, both on
	// the database clock. With an ExpiresAt column it reads the expiry
	// index and ignores ttl; without one the expiry is LockedAt + ttl (ttl
	// must be positive), in LockedAt order, which reads the whole table
	// unless LockedAt is indexed. It is for operators, not for loops.
	Held(ctx context.Context, limit int, ttl time.Duration) ([]LeaseHolder, error)

	// ReapExpired clears the owner of at most limit expired leases (the row
	// and its fence stay, so fences keep increasing) and returns how many.
	ReapExpired(ctx context.Context, limit int) (int64, error)

	// VerifySchema reads the table's columns from the catalog and returns
	// an error wrapping [dialect.ErrInvalidConfig] when the table or a configured
	// column is missing, the owner column is shorter than a token, the
	// fence column holds text, or the key column's kind contradicts
	// KeyKind. It also learns the key and status columns' types: later,
	// a key outside the key column's range and a Finish status the status
	// column cannot hold are errors wrapping [dialect.ErrInvalidConfig] before any
	// statement runs.
	VerifySchema(ctx context.Context) error
}

// AckClaimParams are the inputs of [AckClaimer.AckAndClaim]: the ack of one
// batch and the claim of the next, run together.
type AckClaimParams struct {
	// Ack completes rows of the previous batch exactly as [ClaimStore.Ack]
	// would (token condition, versions, outcome, MaxAttempts, Error,
	// Delay). An empty Ack.IDs acks nothing.
	Ack AckParams
	// Claim claims the next batch exactly as [ClaimStore.Claim] would. Its
	// token must differ from Ack.Token.
	Claim ClaimParams
}

// AckClaimer is the optional interface of a [ClaimStore] that completes one
// batch and claims the next in one round trip where the engine allows it
// (PostgreSQL: one statement with data-modifying CTEs) and otherwise in one
// transaction (MySQL/MariaDB: READ COMMITTED; SQLite: BEGIN IMMEDIATE),
// so that a worker loop pays one commit per batch instead of two. Every
// store of this module's dialects implements it;
// [dialect.Capabilities.PipelineAckClaim] says whether claim loops use it by
// default.
type AckClaimer interface {
	// AckAndClaim applies p.Ack and claims as p.Claim says, atomically: both
	// commit or neither does. The ack's result has the meaning of
	// [ClaimStore.Ack]'s (lost rows are reported, not an error, and do not
	// stop the claim); scan is called for each claimed row as by
	// [ClaimStore.Claim], and the count of claimed rows is returned.
	//
	// Retryable conflicts re-run the whole operation (scan is then called
	// again for the new attempt's rows: keep the last n). When it returns
	// another error, nothing was committed, unless the error wraps
	// [dialect.ErrOutcomeUnknown]: then both parts may have committed, and the
	// caller releases the claim token's rows (Release with nil ids) and
	// treats the acked rows as an ack of unknown outcome.
	//
	// An error of scan does not abort: the operation runs to its end and
	// commits, scan is not called again, and AckAndClaim returns the ack's
	// result and the count of claimed rows with an error wrapping scan's.
	// The caller reads the claimed rows again ([ClaimStore.Read]).
	AckAndClaim(ctx context.Context, p *AckClaimParams, scan func(Scanner) error) (AckResult, int, error)
}

// Notifier is implemented by dialects that can tell the claimers of one
// process that another process made rows pending (PostgreSQL's
// LISTEN/NOTIFY, with the dialect's listener running). It is optional: a
// claimer checks for it with a type assertion, and without it (or while
// the listener is down) idle claimers find new rows by polling.
//
// A dialect that implements it also sends the notification itself whenever
// one of its stores returns rows to pending (a release, a failed row to be
// retried, a requeued versioned ack, a reap), so that other processes'
// claimers do not wait for their next poll.
type Notifier interface {
	// Subscribe registers wake to be called when a notification arrives for
	// spec's table and the scope values scopeValues (in the order of
	// spec.Scope; nil for a table without scope), or for the table as a
	// whole (a reap of every scope), until cancel is called. wake must
	// return quickly and must not block; it may be called when no row is
	// pending (a notification is a hint, never a promise), and it may be
	// called after cancel returns if a notification was being dispatched.
	Subscribe(spec dialect.ClaimTable, scopeValues []any, wake func()) (cancel func())
}

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

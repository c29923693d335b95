package dialect

import (
	"context"
	"fmt"
	"time"
)

// MaxTokenLen is the shortest owner/token column claimlock accepts: tokens
// from [NewToken] are shorter, and the design fixes VARCHAR(40).
const MaxTokenLen = 40

// LeaseTable describes the table leases live in: the user's own task table
// (Keyed false: rows exist already, keyed by their id) or a library-managed
// key table (Keyed true: acquire inserts a missing key first).
type LeaseTable struct {
	// Table is the table name, optionally schema-qualified.
	Table string
	// Key is the key column (a task id, or a string key).
	Key string
	// KeyKind is the key's type; zero means integer.
	KeyKind IDKind
	// KeyMaxLen is the length of a text key column; longer keys are
	// rejected before any statement runs. Zero means 255.
	KeyMaxLen int
	// Owner is the owner token column, at least VARCHAR(40). Leave it
	// empty for a task table that has only a lock time (the cron story's
	// xxx_task(id, status, lock_at)): the lease is then identified by the
	// LockedAt value its acquisition or last renewal wrote, read back from
	// the database as an integer on its own clock, and renewals, releases
	// and Finish are conditioned on that value (see [LeaseInfo.Owner]).
	// Two holders can never share it: a new acquisition writes LockedAt at
	// least a TTL plus the column's resolution after the old value. That
	// mode needs a non-keyed table without ExpiresAt.
	Owner string
	// Status, if set, is the task's status column, which
	// [LeaseStore.Finish] sets when it releases a lease it still holds.
	Status string
	// LockedAt is the acquisition/renewal time column (the cron story's
	// lock_at). Required.
	LockedAt string
	// ExpiresAt, if set, holds the expiry; without it a lease expires at
	// LockedAt + TTL, which is only safe when every holder of a key uses the
	// same TTL.
	ExpiresAt string
	// Fence, if set, is an integer incremented by every acquisition: the
	// fencing token. Without it leases report fence 0.
	Fence string
	// Keyed makes acquire insert a row for a missing key first.
	Keyed bool
	// TextTimes (SQLite only) stores and compares LockedAt and ExpiresAt
	// as text in SQLite's own format, 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, as
	// [ClaimTable.TextTimes] does for claim tables: for task tables whose
	// code already keeps its lock time there as text (the cron story's
	// xxx_task.lock_at DATETIME). Without it claimlock writes integer
	// milliseconds; verification refuses a column declared as a date or
	// text type unless TextTimes is set, and one declared INTEGER if it is.
	// The application's own text dates (datetime('now'),
	// CURRENT_TIMESTAMP) hold whole seconds, so every expiry test on text
	// dates allows a whole second more: a lease is never taken before its
	// expiry, and may be taken up to a second after it.
	TextTimes bool
}

// Validate checks identifiers and lengths, returning an error wrapping
// [ErrInvalidConfig] that names the first bad field.
func (s LeaseTable) Validate() error {
	if err := ValidateIdent("Table", s.Table); err != nil {
		return err
	}
	for _, c := range []struct{ f, v string }{{"Key", s.Key}, {"LockedAt", s.LockedAt}} {
		if err := ValidateColumn(c.f, c.v); err != nil {
			return err
		}
	}
	if s.Owner == "" && (s.Keyed || s.ExpiresAt != "") {
		return fmt.Errorf("%w: Owner: a lease without an owner column needs a non-keyed table without ExpiresAt", ErrInvalidConfig)
	}
	for _, c := range []struct{ f, v string }{{"Owner", s.Owner}, {"Status", s.Status}, {"ExpiresAt", s.ExpiresAt}, {"Fence", s.Fence}} {
		if c.v == "" {
			continue
		}
		if err := ValidateColumn(c.f, c.v); err != nil {
			return err
		}
	}
	if s.KeyKind != IDInt && s.KeyKind != IDText {
		return fmt.Errorf("%w: KeyKind: unknown kind %d", ErrInvalidConfig, s.KeyKind)
	}
	if s.KeyMaxLen < 0 {
		return fmt.Errorf("%w: KeyMaxLen: negative", ErrInvalidConfig)
	}
	return nil
}

// MaxKeyLen returns KeyMaxLen or its default, 255.
func (s LeaseTable) MaxKeyLen() int {
	if s.KeyMaxLen == 0 {
		return 255
	}
	return s.KeyMaxLen
}

// CheckKey validates a key value against the table: an integer type for
// integer keys, a non-empty string of at most MaxKeyLen bytes for text keys.
func (s LeaseTable) CheckKey(key any) error {
	switch s.KeyKind {
	case IDText:
		k, ok := key.(string)
		if !ok {
			return fmt.Errorf("%w: key %v has type %T; want string", ErrInvalidConfig, key, key)
		}
		if k == "" {
			return fmt.Errorf("%w: key is empty", ErrInvalidConfig)
		}
		if len(k) > s.MaxKeyLen() {
			return fmt.Errorf("%w: key is %d bytes; the column holds %d", ErrInvalidConfig, len(k), s.MaxKeyLen())
		}
	default:
		switch key.(type) {
		case int, int8, int16, int32, int64, uint8, uint16, uint32:
		default:
			return fmt.Errorf("%w: key %v has type %T; want an integer", ErrInvalidConfig, key, key)
		}
	}
	return nil
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
	// lease held by anyone, the same owner included, is [ErrLeaseHeld]; a
	// missing row of a non-keyed table is [ErrKeyNotFound].
	Acquire(ctx context.Context, key any, owner string, ttl time.Duration) (LeaseInfo, error)

	// Renew extends the lease to now + ttl on the database clock while owner
	// still holds it, even if it has just expired and nobody took it yet.
	// Otherwise it returns [ErrLeaseLost]. The new expiry is always later
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
	// columns; without them it is [ErrInvalidConfig]. ForceRelease and
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

	// Inspect reads the lease of key.
	Inspect(ctx context.Context, key any) (LeaseState, error)

	// Held lists up to limit leases that are held (or expired but not yet
	// freed or reaped), soonest expiry first, through the expiry index:
	// key, owner (the stamp without an Owner column), fence, expiry and
	// the time left until it, both on the database clock. It needs an
	// ExpiresAt column ([ErrNotSupported] without one). It is for
	// operators, not for loops.
	Held(ctx context.Context, limit int) ([]LeaseHolder, error)

	// ReapExpired clears the owner of at most limit expired leases (the row
	// and its fence stay, so fences keep increasing) and returns how many.
	ReapExpired(ctx context.Context, limit int) (int64, error)

	// VerifySchema reads the table's columns from the catalog and returns
	// an error wrapping [ErrInvalidConfig] when the table or a configured
	// column is missing, the owner column is shorter than a token, the
	// fence column holds text, or the key column's kind contradicts
	// KeyKind. It also learns the key and status columns' types: later,
	// a key outside the key column's range and a Finish status the status
	// column cannot hold are errors wrapping [ErrInvalidConfig] before any
	// statement runs.
	VerifySchema(ctx context.Context) error
}

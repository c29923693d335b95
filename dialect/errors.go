package dialect

import "errors"

// Sentinel errors shared by every dialect and re-exported by the orchestration
// packages, so that one errors.Is test works whichever package returned it.
var (
	// ErrInvalidConfig reports bad input found at construction: an invalid
	// identifier, a missing column, a status value of the wrong type, a
	// non-positive duration. The message names the field.
	ErrInvalidConfig = errors.New("claimlock: invalid configuration")

	// ErrClaimLost reports that a row is no longer held by the claim token
	// that tried to ack, fail, heartbeat or release it: it was reaped and
	// possibly re-claimed by someone else. The row was left untouched.
	ErrClaimLost = errors.New("claimlock: claim lost")

	// ErrLeaseHeld reports that a lease is held, unexpired, by another owner.
	ErrLeaseHeld = errors.New("claimlock: lease held by another owner")

	// ErrLeaseLost reports that the caller no longer owns a lease it tried to
	// renew: it expired and may have been taken over.
	ErrLeaseLost = errors.New("claimlock: lease lost")

	// ErrKeyNotFound reports a lease key with no row in a table that is not
	// library-managed (a task id that does not exist).
	ErrKeyNotFound = errors.New("claimlock: no row has this lease key")

	// ErrNotSupported reports an operation or strategy the engine (or its
	// version) cannot perform, such as SKIP LOCKED on MySQL 5.7.
	ErrNotSupported = errors.New("claimlock: not supported by this database")

	// ErrRetryable marks a deadlock, lock-wait timeout or serialization
	// failure (MySQL 1213 and 1205, PostgreSQL 40001 and 40P01, SQLITE_BUSY
	// and SQLITE_LOCKED). Operations retry these themselves; one that
	// surfaces has exhausted its [RetryPolicy]. Match it with [IsRetryable].
	ErrRetryable = errors.New("claimlock: retryable conflict")
)

// IsRetryable reports whether err is a deadlock, lock-wait timeout or
// serialization failure, as classified by the dialect that returned it. The
// whole statement or transaction that failed can be run again.
func IsRetryable(err error) bool { return errors.Is(err, ErrRetryable) }

// RetryableError wraps an engine error that is safe to retry. errors.Is(err,
// [ErrRetryable]) is true for it, and errors.As still reaches the engine's own
// error type through Unwrap. Engine packages construct it in their error
// classification.
type RetryableError struct{ Err error }

// Error returns the engine error's message.
func (e *RetryableError) Error() string { return e.Err.Error() }

// Unwrap returns the engine error.
func (e *RetryableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRetryable) true.
func (e *RetryableError) Is(target error) bool { return target == ErrRetryable }

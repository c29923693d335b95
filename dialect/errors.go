package dialect

import (
	"errors"

	"github.com/claimlock/claimlock/internal/errclass"
)

// Sentinel errors shared by every engine and by claim, tasklock and zombie,
// so that one errors.Is test works whichever package returned it. Their
// texts carry no package prefix: the error that wraps one names the package
// and the operation ("claim: ack: claim lost").
var (
	// ErrInvalidConfig reports bad input found at construction: an invalid
	// identifier, a missing column, a status value of the wrong type, a
	// non-positive duration. The message names the field.
	ErrInvalidConfig = errors.New("invalid configuration")

	// ErrClaimLost reports that a row is no longer held by the claim token
	// that tried to ack, fail, heartbeat or release it: it was reaped and
	// possibly re-claimed by someone else. The row was left untouched.
	ErrClaimLost = errors.New("claim lost")

	// ErrLeaseHeld reports that a lease is held, unexpired, by another owner.
	ErrLeaseHeld = errors.New("lease held by another owner")

	// ErrLeaseLost reports that the caller no longer owns a lease it tried to
	// renew: it expired and may have been taken over.
	ErrLeaseLost = errors.New("lease lost")

	// ErrLocalDeadline is the reason attached to [ErrClaimLost] or
	// [ErrLeaseLost] when a batch's or a lease's context ended because its
	// local deadline passed, measured on the local monotonic clock whether
	// or not the database answered: for a batch of claim.Claimer, (local
	// start of the claim statement, or of the last heartbeat that found
	// every row held) + claim.Config.ReapTimeout - SafetyMargin; for a held
	// batch, the start of its last statement that succeeded + the hold
	// limit - SafetyMargin; for a lease, the start of the last successful
	// acquire or renew + TTL - SafetyMargin. A reaper or another holder may
	// take the rows or the lease soon after, so work under them must stop.
	// The error of the batch or lease (Batch.Err, Lease.Err) matches both.
	ErrLocalDeadline = errors.New("local deadline passed")

	// ErrKeyNotFound reports a lease key with no row in a table that is not
	// library-managed (a task id that does not exist).
	ErrKeyNotFound = errors.New("no row has this lease key")

	// ErrNotSupported reports an operation or strategy the engine (or its
	// version) cannot perform, such as SKIP LOCKED on MySQL 5.7.
	ErrNotSupported = errors.New("not supported by this database")

	// ErrRetryable marks a deadlock, lock-wait timeout or serialization
	// failure (MySQL 1213 and 1205, PostgreSQL 40001 and 40P01, SQLITE_BUSY
	// and SQLITE_LOCKED), or a statement that never reached the server (a
	// refused connect, a pool that handed out no connection, a session the
	// server refused at connect). Operations retry these themselves; one
	// that surfaces has exhausted its [RetryPolicy]. Match it with
	// [IsRetryable].
	ErrRetryable = errors.New("retryable conflict")
)

// ErrOutcomeUnknown reports a write whose outcome the library cannot know:
// the connection broke, or the context ended, after the statement or its
// COMMIT reached the database and before the reply came back. The write may
// have taken effect. It is never retried blindly. For an ack this means the
// rows may be done: acking them again reports them as lost ([ErrClaimLost],
// their token was cleared by the first ack) or, if the first ack did not
// happen, acks them; a reaper returns rows whose ack never happened. The
// engine's error stays reachable with errors.As.
var ErrOutcomeUnknown = errors.New("outcome unknown: the connection broke or the context ended while the database had the write")

// ErrReadOnly reports a write refused because the server is read-only: a
// standby, a replica, or a primary demoted by a failover. It is not retried:
// point the connection at the primary.
var ErrReadOnly = errors.New("database is read-only")

// IsPermanent reports whether err cannot go away by running the operation
// again: an error wrapping [ErrInvalidConfig] or [ErrNotSupported], or an
// engine error that running it again fails the same way (a missing table or
// column, a permission denied, a value its column cannot hold). Loops that retry failed operations (the
// claimer's Run) stop on it and return it, so that a misconfiguration is
// reported once instead of logged at every poll.
func IsPermanent(err error) bool {
	return errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrNotSupported) || errclass.Of(err) == errclass.Permanent
}

// IsRetryable reports whether err is a deadlock, lock-wait timeout,
// serialization failure or busy error, or the error of a statement that
// never reached the server (nothing ran): the whole statement or
// transaction that failed can be run again. It accepts errors returned by claimlock
// (operations retry these themselves; one that surfaces has exhausted its
// [RetryPolicy]) and raw driver errors from the caller's own statements, so
// [Retry] can retry the caller's transactions too.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrRetryable) || errclass.Of(err).Retryable()
}

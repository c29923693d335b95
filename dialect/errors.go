package dialect

import (
	"errors"
	"sync"
)

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

// ErrOutcomeUnknown reports a write whose outcome the library cannot know:
// the connection broke, or the context ended, after the statement or its
// COMMIT reached the database and before the reply came back. The write may
// have taken effect. It is never retried blindly. For an ack this means the
// rows may be done: acking them again reports them as lost ([ErrClaimLost],
// their token was cleared by the first ack) or, if the first ack did not
// happen, acks them; a reaper returns rows whose ack never happened. The
// engine's error stays reachable with errors.As.
var ErrOutcomeUnknown = errors.New("claimlock: outcome unknown: the connection broke or the context ended while the database had the write")

// ErrReadOnly reports a write refused because the server is read-only: a
// standby, a replica, or a primary demoted by a failover. It is not retried:
// point the connection at the primary.
var ErrReadOnly = errors.New("claimlock: database is read-only")

// ErrorClass sorts an engine error by what the caller can do about it.
// Engine packages classify their driver's errors; [ClassifyError] and
// [IsRetryable] accept raw driver errors of every engine package linked into
// the program, as well as errors returned by claimlock.
type ErrorClass int

// The error classes.
const (
	// ClassOther is every error the classes below do not name.
	ClassOther ErrorClass = iota
	// ClassDeadlock: MySQL 1213, PostgreSQL 40P01.
	ClassDeadlock
	// ClassLockTimeout: MySQL 1205, PostgreSQL 55P03.
	ClassLockTimeout
	// ClassSerialization: PostgreSQL 40001.
	ClassSerialization
	// ClassBusy: SQLITE_BUSY and SQLITE_LOCKED.
	ClassBusy
	// ClassReadOnly: a write on a read-only server ([ErrReadOnly]).
	ClassReadOnly
	// ClassDuplicate: a unique key violation.
	ClassDuplicate
	// ClassConnection: the connection broke; the statement may or may not
	// have run.
	ClassConnection
	// ClassUnavailable: the server refused the statement before running it,
	// because it cannot serve writes or consistent reads at the moment:
	// MySQL 1047 from a Galera node outside the primary component. Nothing
	// ran, so it is retried like a conflict (on another node, through
	// mysql.OpenCluster, which drops such connections).
	ClassUnavailable
	// ClassPermanent: the statement cannot succeed against this database
	// as it stands, and running it again fails the same way until someone
	// changes the schema, the grants or the configuration: a missing table
	// or column, a permission denied, a value its column cannot hold.
	// Claim loops stop on it ([IsPermanent]) instead of retrying forever.
	ClassPermanent
)

// Retryable reports whether the whole statement or transaction that failed
// with an error of this class can be run again: deadlocks, lock-wait
// timeouts, serialization failures, SQLite's busy errors and statements an
// unavailable server refused.
func (c ErrorClass) Retryable() bool {
	switch c {
	case ClassDeadlock, ClassLockTimeout, ClassSerialization, ClassBusy, ClassUnavailable:
		return true
	}
	return false
}

// IsPermanent reports whether err cannot go away by running the operation
// again: an error wrapping [ErrInvalidConfig] or [ErrNotSupported], or an
// engine error of [ClassPermanent]. Loops that retry failed operations (the
// claimer's Run) stop on it and return it, so that a misconfiguration is
// reported once instead of logged at every poll.
func IsPermanent(err error) bool {
	return errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrNotSupported) || ClassifyError(err) == ClassPermanent
}

var (
	classifiersMu sync.RWMutex
	classifiers   []func(error) ErrorClass
)

// RegisterClassifier adds an engine's error classifier to the ones
// [ClassifyError] consults. Engine packages call it from init; a classifier
// must return [ClassOther] for errors that are not its driver's.
func RegisterClassifier(f func(error) ErrorClass) {
	classifiersMu.Lock()
	defer classifiersMu.Unlock()
	classifiers = append(classifiers, f)
}

// ClassifyError returns the class of err: an error returned by claimlock,
// or a raw driver error from the caller's own statements, of any engine
// package linked into the program.
func ClassifyError(err error) ErrorClass {
	if err == nil {
		return ClassOther
	}
	var c classified
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	classifiersMu.RLock()
	defer classifiersMu.RUnlock()
	for _, f := range classifiers {
		if c := f(err); c != ClassOther {
			return c
		}
	}
	return ClassOther
}

// classified is implemented by errors that carry their class.
type classified interface{ ErrorClass() ErrorClass }

// IsRetryable reports whether err is a deadlock, lock-wait timeout,
// serialization failure or busy error: the whole statement or transaction
// that failed can be run again. It accepts errors returned by claimlock
// (operations retry these themselves; one that surfaces has exhausted its
// [RetryPolicy]) and raw driver errors from the caller's own statements, so
// [Retry] can retry the caller's transactions too.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrRetryable) || ClassifyError(err).Retryable()
}

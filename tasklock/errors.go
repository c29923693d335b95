package tasklock

import (
	"errors"

	"github.com/claimlock/claimlock/dialect"
)

// Sentinel errors. ErrNotAcquired, ErrLeaseLost and ErrKeyNotFound are the
// dialect package's own values, so errors.Is matches them whichever package
// returned the error.
var (
	// ErrNotAcquired reports that Acquire found the lease held, unexpired,
	// by another owner (or by another acquisition of the same process).
	ErrNotAcquired = dialect.ErrLeaseHeld

	// ErrLeaseLost reports that a lease is no longer held by its holder:
	// the database no longer names it the owner, or its local deadline
	// passed before a renewal succeeded. Work protected by the lease must
	// stop.
	ErrLeaseLost = dialect.ErrLeaseLost

	// ErrKeyNotFound reports a key with no row in a task table (a table that
	// is not library-managed, where Acquire does not insert rows).
	ErrKeyNotFound = dialect.ErrKeyNotFound

	// ErrLocalDeadline is the reason attached to [ErrLeaseLost] when the
	// lease ended because its local deadline (start of the last successful
	// acquire or renew + TTL - SafetyMargin) passed, whether or not the
	// database answered. [Lease.Err] returns an error matching both.
	ErrLocalDeadline = errors.New("tasklock: local lease deadline passed")

	// ErrReleased is what [Lease.Err] returns after [Lease.Release]: the
	// holder gave the lease up itself.
	ErrReleased = errors.New("tasklock: lease released")
)

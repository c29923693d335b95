package tasklock

import (
	"errors"
)

// The errors of this package's own. A lease held by another owner, a lease
// lost and a key without a row are the dialect package's
// [dialect.ErrLeaseHeld], [dialect.ErrLeaseLost] and
// [dialect.ErrKeyNotFound].
var (
	// ErrLocalDeadline is the reason attached to [dialect.ErrLeaseLost] when the
	// lease ended because its local deadline (start of the last successful
	// acquire or renew + TTL - SafetyMargin) passed, whether or not the
	// database answered. [Lease.Err] returns an error matching both.
	ErrLocalDeadline = errors.New("tasklock: local lease deadline passed")

	// ErrReleased is what [Lease.Err] returns after [Lease.Release]: the
	// holder gave the lease up itself.
	ErrReleased = errors.New("tasklock: lease released")
)

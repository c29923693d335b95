package tasklock

import (
	"errors"
)

// The errors of this package's own. A lease held by another owner, a lease
// lost, a lease past its local deadline and a key without a row are the
// dialect package's [dialect.ErrLeaseHeld], [dialect.ErrLeaseLost],
// [dialect.ErrLocalDeadline] and [dialect.ErrKeyNotFound].
var (
	// ErrReleased is what [Lease.Err] returns after [Lease.Release]: the
	// holder gave the lease up itself.
	ErrReleased = errors.New("tasklock: lease released")
)

package claim

import (
	"errors"
	"fmt"

	"github.com/claimlock/claimlock/dialect"
)

// Sentinel errors, identical to the dialect's so that one errors.Is test
// works whichever package returned the error.
var (
	// ErrClaimLost reports rows that the batch's token no longer held when it
	// tried to ack, fail or heartbeat them: they were released or reaped and
	// possibly re-claimed by another worker. Those rows were left untouched.
	// Ack and Fail return a [*LostError] naming them.
	ErrClaimLost = dialect.ErrClaimLost

	// ErrInvalidConfig reports bad input found by [New] or [Claimer.Run]; the
	// message names the field.
	ErrInvalidConfig = dialect.ErrInvalidConfig

	// ErrNotSupported reports a strategy the connected server cannot run.
	ErrNotSupported = dialect.ErrNotSupported
)

// ErrNotHeld reports an id passed to [Batch.Ack] or [Batch.Fail] that the
// batch does not hold (any more): it is not one of the batch's rows, or it was
// already acked, failed or released through this batch. Nothing was written.
var ErrNotHeld = errors.New("claim: id is not held by this batch")

// IsRetryable reports whether err is a deadlock, lock-wait timeout or
// serialization failure that survived the dialect's internal retries.
func IsRetryable(err error) bool { return dialect.IsRetryable(err) }

// LostError lists the rows of one ack or fail call that the batch's token no
// longer held. errors.Is(err, [ErrClaimLost]) is true for it.
type LostError struct {
	// IDs are the lost rows' keys, as in [Row.ID].
	IDs []any
}

// Error describes the lost rows.
func (e *LostError) Error() string {
	if len(e.IDs) <= 10 {
		return fmt.Sprintf("claim: claim lost for %d row(s) %v: reaped or released and possibly re-claimed", len(e.IDs), e.IDs)
	}
	return fmt.Sprintf("claim: claim lost for %d rows %v ...: reaped or released and possibly re-claimed", len(e.IDs), e.IDs[:10])
}

// Is makes errors.Is(err, ErrClaimLost) true.
func (e *LostError) Is(target error) bool { return target == ErrClaimLost }

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: claim: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

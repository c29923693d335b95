package claim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/claimlock/claimlock/dialect"
)

// ErrNotHeld reports an id passed to [Batch.Ack], [Batch.Ack] with Config.AckDelay or
// [Batch.Fail] that the batch does not hold (any more): it is not one of the
// batch's rows, or it was already acked, deferred, failed or released through
// this batch. Nothing was written. The error returned names the operation and
// the id ("claim: ack: id 7 (int) is not held by this batch").
var ErrNotHeld = errors.New("claim: id is not held by this batch")

// notHeldError is the [ErrNotHeld] of one call, naming its operation once.
type notHeldError struct {
	op string
	id any
}

func (e *notHeldError) Error() string {
	return fmt.Sprintf("claim: %s: id %v (%T) is not held by this batch", e.op, e.id, e.id)
}

func (e *notHeldError) Is(target error) bool { return target == ErrNotHeld }

// LostError lists the rows of one ack, fail, flush or release call that the
// batch's token no longer held. errors.Is(err, [dialect.ErrClaimLost]) is true for
// it.
type LostError struct {
	// IDs are the lost rows' keys, as in [Row.ID].
	IDs []any

	op string // the Batch method that reported them: "ack", "flush", ...
}

// Error describes the lost rows, for example "claim: ack: lost 2 rows [4 7]:
// reaped or released, possibly re-claimed".
func (e *LostError) Error() string {
	prefix := "claim: "
	if e.op != "" {
		prefix += e.op + ": "
	}
	rows := "rows"
	if len(e.IDs) == 1 {
		rows = "row"
	}
	if len(e.IDs) <= 10 {
		return fmt.Sprintf("%slost %d %s %v: reaped or released, possibly re-claimed", prefix, len(e.IDs), rows, e.IDs)
	}
	return fmt.Sprintf("%slost %d %s %v ...: reaped or released, possibly re-claimed", prefix, len(e.IDs), rows, e.IDs[:10])
}

// Is makes errors.Is(err, dialect.ErrClaimLost) true.
func (e *LostError) Is(target error) bool { return target == dialect.ErrClaimLost }

// withLost adds the keys of rows found lost before a call (known) to err,
// the outcome of that call's write of its other rows: they are reported
// together in one [*LostError]. Another error is returned as it is.
func withLost(op string, err error, known []any) error {
	if len(known) == 0 {
		return err
	}
	var le *LostError
	switch {
	case err == nil:
		return lostError(op, known)
	case errors.As(err, &le):
		le.IDs = append(slices.Clip(known), le.IDs...)
	}
	return err
}

// lostError returns a [*LostError] of op for ids, or nil when there are none.
func lostError(op string, ids []any) error {
	if len(ids) == 0 {
		return nil
	}
	return &LostError{IDs: ids, op: op}
}

// invalid reports a bad field of a configuration, in the same shape as the
// dialect's validation errors wrapped by this package:
// "claim: invalid configuration: Field: problem".
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("claim: %w: %s: %s", dialect.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// RowError is a claimed row that could not be read into the row type, and
// why.
type RowError struct {
	// ID is the row's key.
	ID any
	// Err is the scan error (and, if failing the row failed too, that).
	Err error
}

// Error implements error.
func (e *RowError) Error() string { return fmt.Sprintf("claim: row %v: %v", e.ID, e.Err) }

// Unwrap returns the scan error.
func (e *RowError) Unwrap() error { return e.Err }

// storeError names the package and the operation op in err, an error of
// the claim store's statements for op, once: "claim: ack: <cause>". The
// store names no operation of its own (only a failed step of one, such as
// "read back"), so this is the one place that does. A claim is named by the
// package alone ("claim: <cause>"): the package and the operation share the
// name.
func storeError(op string, err error) error {
	if op == opClaim {
		return fmt.Errorf("claim: %w", err)
	}
	return fmt.Errorf("claim: %s: %w", op, err)
}

// opClaim is the operation name of a claim in error messages.
const opClaim = "claim"

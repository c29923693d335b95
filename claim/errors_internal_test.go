package claim

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
)

// A store error is named once by the package and once by its operation.
func TestStoreErrorNamesTheOperationOnce(t *testing.T) {
	cause := errors.New("Error 1047 (08S01): WSREP has not yet prepared node for application use")
	for _, c := range []struct {
		op   string
		err  error
		want string
	}{
		{"claim", nil, ""}, // the store's claim error, built below
		{"ack", errors.New("ack: outcome unknown: bad connection"), "claim: ack: outcome unknown: bad connection"},
		{"release", errors.New("connection refused"), "claim: release: connection refused"},
		{"ack", &LostError{IDs: []any{1}, op: "ack"}, "claim: ack: lost 1 row [1]: reaped or released, possibly re-claimed"},
	} {
		if c.op == "claim" {
			c.err = wrapCore("claim", cause)
			c.want = "claim: " + cause.Error()
		}
		got := storeError(c.op, c.err)
		require.EqualError(t, got, c.want)
		require.ErrorIs(t, got, c.err, "the cause stays reachable")
	}
	require.ErrorIs(t, storeError("ack", wrapCore("ack", dialect.ErrOutcomeUnknown)), dialect.ErrOutcomeUnknown)
}

// wrapCore wraps err as the dialect stores name their operations.
func wrapCore(op string, err error) error { return &coreErr{op, err} }

type coreErr struct {
	op  string
	err error
}

func (e *coreErr) Error() string { return e.op + ": " + e.err.Error() }
func (e *coreErr) Unwrap() error { return e.err }

package claim

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
)

// A store error is named once by the package and once by its operation; a
// claim once by the package, which shares its name.
func TestStoreErrorNamesTheOperationOnce(t *testing.T) {
	cause := errors.New("Error 1047 (08S01): WSREP has not yet prepared node for application use")
	for _, c := range []struct {
		op   string
		err  error
		want string
	}{
		{opClaim, cause, "claim: " + cause.Error()},
		{"ack", errors.New("outcome unknown: bad connection"), "claim: ack: outcome unknown: bad connection"},
		{"release", errors.New("connection refused"), "claim: release: connection refused"},
		{"list", fmt.Errorf("%w: the table has no RunAt column", dialect.ErrInvalidConfig), "claim: list: invalid configuration: the table has no RunAt column"},
	} {
		got := storeError(c.op, c.err)
		require.EqualError(t, got, c.want)
		require.ErrorIs(t, got, c.err, "the cause stays reachable")
	}
	require.ErrorIs(t, storeError("ack", dialect.ErrOutcomeUnknown), dialect.ErrOutcomeUnknown)
}

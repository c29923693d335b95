package claim

import (
	"context"
	"database/sql/driver"
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

// A claim that failed because its context ended matches the context's
// error whatever the driver said (pgx's stdlib driver reports a statement
// it never sent, the context having ended, as driver.ErrBadConn); one
// whose context lasts is left as it is.
func TestEndedWith(t *testing.T) {
	bad := storeError(opClaim, driver.ErrBadConn)
	require.Same(t, bad, endedWith(context.Background(), bad), "the context lasts")
	require.NoError(t, endedWith(context.Background(), nil))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := endedWith(ctx, bad)
	require.ErrorIs(t, got, context.Canceled)
	require.ErrorIs(t, got, driver.ErrBadConn, "the driver's error stays reachable")
	require.EqualError(t, got, "claim: driver: bad connection (the context ended: context canceled)")
	already := storeError(opClaim, context.Canceled)
	require.Same(t, already, endedWith(ctx, already), "an error that says so already")

	stop := errors.New("shutting down")
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(stop)
	got = endedWith(ctx, bad)
	require.ErrorIs(t, got, context.Canceled)
	require.ErrorIs(t, got, stop, "the cause the caller gave")
}

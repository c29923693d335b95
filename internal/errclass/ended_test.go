package errclass

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// An operation that failed because its context ended matches the context's
// error whatever the driver said (pgx's stdlib driver reports a statement
// it never sent, the context having ended, as driver.ErrBadConn); one
// whose context lasts is left as it is.
func TestEndedWith(t *testing.T) {
	bad := fmt.Errorf("claim: %w", driver.ErrBadConn)
	require.Same(t, bad, EndedWith(context.Background(), bad), "the context lasts")
	require.NoError(t, EndedWith(context.Background(), nil))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := EndedWith(ctx, bad)
	require.ErrorIs(t, got, context.Canceled)
	require.ErrorIs(t, got, driver.ErrBadConn, "the driver's error stays reachable")
	require.EqualError(t, got, "claim: driver: bad connection (the context ended: context canceled)")
	already := fmt.Errorf("claim: %w", context.Canceled)
	require.Same(t, already, EndedWith(ctx, already), "an error that says so already")

	stop := errors.New("shutting down")
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(stop)
	got = EndedWith(ctx, bad)
	require.ErrorIs(t, got, context.Canceled)
	require.ErrorIs(t, got, stop, "the cause the caller gave")
}

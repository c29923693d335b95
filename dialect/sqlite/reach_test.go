package sqlite_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/internal/errclass"
)

// TestReachCannotOpen: a database file that cannot be opened ran nothing,
// like a refused connect on the network engines.
func TestReachCannotOpen(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(t.TempDir() + "/no/such/dir/x.db")
	if err == nil {
		defer db.Close()
		_, err = db.ExecContext(context.Background(), "CREATE TABLE x (a INT)")
	}
	require.Error(t, err)
	require.Equal(t, errclass.Unreachable, errclass.Of(err), "%v", err)
	require.True(t, dialect.IsRetryable(err))
}

package sqlite_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestOnlineIndexDDL: SQLite has no online CREATE INDEX (it holds the
// database's write lock while it builds), so IndexOptions.Online renders
// the same statements.
func TestOnlineIndexDDL(t *testing.T) {
	t.Parallel()
	d, err := sqlite.New(context.Background(), dbtest.SQLite(t), dialect.Options{})
	require.NoError(t, err)
	cs, err := store.OpenClaims(d, dialect.ClaimTable{Table: "jobs", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Pending: dialect.StatusString("PENDING"), Processing: dialect.StatusString("PROCESSING"), Done: dialect.StatusString("DONE"), Failed: dialect.StatusString("FAILED")})
	require.NoError(t, err)
	require.Equal(t, cs.IndexDDL(), cs.(store.IndexDDLer).IndexDDLWith(store.IndexOptions{Online: true}))
}

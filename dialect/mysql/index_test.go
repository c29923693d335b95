package mysql

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// TestOnlineIndexDDL: IndexOptions.Online builds the recommended indexes
// with InnoDB's online DDL, which fails rather than locking the table (the
// conformance case OnlineIndexes applies it on the server).
func TestOnlineIndexDDL(t *testing.T) {
	t.Parallel()
	d := offline("10.11.6-MariaDB")
	spec := dialect.ClaimTable{Table: "jobs", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Scope: []string{"task_id"}, Pending: dialect.StatusString("PENDING"), Processing: dialect.StatusString("PROCESSING"),
		Done: dialect.StatusString("DONE"), Failed: dialect.StatusString("FAILED")}
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.Equal(t, []string{
		"CREATE INDEX `jobs_cl_claim` ON `jobs` (`task_id`, `status`, `id`) ALGORITHM=INPLACE LOCK=NONE",
		"CREATE INDEX `jobs_cl_token` ON `jobs` (`token`) ALGORITHM=INPLACE LOCK=NONE",
		"CREATE INDEX `jobs_cl_reap` ON `jobs` (`status`, `claimed_at`) ALGORITHM=INPLACE LOCK=NONE",
	}, cs.(store.IndexDDLer).IndexDDLWith(store.IndexOptions{Online: true}))
	require.Equal(t, "CREATE INDEX `jobs_cl_token` ON `jobs` (`token`)", cs.IndexDDL()[1])
}

package mysql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
	"github.com/claimlock/claimlock/internal/testkit/plantest/myplan"
)

// TestClaimPlansReadTheIndexInOrder guards the plans of the claim
// statements on a real server: each must range-scan the claim index in key
// order. A plan that sorts ("Using filesort") reads and locks every pending
// row of the scope for every claim, and concurrent claims queue behind those
// locks (MariaDB 10.11 did that for a token-update UPDATE ... ORDER BY key
// whenever the connection's collation differed from the status column's).
// The pool is opened the way users open it (Open: utf8mb4_general_ci from
// the driver against the utf8mb4_bin columns of the schema helpers).
func TestClaimPlansReadTheIndexInOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := Open(ctx, dbtest.MySQLDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	st := func(v string) dialect.Status { s, err := store.StatusOf("s", v); require.NoError(t, err); return s }
	spec := dialect.ClaimTable{Table: "plan_jobs", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Scope: []string{"task_id"},
		Pending: st("PENDING"), Processing: st("PROCESSING"), Done: st("DONE"), Failed: st("FAILED")}
	cs := dialecttest.CreateClaimTable(t, d, spec)
	// Task 1: 5,000 done rows, then 5,000 pending; task 2: 2,000 pending.
	for _, part := range []struct {
		task   int
		status string
		n      int
	}{{1, "DONE", 5000}, {1, "PENDING", 5000}, {2, "PENDING", 2000}} {
		vals := make([]string, 1000)
		for i := range vals {
			vals[i] = fmt.Sprintf("(%d, '%s')", part.task, part.status)
		}
		for i := 0; i < part.n; i += len(vals) {
			_, err := db.ExecContext(ctx, "INSERT INTO `plan_jobs` (`task_id`, `status`) VALUES "+strings.Join(vals, ", "))
			require.NoError(t, err)
		}
	}
	_, err = db.ExecContext(ctx, "ANALYZE TABLE `plan_jobs`")
	require.NoError(t, err)

	c := cs.(*store.Claims).Steps()
	claimIdx := store.IndexName(spec.Table, "claim")
	for _, tc := range []struct {
		name, query string
		args        []any
	}{
		{"token-update", c.Mark(true, false).SQL, []any{"tok", 1, 100}},
		{"token-update above the cursor", c.Mark(true, true).SQL, []any{"tok", 1, 7000, 100}},
		{"skip locked", c.SkipLockedPick(true, false).SQL, []any{1, 100}},
		{"skip locked above the cursor", c.SkipLockedPick(true, true).SQL, []any{1, 7000, 100}},
	} {
		plan := myplan.Explain(ctx, t, db, tc.query, tc.args...)
		require.Equal(t, claimIdx, plan.Key, "%s: %s", tc.name, plan)
		require.NotContains(t, plan.Extra, "filesort", "%s: %s", tc.name, plan)
	}
}

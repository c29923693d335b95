package sqlite_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/plantest"
	"github.com/claimlock/claimlock/internal/testkit/plantest/liteplan"
)

// sqliteScale shrinks plantest's layout for SQLite, whose plans this test
// reads with EXPLAIN QUERY PLAN only: a tenth of the rows, in the same
// proportions.
const sqliteScale = 10

// TestEveryPlanUsesAnIndex checks every statement of a claim store and a
// lease store with EXPLAIN QUERY PLAN on plantest's layout (a tenth of it),
// under statistics (sqlite_stat1) taken when the table looked different and
// under fresh ones: each must search an index or the key (never scan the
// table, but unscoped stats, which count it by design) and never sort with
// a temporary b-tree. Earlier forms of the statements (before the scope
// index) are controls.
func TestEveryPlanUsesAnIndex(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := sqlite.Open(dbtest.SQLitePath(t))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	spec := plantest.Spec("jobs")
	table, err := store.CreateTableDDL(d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	leaseDDL, err := store.CreateTableDDL(d, store.LeaseTableDef("leases", 64))
	require.NoError(t, err)
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	ls, err := store.OpenLeases(d, store.KeyedLeaseTable("leases", 64))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, append(append(table, leaseDDL...), cs.IndexDDL()...)))
	claims, leases := cs.(*store.Claims), ls.(*store.Leases)

	const day, hour = 86_400_000, 3_600_000
	now := "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
	seq := func(n int) string {
		return fmt.Sprintf("(WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %d) SELECT g FROM s)", n)
	}
	rows, taskRows := plantest.Rows/sqliteScale, plantest.TaskRows/sqliteScale
	doneTo, processingTo, freeTo := plantest.DoneTo/sqliteScale, plantest.ProcessingTo/sqliteScale, plantest.LeasesFreeTo/sqliteScale
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO jobs (id, task_id, status, token, claimed_at, attempts, created_at, payload)
			SELECT g, 1 + (g - 1) / %d, CASE WHEN g <= %[2]d THEN 'PENDING' ELSE 'PROCESSING' END,
			       CASE WHEN g > %[2]d THEN 'old-' || ((g - 1) / 100) END, CASE WHEN g > %[2]d THEN %[3]s - %[4]d END,
			       CASE WHEN g > %[2]d THEN 1 ELSE 0 END, %[3]s - %[4]d, 'p' FROM %[5]s`,
			plantest.ThenTaskRows, plantest.ThenPending, now, day, seq(plantest.ThenRows)),
		fmt.Sprintf(`INSERT INTO leases (lease_key, owner, lock_at, expires_at, fence)
			SELECT 'k-' || g, CASE WHEN g > %[1]d THEN 'old-' || g END, %[2]s - 2 * %[3]d,
			       CASE WHEN g > %[1]d THEN %[2]s - %[3]d END, 1 FROM %[4]s`, plantest.ThenLeasesFree, now, day, seq(plantest.ThenRows)),
		`ANALYZE`,
		`DELETE FROM jobs`, `DELETE FROM leases`,
		fmt.Sprintf(`INSERT INTO jobs (id, task_id, status, token, claimed_at, attempts, created_at, payload)
			SELECT g, 1 + (g - 1) / %d,
			       CASE WHEN g <= %[2]d THEN 'SENT' WHEN g <= %[3]d THEN 'PROCESSING' ELSE 'PENDING' END,
			       CASE WHEN g > %[2]d AND g <= %[3]d THEN 'tok-' || ((g - 1) / 100) END,
			       CASE WHEN g <= %[2]d THEN %[4]s - %[5]d WHEN g <= %[3]d THEN %[4]s END,
			       CASE WHEN g <= %[3]d THEN 1 ELSE 0 END, %[4]s, 'p' FROM %[6]s`,
			taskRows, doneTo, processingTo, now, day, seq(rows)),
		fmt.Sprintf(`INSERT INTO leases (lease_key, owner, lock_at, expires_at, fence)
			SELECT 'k-' || g, CASE WHEN g > %[1]d THEN 'own-' || g END, %[2]s,
			       CASE WHEN g > %[1]d THEN %[2]s + %[3]d END, 1 FROM %[4]s`, freeTo, now, hour, seq(rows)),
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}

	explained := map[string]bool{}
	caught := map[string]int{}
	for _, stats := range []string{"stale statistics", "fresh statistics"} {
		if stats == "fresh statistics" {
			_, err := db.ExecContext(ctx, `ANALYZE`)
			require.NoError(t, err)
		}
		for _, ph := range plantest.Phases {
			for _, c := range plantest.Cases() {
				if c.Skip(ph) {
					continue
				}
				var q string
				var args []any
				var ok bool
				if c.Store == plantest.Claims {
					q, args, ok = claims.Bind(c.Name, c.Args(ph))
				} else {
					q, args, ok = leases.Bind(c.Name, c.Args(ph))
				}
				if !ok {
					continue
				}
				explained[string(c.Store)+" "+c.Name] = true
				plan := liteplan.QueryPlan(ctx, t, db, q, args)
				if p := liteplan.Problem(plan, c.FullScan); p != "" {
					t.Errorf("%s: %s\n  %s", plantest.Name(stats, ph, "query plan", c), p, strings.Join(plan, "\n  "))
				}
			}
			for name, ctl := range controlsBefore20(ph) {
				if liteplan.Problem(liteplan.QueryPlan(ctx, t, db, ctl.q, ctl.args), false) != "" {
					caught[name]++
				}
			}
		}
	}
	for name, q := range claims.Statements() {
		require.True(t, q == "" || explained["claims "+name], "claim statement %q has no plan case", name)
	}
	for name, q := range leases.Statements() {
		require.True(t, q == "" || explained["leases "+name], "lease statement %q has no plan case", name)
	}
	for name := range controlsBefore20(plantest.Phases[0]) {
		require.NotZero(t, caught[name], "the checks must catch the %s of before #20", name)
	}
}

type sqliteControl struct {
	q    string
	args []any
}

// controlsBefore20 are earlier forms of claimlock's reaps, before the scope
// index.
func controlsBefore20(ph plantest.Phase) map[string]sqliteControl {
	stale := `"status" = 'PROCESSING' AND "claimed_at" < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?`
	expired := `"owner" IS NOT NULL AND "expires_at" < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?`
	ms := max(ph.Timeout.Milliseconds(), 1)
	return map[string]sqliteControl{
		"reap": {`UPDATE "jobs" SET "status" = 'PENDING', "token" = NULL WHERE "id" IN (SELECT "id" FROM "jobs" WHERE ` + stale +
			` ORDER BY "id" LIMIT ?) AND ` + stale, []any{ms, int64(plantest.Limit), ms}},
		"lease reap": {`UPDATE "leases" SET "owner" = NULL, "expires_at" = NULL WHERE "lease_key" IN (SELECT "lease_key" FROM "leases" WHERE ` + expired +
			` ORDER BY "lease_key" LIMIT ?) AND ` + expired, []any{int64(0), int64(plantest.Limit), int64(0)}},
	}
}

package postgres

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/plantest"
	"github.com/claimlock/claimlock/internal/testkit/plantest/pgplan"
)

// TestEveryPlanReadsOnlyWhatItNeeds explains (with ANALYZE, in a
// transaction rolled back) every statement of a claim store and a lease
// store on the 1,000,000-row layout of plantest, with custom and with
// generic plans (plan_cache_mode), first under statistics taken when the
// table looked different (plantest's "then" rows) and then under fresh
// ones, in each phase of plantest.Phases. Each statement must read at most
// its budget of rows and never walk the primary key or scan the table (but
// unscoped stats, which count it by design).
//
// Controls run alongside: statements that no plan can run within their
// budget, which the checks must catch in every run on every server (they
// prove that the test reads this server's plans), and the statements of
// claimlock's earlier forms (before the scope index), which the checks must
// catch on PostgreSQL 15.
func TestEveryPlanReadsOnlyWhatItNeeds(t *testing.T) {
	t.Parallel()
	// The deadline catches a hang, nothing else: loading the million rows
	// alone took two minutes on a loaded two-core machine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pool := dbtest.PostgresPool(t)
	d, err := New(ctx, pool, dialect.Options{})
	require.NoError(t, err)
	cs, ls := loadLargeLayout(ctx, t, pool, d)
	claims, leases := cs.(*store.Claims), ls.(*store.Leases)

	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	exec := func(q string) {
		t.Helper()
		_, err := conn.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}

	explained := map[string]bool{}
	worst := map[string]*plantest.Worst{}
	caught := map[string][]string{}
	runs := 0                         // phases explained, over statistics and plan modes
	uncaught := map[string][]string{} // controls by construction that passed the checks
	for _, stats := range []string{"stale statistics", "fresh statistics"} {
		if stats == "fresh statistics" {
			exec(`ANALYZE jobs`)
			exec(`ANALYZE leases`)
		}
		for _, ph := range plantest.Phases {
			if ph.MakeStale {
				exec(fmt.Sprintf(`UPDATE jobs SET claimed_at = now() - interval '1 hour' WHERE id BETWEEN %d AND %d`,
					plantest.StaleFrom, plantest.StaleFrom+plantest.StaleRows-1))
				exec(fmt.Sprintf(`UPDATE leases SET expires_at = now() - interval '1 hour' WHERE lease_key IN (SELECT 'k-' || g FROM generate_series(%d, %d) g)`,
					plantest.StaleLeaseFrom, plantest.StaleLeaseFrom+plantest.StaleRows-1))
			}
			for _, mode := range pgplan.Modes {
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
					label := plantest.Name(stats, ph, mode, c)
					pl := pgplan.Analyze(ctx, t, conn, mode, q, args)
					w := worst[string(c.Store)+" "+c.Name]
					if w == nil {
						w = &plantest.Worst{}
						worst[string(c.Store)+" "+c.Name] = w
					}
					w.Add(label, pl.Read, pl.Ms)
					if p := pl.Problems(c.Budget(ph), c.FullScan); p != "" {
						t.Errorf("%s: %s (budget %d rows: %s)\n%s", label, p, c.Budget(ph), c.Why, pl.Summary())
					}
				}
				for _, ctl := range controlsBefore20(ph) {
					pl := pgplan.Analyze(ctx, t, conn, mode, ctl.query, ctl.args)
					if pl.Problems(ctl.budget, false) != "" {
						caught[ctl.name] = append(caught[ctl.name], fmt.Sprintf("%s, %s, %s: read %.0f rows in %.1f ms", stats, ph.Name, mode, pl.Read, pl.Ms))
					}
				}
				runs++
				for _, ctl := range controlsByConstruction() {
					pl := pgplan.Analyze(ctx, t, conn, mode, ctl.query, ctl.args)
					if pl.Problems(ctl.budget, false) == "" {
						uncaught[ctl.name] = append(uncaught[ctl.name], fmt.Sprintf("%s, %s, %s:\n%s", stats, ph.Name, mode, pl.Summary()))
					}
				}
			}
			if ph.MakeStale {
				exec(fmt.Sprintf(`UPDATE jobs SET claimed_at = now() WHERE id BETWEEN %d AND %d`,
					plantest.StaleFrom, plantest.StaleFrom+plantest.StaleRows-1))
				exec(fmt.Sprintf(`UPDATE leases SET expires_at = now() + interval '1 hour' WHERE lease_key IN (SELECT 'k-' || g FROM generate_series(%d, %d) g)`,
					plantest.StaleLeaseFrom, plantest.StaleLeaseFrom+plantest.StaleRows-1))
			}
		}
	}

	// Every statement the stores have was explained.
	for name, q := range claims.Statements() {
		require.True(t, q == "" || explained["claims "+name], "claim statement %q has no plan case", name)
	}
	for name, q := range leases.Statements() {
		require.True(t, q == "" || explained["leases "+name], "lease statement %q has no plan case", name)
	}
	names := make([]string, 0, len(worst))
	for n := range worst {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("%-28s %s", n, worst[n])
	}

	// The controls by construction must be caught in every run, whatever
	// the server: no index serves their order or condition, so a check that
	// lets one pass does not read this server's plans.
	require.Positive(t, runs)
	for _, ctl := range controlsByConstruction() {
		require.Empty(t, uncaught[ctl.name], "the checks passed the control %q (%s) in %d of %d runs",
			ctl.name, ctl.why, len(uncaught[ctl.name]), runs)
	}
	// Each statement of before #20 must be caught, and the reap in the case
	// the issue measured (fresh statistics, nothing stale, generic plan), on
	// PostgreSQL 15, where they were measured. They are traps of the
	// planner's cost estimates, not of construction: another server's
	// planner may run them well (an index that happens to serve them), so
	// there their catches are only logged, and the controls above show
	// that the checks work.
	for _, ctl := range controlsBefore20(plantest.Phases[0]) {
		t.Logf("control %s caught %d times: %s", ctl.name, len(caught[ctl.name]), strings.Join(caught[ctl.name], "; "))
		if d.versionNum >= 150000 && d.versionNum < 160000 {
			require.NotEmpty(t, caught[ctl.name], "the checks must catch the %s of before #20", ctl.name)
		}
	}
	if d.versionNum >= 150000 && d.versionNum < 160000 {
		require.Contains(t, strings.Join(caught["reap"], "\n"), "fresh statistics, nothing stale, generic plan")
	}
}

// loadLargeLayout creates plantest's claim and lease tables with
// autovacuum off, takes statistics of the "then" rows, and loads the layout
// and the recommended indexes.
func loadLargeLayout(ctx context.Context, t *testing.T, pool *pgxpool.Pool, d *Dialect) (store.ClaimStore, store.LeaseStore) {
	t.Helper()
	spec := plantest.Spec("jobs")
	table, err := store.CreateTableDDL(d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	leaseDDL, err := store.CreateTableDDL(d, store.LeaseTableDef("leases", 64))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, append(table, leaseDDL[0])))
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	ls, err := store.OpenLeases(d, store.KeyedLeaseTable("leases", 64))
	require.NoError(t, err)

	start := time.Now()
	for _, q := range []string{
		`ALTER TABLE jobs SET (autovacuum_enabled = false)`,
		`ALTER TABLE leases SET (autovacuum_enabled = false)`,
		fmt.Sprintf(`INSERT INTO jobs (id, task_id, status, token, claimed_at, attempts, created_at, payload)
			SELECT g, 1 + (g - 1) / %d,
			       CASE WHEN g <= %[2]d THEN 'PENDING' ELSE 'PROCESSING' END,
			       CASE WHEN g > %[2]d THEN 'old-' || (g - 1) / 100 END,
			       CASE WHEN g > %[2]d THEN now() - interval '1 day' END,
			       CASE WHEN g > %[2]d THEN 1 ELSE 0 END, now() - interval '1 day', 'p'
			FROM generate_series(1, %d) g`, plantest.ThenTaskRows, plantest.ThenPending, plantest.ThenRows),
		fmt.Sprintf(`INSERT INTO leases (lease_key, owner, lock_at, expires_at, fence)
			SELECT 'k-' || g, CASE WHEN g > %[1]d THEN 'old-' || g END, now() - interval '2 days',
			       CASE WHEN g > %[1]d THEN now() - interval '1 day' END, 1
			FROM generate_series(1, %d) g`, plantest.ThenLeasesFree, plantest.ThenRows),
		`ANALYZE jobs`, `ANALYZE leases`,
		// TRUNCATE keeps the columns' statistics.
		`TRUNCATE jobs, leases`,
		fmt.Sprintf(`INSERT INTO jobs (id, task_id, status, token, claimed_at, attempts, created_at, payload)
			SELECT g, 1 + (g - 1) / %d,
			       CASE WHEN g <= %[2]d THEN 'SENT' WHEN g <= %[3]d THEN 'PROCESSING' ELSE 'PENDING' END,
			       CASE WHEN g > %[2]d AND g <= %[3]d THEN 'tok-' || (g - 1) / 100 END,
			       CASE WHEN g <= %[2]d THEN now() - interval '1 day' WHEN g <= %[3]d THEN now() END,
			       CASE WHEN g <= %[3]d THEN 1 ELSE 0 END, now(), 'p'
			FROM generate_series(1, %d) g`, plantest.TaskRows, plantest.DoneTo, plantest.ProcessingTo, plantest.Rows),
		fmt.Sprintf(`INSERT INTO leases (lease_key, owner, lock_at, expires_at, fence)
			SELECT 'k-' || g, CASE WHEN g > %[1]d THEN 'own-' || g END,
			       CASE WHEN g > %[1]d THEN now() ELSE now() - interval '1 day' END,
			       CASE WHEN g > %[1]d THEN now() + interval '1 hour' END, 1
			FROM generate_series(1, %d) g`, plantest.LeasesFreeTo, plantest.Rows),
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	require.NoError(t, store.ExecDDL(ctx, d, append(cs.IndexDDL(), leaseDDL[1:]...)))
	t.Logf("loaded %d claim rows and %d leases with their indexes in %v", plantest.Rows, plantest.Rows, time.Since(start).Round(time.Millisecond))
	return cs, ls
}

// control is a statement the checks must catch, for the table of
// plantest.Spec("jobs") and the lease table "leases".
type control struct {
	name   string
	query  string
	args   []any
	budget int64
}

// constructed is a control by construction: why says why no plan can run
// it within its budget.
type constructed struct {
	control
	why string
}

// controlsByConstruction are statements that no plan can run within their
// budget on any server: a claim ordered by a column no index holds must read
// every pending row of its task (plantest.TaskRows) to find the first ones,
// and a condition on a column no index holds must read the whole table.
func controlsByConstruction() []constructed {
	return []constructed{
		{control{"claim ordered by payload",
			`WITH cl_c AS MATERIALIZED (SELECT "id" FROM "jobs" WHERE "status" = 'PENDING' AND "task_id" = $1 ORDER BY "payload" LIMIT $2 FOR UPDATE SKIP LOCKED) ` +
				`UPDATE "jobs" SET "status" = 'PROCESSING', "token" = $3 WHERE "id" = ANY(ARRAY(SELECT "id" FROM cl_c))`,
			[]any{int64(plantest.ClaimTask), int64(plantest.Limit), "plan-tok"}, plantest.Small},
			"no index holds payload: every pending row of the task is read and sorted"},
		{control{"lease release by fence", `UPDATE "leases" SET "owner" = NULL WHERE "fence" = $1`, []any{int64(0)}, plantest.Small},
			"no index holds fence: the table is scanned"},
	}
}

func controlsBefore20(ph plantest.Phase) []control {
	timeout := ph.Timeout.Microseconds()
	return []control{
		{"reap", `WITH cl_c AS MATERIALIZED ( SELECT "id" FROM "jobs" WHERE "status" = 'PROCESSING' AND "claimed_at" < now() - ($1::bigint * interval '1 microsecond') ` +
			`ORDER BY "id" LIMIT $2 FOR UPDATE SKIP LOCKED) UPDATE "jobs" AS cl_t SET "status" = 'PENDING', "token" = NULL FROM cl_c ` +
			`WHERE cl_t."id" = cl_c."id" AND cl_t."status" = 'PROCESSING'`,
			[]any{timeout, int64(plantest.Limit)}, plantest.Small},
		{"claim", `WITH cl_c AS MATERIALIZED ( SELECT "id" FROM "jobs" WHERE "status" = 'PENDING' AND "task_id" = $1 ORDER BY "id" + 0 LIMIT $2 FOR UPDATE SKIP LOCKED) ` +
			`UPDATE "jobs" AS cl_t SET "status" = 'PROCESSING', "token" = $3, "claimed_at" = now(), "attempts" = COALESCE(cl_t."attempts", 0) + 1 FROM cl_c ` +
			`WHERE cl_t."id" = cl_c."id" AND cl_t."status" = 'PENDING' RETURNING cl_t."id", cl_t."version", cl_t."payload"`,
			[]any{int64(plantest.ClaimTask), int64(plantest.Limit), "plan-tok"}, plantest.Small},
		{"lease reap", `WITH cl_c AS MATERIALIZED ( SELECT "lease_key" FROM "leases" WHERE "owner" IS NOT NULL AND "expires_at" < now() - ($1::bigint * interval '1 microsecond') ` +
			`ORDER BY "lease_key" LIMIT $2 FOR UPDATE SKIP LOCKED) UPDATE "leases" AS cl_t SET "owner" = NULL, "expires_at" = NULL FROM cl_c ` +
			`WHERE cl_t."lease_key" = cl_c."lease_key" AND cl_t."owner" IS NOT NULL AND cl_t."expires_at" < now() - ($3::bigint * interval '1 microsecond')`,
			[]any{int64(0), int64(plantest.Limit), int64(0)}, plantest.Small},
	}
}

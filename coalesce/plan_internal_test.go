package coalesce

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/store/render"
	"github.com/claimlock/claimlock/internal/testkit/plantest/liteplan"
	"github.com/claimlock/claimlock/internal/testkit/plantest/myplan"
	"github.com/claimlock/claimlock/internal/testkit/plantest/pgplan"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// planLayout is the coalescer's tables as a busy service's look after a
// while: many keys, changes mostly folded long ago, a backlog of live ones.
//
//   - Changes 1..Changes (ids and sequences g, event id "e-" || g, source
//     "src", payload "p"), accepted 100 ms apart up to the load (change g
//     at now - (Changes-g)*100 ms) and folded a second after; every fourth
//     change (g % 4 = 0) belongs to the hot key "hot", the others to
//     "k-" || ((g-1) % Keys + 1).
//   - The last Live changes are unfolded (the backlog: their keys, the
//     last Live keys, are pending, the last planProcessing of them being
//     flushed under the token "tok-1" since the load, and "hot" is
//     pending), and so are
//     the first planOld (the oldest changes of the table): those of keys
//     1..planParked, which are parked (FAILED), those of keys
//     planParked+1..planOld, which are done (stranded: the process that
//     accepted them died before marking them dirty), and those of "hot".
//   - Every key has one source row ("src").
type planLayout struct {
	Changes, Keys, Live int
}

// The parts of the layout that do not scale.
const (
	planOld        = 100
	planParked     = 50
	planProcessing = 100
	planToken      = "tok-1"
	// planSmall is the budget of a statement that touches a key, a source,
	// an event or a batch of at most 100 rows.
	planSmall = 1_000
	// planMaxChanges is the fold's batch in the test (MaxChanges).
	planMaxChanges = 100
	// planBatch is the size of the batch whose statements are explained.
	planBatch = 100
	// maxMaxChanges is the largest MaxChanges a FlusherConfig takes, and
	// markFoldedMax the name of markFolded's case with that many ids.
	maxMaxChanges = 10_000
	markFoldedMax = "markFolded (MaxChanges ids)"
)

// foldedMaxIDs is how many ids markFoldedMax lists: maxMaxChanges, but at
// most a tenth of the layout's changes (SQLite's layout has 10,000: a list
// of every change is rightly read by a scan).
func foldedMaxIDs(l planLayout) int { return min(maxMaxChanges, l.Changes/10) }

// planFull is the layout on PostgreSQL and MariaDB: a million changes of a
// hundred thousand keys, 2% of them unfolded.
var planFull = planLayout{Changes: 1_000_000, Keys: 100_000, Live: 20_000}

// planSQLite is the layout on SQLite, whose plans are judged by their
// shape only (EXPLAIN QUERY PLAN counts no rows): a hundredth.
var planSQLite = planLayout{Changes: 10_000, Keys: 1_000, Live: 200}

// planCase is one statement of [statements]: its arguments on the layout
// and the most rows it may read, summed over its accesses to every table.
type planCase struct {
	args   func(l planLayout) []any
	budget func(l planLayout) int64
	why    string
	// staleScan lets the statement scan its table under stale
	// statistics (planThen's), reading at most the table.
	staleScan bool
	// values marks an insert of a list of rows, whose VALUES clause
	// SQLite's plan scans (the list, not a table).
	values bool
	// liteUses, if set, is what SQLite's plan must search by: its plans
	// say which index, not how many rows, and a search of the wrong one
	// can read the whole backlog.
	liteUses string
}

// planSmallBudget is the budget planSmall on any layout.
func planSmallBudget(planLayout) int64 { return planSmall }

// lastChanges returns the ids of the last n changes (unfolded).
func lastChanges(l planLayout, n int) []any {
	ids := make([]any, n)
	for i := range ids {
		ids[i] = int64(l.Changes - n + 1 + i)
	}
	return ids
}

// batchArgs returns the arguments of a batch statement: group's for each
// of planBatch groups, in order.
func batchArgs(group func(l planLayout, i int) []any) func(planLayout) []any {
	return func(l planLayout) []any {
		var args []any
		for i := range planBatch {
			args = append(args, group(l, i)...)
		}
		return args
	}
}

// planCases returns a case per field of [statements]; the test fails on a
// field without one.
func planCases() map[string]planCase {
	one := func(args ...any) func(planLayout) []any { return func(planLayout) []any { return args } }
	small := func(args func(planLayout) []any, why string) planCase {
		return planCase{args: args, budget: planSmallBudget, why: why}
	}
	values := func(args func(planLayout) []any, why string) planCase {
		pc := small(args, why)
		pc.values = true
		return pc
	}
	mid := func(l planLayout) string { return fmt.Sprintf("k-%d", l.Keys/2+1) }
	return map[string]planCase{
		"findEvent": small(func(l planLayout) []any { return []any{fmt.Sprintf("e-%d", l.Changes/2)} }, "one event"),
		"bumpSource": small(func(l planLayout) []any {
			return []any{int64(l.Changes + 1), mid(l), "src", int64(l.Changes + 1)}
		}, "one source"),
		"insertSource": small(func(l planLayout) []any { return []any{mid(l), "src", int64(1)} }, "one source"),
		"readSource":   small(func(l planLayout) []any { return []any{mid(l), "src"} }, "one source"),
		"insertChange": small(func(l planLayout) []any {
			return []any{mid(l), "e-new", "src", int64(l.Changes + 1), []byte("p")}
		}, "one change"),
		"readKey":    small(func(l planLayout) []any { return []any{mid(l)} }, "one key"),
		"insertKey":  small(func(l planLayout) []any { return []any{mid(l)} }, "one key"),
		"bumpDone":   small(func(l planLayout) []any { return []any{mid(l), int64(1)} }, "one key"),
		"bumpInTx":   small(func(l planLayout) []any { return []any{mid(l)} }, "one key"),
		"bumpHeld":   small(one("hot"), "one key"),
		"persist":    small(one(int64(1), int64(planMaxChanges), "hot"), "one key"),
		"versions":   small(one("hot", "hot"), "one key's sources and its key"),
		"startFlush": small(one(planToken), "one token's keys"),
		// By their ids: through the unfolded index (SQLite's choice under
		// fresh statistics, which count few unfolded changes) a fold reads
		// every unfolded change of every key.
		"markFolded": {args: func(l planLayout) []any { return lastChanges(l, planMaxChanges) }, budget: planSmallBudget,
			why: "the listed changes", liteUses: "USING INTEGER PRIMARY KEY"},
		// A fold at the largest MaxChanges: an IN list of 10,000 ids must
		// not turn the plan into a scan of the changes.
		markFoldedMax: {args: func(l planLayout) []any { return lastChanges(l, foldedMaxIDs(l)) },
			budget: func(l planLayout) int64 { return 3 * int64(foldedMaxIDs(l)) }, why: "the 10,000 listed changes (SQLite: 1,000, a tenth of its changes)",
			liteUses: "USING INTEGER PRIMARY KEY"},
		"readChanges": small(one("hot", int64(planMaxChanges)), "a fold's batch of the hot key's unfolded changes, not its folded ones"),
		"bumpProcessing": small(func(l planLayout) []any {
			return []any{fmt.Sprintf("k-%d", l.Keys), int64(1)}
		}, "one key"),
		// Under statistics that saw every key dirty, PostgreSQL counts them
		// by scanning the keys table, as those statistics say it should:
		// Backlog runs once per PressureInterval, not per accept, and an
		// ANALYZE (autovacuum's) corrects it.
		"backlog": {args: one(), budget: func(l planLayout) int64 { return int64(l.Live) + planSmall },
			why: "the dirty keys, which it counts", staleScan: true},
		"oldest": {args: one(), budget: planSmallBudget,
			why: "the first unfolded changes in acceptance order, up to the first of a key not parked"},
		// Every unfolded change older than StrandAfter (its default, 10 s)
		// is a candidate, and whether it is stranded depends on its key:
		// with fewer stranded changes than its limit, the statement reads
		// them all (the backlog), and their keys.
		"stranded": {args: one(int64(10_000), int64(unstrandKeys)),
			budget: func(l planLayout) int64 { return 2*int64(l.Live+planOld) + planSmall },
			why:    "the unfolded changes older than StrandAfter and their keys"},
		// A batch's statements, for planBatch changes of as many keys
		// (sources): each change, event or source by its unique key.
		"batch findEvents":       small(batchArgs(func(l planLayout, i int) []any { return []any{fmt.Sprintf("e-%d", l.Changes/2+i)} }), "the batch's events"),
		"batch findEventsLocked": small(batchArgs(func(l planLayout, i int) []any { return []any{fmt.Sprintf("e-%d", l.Changes/2+i)} }), "the batch's events"),
		"batch insertChanges": values(batchArgs(func(l planLayout, i int) []any {
			return []any{fmt.Sprintf("k-%d", l.Keys/2+i), fmt.Sprintf("e-new-%d", i), "src", int64(l.Changes + 1), []byte("p")}
		}), "the batch's changes"),
		"batch readSources": small(batchArgs(func(l planLayout, i int) []any { return []any{fmt.Sprintf("k-%d", l.Keys/2+i), "src"} }), "the batch's sources"),
		"batch insertSources": values(batchArgs(func(l planLayout, i int) []any {
			return []any{fmt.Sprintf("k-%d", l.Keys/2+i), "src", int64(noSeq)}
		}), "the batch's sources"),
		"batch setSources": values(batchArgs(func(l planLayout, i int) []any {
			return []any{fmt.Sprintf("k-%d", l.Keys/2+i), "src", int64(l.Changes + 1)}
		}), "the batch's sources"),
		"batch readKeys":   small(batchArgs(func(l planLayout, i int) []any { return []any{fmt.Sprintf("k-%d", l.Keys/2+i)} }), "the batch's keys"),
		"batch insertKeys": values(batchArgs(func(l planLayout, i int) []any { return []any{fmt.Sprintf("new-%d", i)} }), "the batch's keys"),
		"batch bumpDoneKeys": small(batchArgs(func(l planLayout, i int) []any {
			return []any{fmt.Sprintf("k-%d", planParked+1+i), int64(1)}
		}), "the batch's keys"),
		"batch bumpProcessingKeys": small(batchArgs(func(l planLayout, i int) []any {
			return []any{fmt.Sprintf("k-%d", l.Keys-i), int64(1)}
		}), "the batch's keys"),
		// A batch of the oldest folded changes, each read through the
		// folded index and again to delete it.
		"prune": {args: one(int64(time.Hour.Milliseconds())), budget: func(planLayout) int64 { return 3 * pruneBatch },
			why: "a batch of the oldest folded changes"},
	}
}

// planStatements returns every statement of s by its field name, the
// markFolded prefix completed with the ids of planMaxChanges changes, and
// as markFoldedMax with those of foldedMaxIDs(l) changes, and every
// statement of a batch ([batchSQL]) as "batch " and its field name, for
// planBatch changes or sources.
func planStatements(e engine, l planLayout, cfg Config, s statements) map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		q := v.Field(i).String()
		if name == "markFolded" {
			out[markFoldedMax] = e.bind(q) + e.in(foldedMaxIDs(l), 1)
			q = e.bind(q) + e.in(planMaxChanges, 1)
		}
		out[name] = q
	}
	bv := reflect.ValueOf(newBatchSQL(e, cfg))
	for i := range bv.NumField() {
		out["batch "+bv.Type().Field(i).Name] = batchStmtOf(bv.Field(i)).render(e, planBatch)
	}
	return out
}

// TestCoalescePlansReadOnlyWhatTheyNeed explains every statement of the
// coalescer (found by reflection over [statements], so a new one cannot be
// forgotten) on tables of planLayout's shape, first under statistics taken
// when the tables looked different (planThen) and then under fresh ones:
// on PostgreSQL with EXPLAIN ANALYZE under custom and generic plans, on
// MariaDB with ANALYZE FORMAT=JSON (both execute the statement in a
// transaction rolled back and count the rows each access read), each
// within its budget and never scanning a table, walking a whole index (on
// PostgreSQL also: an index scan without a condition on the index's
// leading column) or (MariaDB) sorting; on SQLite, a hundredth of the
// layout, with EXPLAIN QUERY PLAN: never a scan of a table or a whole
// index, never a sort.
//
// Package claim's statements on the keys table (the flushers' claims,
// acks, heartbeats and reaps, the operators' listings) are explained the
// same way (checkKeysPlans), on the keys of this layout.
//
// Controls must be caught on every engine and mode, or the test does not
// read this server's plans: a condition on the payload, which no index
// holds, and a walk of an index in its order (planControls); and the
// earlier forms of four statements where they were measured to go wrong
// (planEarlier).
func TestCoalescePlansReadOnlyWhatTheyNeed(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			// One engine at a time: the loads are heavy.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			c := testengine.Open(t, e, 4)
			eng, err := engineOf(c.Dialect)
			require.NoError(t, err)
			if eng == engMySQL && c.Dialect.Capabilities().Engine != dialect.EngineMariaDB {
				t.Skipf("%s: the coalescer's plans are read with MariaDB's ANALYZE FORMAT=JSON, which counts rows; MySQL has none (not checked here)",
					c.Dialect.Capabilities().Engine)
			}
			l := planFull
			if eng == engSQLite {
				l = planSQLite
			}
			cfg, err := Config{}.withDefaults()
			require.NoError(t, err)
			require.NoError(t, CreateTables(ctx, c.Dialect, c.DB, cfg))
			start := time.Now()
			loadPlanLayout(ctx, t, c.DB, eng, l)
			loaded := time.Since(start)
			start = time.Now()
			explain := planExplainer(ctx, t, c.DB, eng)
			for _, stats := range []string{"stale statistics", "fresh statistics"} {
				if stats == "fresh statistics" {
					analyzePlanTables(ctx, t, c.DB, eng)
				}
				checkPlans(t, eng, l, stats, explain)
				checkKeysPlans(t, c.Dialect, eng, l, stats, explain)
			}
			t.Logf("%s: loaded %d changes of %d keys in %v, analyzed and explained in %v", e.Name, l.Changes, l.Keys,
				loaded.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		})
	}
}

// The statistics the test explains under first come from tables that
// looked different, as they do soon after a service starts: planThenKeys
// keys, all pending, and planThen changes of them, accepted just now, nine
// in ten unfolded. They are deleted before the layout is loaded; the
// statistics stay (PostgreSQL's autovacuum and InnoDB's automatic
// recalculation are off for the tables). MariaDB's engine-independent
// statistics are taken with the fresh ones only, as in the claim plan
// tests (MariaDB never refreshes them).
const planThen, planThenKeys = 30_000, 1_000

// planSQL renders the engine's pieces of the loading statements.
type planSQL struct {
	seq     func(n int) string
	cat     func(a, b string) string
	payload string
	// now is the database clock in the keys table's time columns.
	now string
}

// planSQLOf returns e's pieces.
func planSQLOf(e engine) planSQL {
	p := planSQL{cat: func(a, b string) string { return a + " || " + b }, payload: "'p'", now: e.nowMillis()}
	switch e {
	case engPostgres:
		p.seq = func(n int) string { return fmt.Sprintf("generate_series(1, %d) AS seq(g)", n) }
		p.payload = `'\x70'::bytea`
		p.now = "now()"
	case engMySQL:
		p.seq = myplan.Seq
		p.cat = func(a, b string) string { return "CONCAT(" + a + ", " + b + ")" }
		p.now = "UTC_TIMESTAMP(6)"
	default:
		p.seq = func(n int) string {
			return fmt.Sprintf("(WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %d) SELECT g FROM s) AS seq", n)
		}
	}
	return p
}

// runPlanSQL runs each query on db, reading and dropping any rows.
func runPlanSQL(ctx context.Context, t *testing.T, db *sql.DB, queries ...string) {
	t.Helper()
	for _, q := range queries {
		rows, err := db.QueryContext(ctx, q)
		require.NoError(t, err, q)
		for rows.Next() { // ANALYZE TABLE and setval return rows
		}
		require.NoError(t, rows.Err(), q)
		rows.Close()
	}
}

// analyzePlanTables takes fresh statistics of the three tables.
func analyzePlanTables(ctx context.Context, t *testing.T, db *sql.DB, e engine) {
	t.Helper()
	switch e {
	case engPostgres:
		runPlanSQL(ctx, t, db, `ANALYZE coalesce_changes`, `ANALYZE coalesce_keys`, `ANALYZE coalesce_sources`)
	case engMySQL:
		// The engine-independent statistics from a sample the server
		// sizes (0): reading every row of the million took half a minute.
		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		for _, q := range []string{"SET SESSION analyze_sample_percentage = 0",
			"ANALYZE TABLE coalesce_changes, coalesce_keys, coalesce_sources PERSISTENT FOR ALL"} {
			rows, err := conn.QueryContext(ctx, q)
			require.NoError(t, err, q)
			for rows.Next() {
			}
			require.NoError(t, rows.Err(), q)
			rows.Close()
		}
	default:
		runPlanSQL(ctx, t, db, `ANALYZE`)
	}
}

// loadPlanLayout takes statistics of the planThen rows, deletes them and
// fills the default tables with l.
func loadPlanLayout(ctx context.Context, t *testing.T, db *sql.DB, e engine, l planLayout) {
	t.Helper()
	var now int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT "+e.nowMillis()).Scan(&now))
	p := planSQLOf(e)
	tables := []string{"coalesce_changes", "coalesce_keys", "coalesce_sources"}
	var then []string
	for _, tb := range tables {
		switch e {
		case engPostgres:
			then = append(then, "ALTER TABLE "+tb+" SET (autovacuum_enabled = false)")
		case engMySQL:
			then = append(then, "ALTER TABLE "+tb+" STATS_PERSISTENT = 1, STATS_AUTO_RECALC = 0")
		}
	}
	then = append(then,
		fmt.Sprintf(`INSERT INTO coalesce_changes (id, change_key, event_id, source, seq, payload, accepted_at, folded_at)
			SELECT g, %[1]s, %[2]s, 'src', g, %[3]s, %[4]d - (%[5]d - g), CASE WHEN g <= %[6]d THEN %[4]d - (%[5]d - g) + 1000 END
			FROM %[7]s`,
			p.cat("'k-'", fmt.Sprintf("((g - 1) %% %d + 1)", planThenKeys)), p.cat("'e-'", "g"), p.payload, now, planThen, planThen/10, p.seq(planThen)),
		fmt.Sprintf(`INSERT INTO coalesce_keys (change_key, status, version) SELECT %s, 'PENDING', 1 FROM %s`, p.cat("'k-'", "g"), p.seq(planThenKeys)),
		fmt.Sprintf(`INSERT INTO coalesce_sources (change_key, source, last_seq) SELECT %s, 'src', g FROM %s`, p.cat("'k-'", "g"), p.seq(planThenKeys)))
	switch e {
	case engPostgres:
		then = append(then, `ANALYZE coalesce_changes`, `ANALYZE coalesce_keys`, `ANALYZE coalesce_sources`,
			// TRUNCATE keeps the columns' statistics.
			`TRUNCATE coalesce_changes, coalesce_keys, coalesce_sources`)
	case engMySQL:
		then = append(then, "ANALYZE TABLE coalesce_changes, coalesce_keys, coalesce_sources",
			"DELETE FROM coalesce_changes", "DELETE FROM coalesce_keys", "DELETE FROM coalesce_sources")
	default:
		then = append(then, `ANALYZE`, "DELETE FROM coalesce_changes", "DELETE FROM coalesce_keys", "DELETE FROM coalesce_sources")
	}
	runPlanSQL(ctx, t, db, then...)

	live := l.Changes - l.Live
	runPlanSQL(ctx, t, db,
		fmt.Sprintf(`INSERT INTO coalesce_changes (id, change_key, event_id, source, seq, payload, accepted_at, folded_at)
			SELECT g, CASE WHEN g %% 4 = 0 THEN 'hot' ELSE %[1]s END, %[2]s, 'src', g, %[3]s, %[4]d - (%[5]d - g) * 100,
			       CASE WHEN g > %[6]d OR g <= %[7]d THEN NULL ELSE %[4]d - (%[5]d - g) * 100 + 1000 END
			FROM %[8]s`,
			p.cat("'k-'", fmt.Sprintf("((g - 1) %% %d + 1)", l.Keys)), p.cat("'e-'", "g"), p.payload, now, l.Changes, live, planOld, p.seq(l.Changes)),
		fmt.Sprintf(`INSERT INTO coalesce_keys (change_key, status, token, claimed_at, version)
			SELECT %[1]s, CASE WHEN g <= %[2]d THEN 'FAILED' WHEN g > %[3]d THEN 'PROCESSING' WHEN g > %[4]d THEN 'PENDING' ELSE 'DONE' END,
			       CASE WHEN g > %[3]d THEN '%[5]s' END, CASE WHEN g > %[3]d THEN %[7]s END, 1
			FROM %[6]s`,
			p.cat("'k-'", "g"), planParked, l.Keys-planProcessing, l.Keys-l.Live, planToken, p.seq(l.Keys), p.now),
		`INSERT INTO coalesce_keys (change_key, status, version) VALUES ('hot', 'PENDING', 1)`,
		fmt.Sprintf(`INSERT INTO coalesce_sources (change_key, source, last_seq) SELECT %s, 'src', g FROM %s`, p.cat("'k-'", "g"), p.seq(l.Keys)),
		fmt.Sprintf(`INSERT INTO coalesce_sources (change_key, source, last_seq) VALUES ('hot', 'src', %d)`, l.Changes))
	if e == engPostgres {
		runPlanSQL(ctx, t, db, fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('coalesce_changes', 'id'), %d)`, l.Changes))
	}
}

// planControls are statements the checks must catch: no index holds the
// payload, so the first scans the table, beyond planSmall rows; the second
// reads ten rows only, but in the order of the key index with no
// condition on it, a walk of that index (stopped early here, not so with
// a condition that no entry meets).
func planControls(e engine) map[string][]any {
	ch := e.quote(DefaultChangesTable)
	return map[string][]any{
		e.bind("SELECT COUNT(*) FROM " + ch + " WHERE payload = ?"):      {[]byte("x")},
		"SELECT change_key FROM " + ch + " ORDER BY change_key LIMIT 10": nil,
	}
}

// planEarlier returns the forms four statements had before this test, by
// the name of their statement, with the engines on which the checks must
// catch them (in every plan mode): on PostgreSQL, oldest read every
// unfolded change, stranded hashed or walked the keys table, prune scanned
// the changes (its clock, volatile, was no index condition) and
// readChanges walked the primary key or sorted the hot key's unfolded
// changes; on MariaDB, oldest read every unfolded change. Elsewhere their
// plans are logged.
func planEarlier(e engine) map[string]struct {
	q      string
	engine []engine
} {
	ch, keys, now := e.quote(DefaultChangesTable), e.quote(DefaultKeysTable), e.nowMillis()
	prune := e.bind("DELETE FROM " + ch + " WHERE id IN (SELECT id FROM " + ch + " WHERE folded_at < " + now + " - ? LIMIT 1000)")
	if e == engMySQL {
		prune = "DELETE FROM " + ch + " WHERE folded_at < " + now + " - ? LIMIT 1000"
	}
	type earlier = struct {
		q      string
		engine []engine
	}
	return map[string]earlier{
		"oldest": {"SELECT COALESCE(" + now + " - MIN(c.accepted_at), 0) FROM " + ch + " c WHERE c.folded_at IS NULL" +
			" AND NOT EXISTS (SELECT 1 FROM " + keys + " k WHERE k.change_key = c.change_key AND k.status = 'FAILED')", []engine{engPostgres, engMySQL}},
		"stranded": {e.bind("SELECT DISTINCT c.change_key FROM " + ch + " c LEFT JOIN " + keys + " k ON k.change_key = c.change_key" +
			" WHERE c.folded_at IS NULL AND c.accepted_at < " + now + " - ? AND (k.change_key IS NULL OR k.status = 'DONE')"), []engine{engPostgres}},
		"prune":       {prune, []engine{engPostgres}},
		"readChanges": {e.bind("SELECT id, event_id, source, seq, payload FROM " + ch + " WHERE change_key = ? AND folded_at IS NULL ORDER BY id LIMIT ?"), []engine{engPostgres}},
		"markFolded":  {e.bind("UPDATE "+ch+" SET folded_at = "+now+" WHERE folded_at IS NULL AND id IN ") + e.in(planMaxChanges, 1), []engine{engSQLite}},
	}
}

// liteCheck returns ch's problems, with pc.liteUses's on SQLite.
func liteCheck(e engine, pc planCase, ch planCheck) string {
	if e != engSQLite || pc.liteUses == "" || strings.Contains(ch.summary, pc.liteUses) {
		return ch.problems
	}
	return strings.TrimPrefix(ch.problems+"; not searched "+pc.liteUses, "; ")
}

// planCheck is the verdict on one explained plan: its label, its problems
// ("" when none) and its summary.
type planCheck struct {
	label    string
	problems string
	summary  string
}

// planExplain explains q with args and returns the verdict on its plan
// within budget rows (allow.fullScan allows a scan of a table or a walk of
// a whole index, allow.sort a sort of the rows read), once per plan
// mode of the engine; none for an INSERT on MariaDB.
type planExplain func(label, q string, args []any, budget int64, allow planAllow) []planCheck

// planAllow is what a statement may do beyond reading its budget through
// indexes: scan a table or walk a whole index, sort, scan its own VALUES
// list (SQLite).
type planAllow struct{ fullScan, sort, values bool }

// planExplainer returns the planExplain of e on db.
func planExplainer(ctx context.Context, t *testing.T, db *sql.DB, e engine) planExplain {
	t.Helper()
	// explain returns the problems of q's plan within budget and its
	// summary, for each plan mode of the engine.
	var explain planExplain
	switch e {
	case engPostgres:
		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		leading := pgplan.Leading(ctx, t, conn)
		require.Contains(t, leading, indexName(DefaultChangesTable, "key"))
		explain = func(label, q string, args []any, budget int64, allow planAllow) []planCheck {
			var out []planCheck
			for _, mode := range pgplan.Modes {
				p := pgplan.Analyze(ctx, t, conn, mode, q, args)
				problems := p.Problems(budget, allow.fullScan)
				if u := p.Unled(leading); u != "" {
					problems = strings.TrimPrefix(problems+"; "+u, "; ")
				}
				out = append(out, planCheck{label + ", " + mode, problems, fmt.Sprintf("read %.0f rows\n%s", p.Read, p.Summary())})
			}
			return out
		}
	case engMySQL:
		explain = func(label, q string, args []any, budget int64, allow planAllow) []planCheck {
			if strings.HasPrefix(q, "INSERT ") {
				// One row inserted, found by its unique key: ANALYZE
				// shows no table access to count.
				return nil
			}
			p := myplan.Analyze(ctx, t, db, q, args)
			summary := fmt.Sprintf("read %.0f rows\n%s", p.Read, p.Summary())
			if allow.sort {
				p.Filesort = false
			}
			return []planCheck{{label, p.Problems(budget, allow.fullScan), summary}}
		}
	default:
		explain = func(label, q string, args []any, _ int64, allow planAllow) []planCheck {
			plan := liteplan.QueryPlan(ctx, t, db, q, args)
			judged := plan
			if allow.sort {
				judged = slices.DeleteFunc(slices.Clone(judged), func(l string) bool { return strings.Contains(l, "TEMP B-TREE FOR ORDER BY") })
			}
			if allow.values {
				judged = slices.DeleteFunc(slices.Clone(judged), func(l string) bool {
					return strings.HasPrefix(l, "SCAN ") && (strings.HasSuffix(l, " CONSTANT ROWS") || strings.HasSuffix(l, "-ROW VALUES CLAUSE"))
				})
			}
			return []planCheck{{label, liteplan.Problem(judged, allow.fullScan), strings.Join(plan, "\n")}}
		}
	}

	return explain
}

// checkPlans explains every statement on db and checks it, under the
// statistics named stats (the earlier forms must be caught under fresh
// ones; under stale ones they are logged).
func checkPlans(t *testing.T, e engine, l planLayout, stats string, explain planExplain) {
	t.Helper()
	cfg, err := Config{}.withDefaults()
	require.NoError(t, err)
	cases := planCases()
	stmts := planStatements(e, l, cfg, newStatements(e, cfg))
	names := make([]string, 0, len(stmts))
	for name := range stmts {
		names = append(names, name)
		require.Contains(t, cases, name, "statement %s has no plan case", name)
	}
	for name := range cases {
		require.Contains(t, stmts, name, "plan case %s names no statement", name)
	}
	sort.Strings(names)

	for _, name := range names {
		pc := cases[name]
		budget := pc.budget(l)
		if pc.staleScan && stats == "stale statistics" {
			budget = max(budget, int64(l.Keys+1))
		}
		for _, ch := range explain(stats+", "+name, stmts[name], pc.args(l), budget, planAllow{fullScan: pc.staleScan && stats == "stale statistics", values: pc.values}) {
			ch.problems = liteCheck(e, pc, ch)
			if ch.problems != "" {
				t.Errorf("%s: %s (budget %d rows: %s)\n%s\n%s", ch.label, ch.problems, budget, pc.why, stmts[name], ch.summary)
			} else {
				t.Logf("%s: %s", ch.label, strings.ReplaceAll(ch.summary, "\n", " |"))
			}
		}
	}
	// The earlier forms, with the arguments and budgets of their
	// statements.
	for name, ea := range planEarlier(e) {
		pc := cases[name]
		args := pc.args(l)
		if name == "stranded" {
			args = args[:1] // it had no LIMIT
		}
		for _, ch := range explain(stats+", earlier "+name, ea.q, args, pc.budget(l), planAllow{}) {
			ch.problems = liteCheck(e, pc, ch)
			if ch.problems == "" && slices.Contains(ea.engine, e) && stats == "fresh statistics" {
				t.Errorf("the checks passed the earlier form of %s (%s):\n%s\n%s", name, ch.label, ea.q, ch.summary)
			}
			t.Logf("%s: caught: %q", ch.label, ch.problems)
		}
	}
	// The controls must be caught: a check that lets a scan of the
	// million changes or a walk of an index pass does not read this
	// server's plans.
	for q, args := range planControls(e) {
		checks := explain(stats+", control", q, args, planSmall, planAllow{})
		require.NotEmpty(t, checks)
		for _, ch := range checks {
			require.NotEmpty(t, ch.problems, "the checks passed the control %s (%s):\n%s", q, ch.label, ch.summary)
			t.Logf("control caught (%s): %s", ch.label, ch.problems)
		}
	}
}

// checkKeysPlans explains every statement of package claim's store on the
// keys table (the flushers' claims, acks by version, heartbeats, reaps and
// the operators' listings and unparks: its Statements, so a new one cannot
// be forgotten) on db under the statistics named stats: each within its
// budget, as checkPlans checks the coalescer's own. The arguments are the
// processing keys' token and keys, batches of planMaxChanges, and a
// rotating cursor mid-table.
func checkKeysPlans(t *testing.T, d dialect.Dialect, e engine, l planLayout, stats string, explain planExplain) {
	t.Helper()
	spec, err := KeysTable(Config{})
	require.NoError(t, err)
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	claims, ok := cs.(*store.Claims)
	require.True(t, ok, "claim store %T", cs)
	keys := make([]any, planProcessing)
	for i := range keys {
		keys[i] = fmt.Sprintf("k-%d", l.Keys-planProcessing+1+i)
	}
	versions := make([]int64, planProcessing)
	for i := range versions {
		versions[i] = 1
	}
	args := &render.Args{Token: planToken, AckToken: planToken, Keys: keys, Versions: versions, Limit: planMaxChanges,
		MaxAttempts: 3, Below: 2, Timeout: 10 * time.Minute, Delay: time.Minute, After: fmt.Sprintf("k-%d", l.Keys/2)}
	// Budgets beyond planSmall: stats count the table by design (the keys
	// table has no scope: its scoped stats are the same count); retrying
	// or listing the pending keys with a future RunAt reads the pending
	// keys (no index orders them by RunAt: operators' statements); on
	// SQLite, reading back a token's keys sorts them (a batch): its token
	// index holds the rowid after the token, not the text key.
	type allowance struct {
		budget int64
		allow  planAllow
	}
	allow := map[string]allowance{
		"stats":          {int64(l.Keys) + planSmall, planAllow{fullScan: true}},
		"stats scoped":   {int64(l.Keys) + planSmall, planAllow{fullScan: true}},
		"retry now":      {int64(l.Live) + planSmall, planAllow{}},
		"list scheduled": {int64(l.Live) + planSmall, planAllow{}},
		"read back":      {planSmall, planAllow{sort: e == engSQLite}},
		"read back keys": {planSmall, planAllow{sort: e == engSQLite}},
	}
	names := make([]string, 0)
	for name, q := range claims.Statements() {
		if q != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		q, qargs, ok := claims.Bind(name, args)
		require.True(t, ok, name)
		a, found := allow[name]
		if !found {
			a = allowance{budget: planSmall}
		}
		for _, ch := range explain(stats+", keys table "+name, q, qargs, a.budget, a.allow) {
			if ch.problems != "" {
				t.Errorf("%s: %s (budget %d rows)\n%s\n%s", ch.label, ch.problems, a.budget, q, ch.summary)
			} else {
				t.Logf("%s: %s", ch.label, strings.ReplaceAll(ch.summary, "\n", " |"))
			}
		}
	}
}

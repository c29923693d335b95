package dialecttest

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// TimeType is one column type a time column may have on an engine, for the
// TimeColumns case: the type as the engine's DDL writes it, the format the
// table description gives the column, and whether verification must refuse
// the pair. Every engine lists the types users have (Harness.TimeTypes):
// those that hold a point in time are supported in their format, the
// others refused before any row changes.
type TimeType struct {
	// DDL is the column type ("DATE", "INT UNSIGNED", "timestamptz(0)").
	DDL string
	// Format is the format the table description gives the column.
	Format dialect.TimeFormat
	// Refused is true when verification must refuse the column.
	Refused bool
	// Says is what the refusal must name of the type, in lower case
	// (default: DDL's first word, lower case): PostgreSQL reports VARCHAR
	// as "character varying".
	Says string
}

func (tt TimeType) name() string {
	n := strings.NewReplacer(" ", "_", "(", "", ")", "", ",", "_").Replace(strings.ToLower(tt.DDL))
	if tt.Format != dialect.TimeNative {
		n += "/" + strings.ReplaceAll(tt.Format.String(), " ", "_")
	}
	return n
}

func (tt TimeType) says() string {
	if tt.Says != "" {
		return tt.Says
	}
	w := strings.ToLower(strings.Fields(tt.DDL)[0])
	if i := strings.IndexByte(w, '('); i >= 0 {
		w = w[:i]
	}
	return w
}

// timeTables are the tables of one TimeType: a claim table whose
// claimed-at and run-at columns have the type, a task table with an owner
// column and one without, whose lock time has it, and a key table whose
// expiry has it.
type timeTables struct {
	d                     dialect.Dialect
	db                    *sql.DB
	claims                store.ClaimStore
	claimSpec             dialect.ClaimTable
	task, taskBare, keyed store.LeaseStore
	q                     func(string) string
	// sfx ends the names of this type's tables: all types share one
	// database (one connection pool).
	sfx string
}

// addColumn runs ALTER TABLE ... ADD COLUMN with a raw type.
func addColumn(t *goT, db *sql.DB, q func(string) string, table, col, typ string) {
	t.Helper()
	_, err := db.ExecContext(ctxT(t.t), fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s NULL", q(table), q(col), typ))
	require.NoError(t, err, "add column %s %s", col, typ)
}

// createWithout creates def without the columns named in skip.
func createWithout(t *goT, d dialect.Dialect, def store.TableDef, skip ...string) {
	t.Helper()
	var cols []store.ColumnDef
	for _, c := range def.Columns {
		if !strings.Contains(" "+strings.Join(skip, " ")+" ", " "+c.Name+" ") {
			cols = append(cols, c)
		}
	}
	def.Columns = cols
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctxT(t.t), d, ddl))
}

func newTimeTables(t *goT, d dialect.Dialect, db *sql.DB, tt TimeType, i int) *timeTables {
	x := &timeTables{d: d, db: db, sfx: fmt.Sprintf("_%d", i)}
	x.q = func(name string) string {
		s, err := store.QuoteIdent(d, "test", name)
		require.NoError(t, err)
		return s
	}
	x.claimSpec = dialect.ClaimTable{
		Table: "cl_tc" + x.sfx, ID: "id", Status: "status", Token: "token", ClaimedAt: "t_claimed", ClaimedAtFormat: tt.Format,
		RunAt: "t_run", RunAtFormat: tt.Format, Attempts: "attempts", Columns: []string{"payload"},
		Pending: dialect.StatusString("PENDING"), Processing: dialect.StatusString("PROCESSING"),
		Done: dialect.StatusString("SENT"), Failed: dialect.StatusString("FAILED"),
	}
	createWithout(t, d, store.ClaimTableDef(x.claimSpec), "t_claimed", "t_run")
	addColumn(t, db, x.q, x.claimSpec.Table, "t_claimed", tt.DDL)
	addColumn(t, db, x.q, x.claimSpec.Table, "t_run", tt.DDL)
	cs, err := store.OpenClaims(d, x.claimSpec)
	require.NoError(t, err)
	x.claims = cs

	for _, task := range []struct {
		table, owner string
		dst          *store.LeaseStore
	}{{"cl_tl" + x.sfx, "lock_owner", &x.task}, {"cl_tn" + x.sfx, "", &x.taskBare}} {
		def := store.TableDef{Table: task.table, PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
			{Name: "id", Type: store.TypeInt, NotNull: true},
			{Name: "status", Type: store.TypeText, Len: 16, NotNull: true, Default: ptr(dialect.StatusString("IDLE"))},
		}}
		if task.owner != "" {
			def.Columns = append(def.Columns, store.ColumnDef{Name: task.owner, Type: store.TypeText, Len: store.MaxTokenLen})
		}
		createWithout(t, d, def)
		addColumn(t, db, x.q, task.table, "t_lock", tt.DDL)
		_, err := db.ExecContext(ctxT(t.t), fmt.Sprintf("INSERT INTO %s (%s) VALUES (1)", x.q(task.table), x.q("id")))
		require.NoError(t, err)
		ls, err := store.OpenLeases(d, dialect.LeaseTable{Table: task.table, Key: "id", Owner: task.owner, LockedAt: "t_lock",
			LockedAtFormat: tt.Format, Status: "status"})
		require.NoError(t, err)
		*task.dst = ls
	}
	keyed := store.KeyedLeaseTable("cl_tk"+x.sfx, 64)
	keyed.ExpiresAt, keyed.ExpiresAtFormat = "t_exp", tt.Format
	keyDef := store.LeaseTableDef(keyed.Table, 64)
	keyDef.Indexes = nil
	createWithout(t, d, keyDef, "expires_at")
	addColumn(t, db, x.q, keyed.Table, "t_exp", tt.DDL)
	ls, err := store.OpenLeases(d, keyed)
	require.NoError(t, err)
	x.keyed = ls
	return x
}

// testTimeColumns checks every time column type the engine lists: a
// refused one is refused by verification, with a permanent error naming the
// column and its type, for the claimed-at and run-at columns of a claim
// table, the lock time of task tables with and without an owner, and the
// expiry of a key table; a supported one runs claims, heartbeats, reaps,
// retries with a run-at, and leases with expiries and minimum holds, never
// letting a second holder in early, and writes times a reader of the
// column finds right (unix time in its unit, a native time near now).
func testTimeColumns(t *testing.T, h Harness) {
	require.NotEmpty(t, h.TimeTypes, "Harness.TimeTypes: every engine lists the time column types it refuses and supports")
	// Every type's tables are made and checked at once, in one database:
	// the checks mostly wait for TTLs and timeouts (as parallel subtests
	// would not: go test runs GOMAXPROCS of them at once).
	d, db := h.Open(t)
	var wg sync.WaitGroup
	for i, tt := range h.TimeTypes {
		wg.Go(func() {
			gt := &goT{t: t, prefix: tt.name()}
			x := newTimeTables(gt, d, db, tt, i)
			if !x.verify(gt, tt) {
				return
			}
			var inner sync.WaitGroup
			inner.Go(func() { x.runClaims(gt.sub("claims"), tt) })
			inner.Go(func() { x.runLease(gt.sub("task lease"), tt, x.task, 1, "t_lock", "cl_tl") })
			inner.Go(func() { x.runLease(gt.sub("task lease without owner"), tt, x.taskBare, 1, "t_lock", "cl_tn") })
			inner.Go(func() { x.runLease(gt.sub("key lease"), tt, x.keyed, "k1", "t_exp", "cl_tk") })
			inner.Wait()
		})
	}
	wg.Wait()
}

// goT is a require.TestingT for a goroutine of a test: a failure is
// reported on the test with the check's name and ends the goroutine (as
// FailNow ends a test's own goroutine), not the test.
type goT struct {
	t      *testing.T
	prefix string
}

func (g *goT) Errorf(format string, args ...any) {
	g.t.Errorf("%s: "+format, append([]any{g.prefix}, args...)...)
}
func (g *goT) FailNow()             { runtime.Goexit() }
func (g *goT) Helper()              {}
func (g *goT) sub(name string) *goT { return &goT{t: g.t, prefix: g.prefix + "/" + name} }

// verify runs every table's verification: a refused type must be refused
// by each, with a permanent error naming the column and its type; a
// supported one accepted. It reports whether the protocol checks follow.
func (x *timeTables) verify(t *goT, tt TimeType) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	verify := map[string]func(context.Context) error{
		"claim table (t_claimed, t_run)": x.claims.VerifySchema, "task table (t_lock)": x.task.VerifySchema,
		"task table without owner (t_lock)": x.taskBare.VerifySchema, "key table (t_exp)": x.keyed.VerifySchema,
	}
	for what, v := range verify {
		err := v(ctx)
		if !tt.Refused {
			require.NoError(t, err, "%s: %s is supported as %s", what, tt.DDL, tt.Format)
			continue
		}
		require.Error(t, err, "%s: %s as %s must be refused", what, tt.DDL, tt.Format)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%s", what)
		require.True(t, dialect.IsPermanent(err), "%s: a refusal is permanent: %v", what, err)
		msg := strings.ToLower(err.Error())
		require.Contains(t, msg, "t_", "%s: the error names the column: %v", what, err)
		require.Contains(t, msg, tt.says(), "%s: the error names the type: %v", what, err)
	}
	return !tt.Refused
}

// checkStored reads col of the row where key column keyCol = key and checks
// that it holds a time near want, in the column's format: unix time in its
// unit within two units and a second, a native time within two seconds.
// timeSlack is how far a stored time may fall outside the window of the
// statement that wrote it: a whole second lost to a column of whole seconds,
// and a clock read on the database rather than here.
const timeSlack = 1500 * time.Millisecond

// requireDuring checks that got falls in [from, to] give or take timeSlack:
// from is taken before the statement that wrote it, to after, so a
// statement slowed by load widens the window instead of failing the check.
func requireDuring(t require.TestingT, from, to, got time.Time, msgAndArgs ...any) {
	if got.Before(from.Add(-timeSlack)) || got.After(to.Add(timeSlack)) {
		require.Fail(t, fmt.Sprintf("%v is outside [%v, %v] give or take %v", got, from, to, timeSlack), msgAndArgs...)
	}
}

// checkStored checks that col of the row holds a time in [from, to] (see
// requireDuring) read as the type's format: unix time in its unit, or any
// non-NULL native time.
func (x *timeTables) checkStored(t *goT, tt TimeType, table, keyCol string, key any, col string, from, to time.Time) {
	t.Helper()
	lit := fmt.Sprint(key)
	if s, ok := key.(string); ok {
		lit = "'" + s + "'"
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", x.q(col), x.q(table), x.q(keyCol), lit)
	switch tt.Format {
	case dialect.UnixSeconds, dialect.UnixMillis:
		var n sql.NullInt64
		require.NoError(t, x.db.QueryRowContext(ctxT(t.t), q).Scan(&n))
		require.True(t, n.Valid, "%s.%s is NULL", table, col)
		got := time.Unix(n.Int64, 0)
		if tt.Format == dialect.UnixMillis {
			got = time.UnixMilli(n.Int64)
		}
		requireDuring(t, from, to, got, "%s.%s holds %d (%s): not %s", table, col, n.Int64, got, tt.Format)
	default:
		var v any
		require.NoError(t, x.db.QueryRowContext(ctxT(t.t), q).Scan(&v))
		require.NotNil(t, v, "%s.%s is NULL", table, col)
	}
}

func (x *timeTables) runClaims(t *goT, tt TimeType) {
	ctx := ctxT(t.t)
	for i := range 2 {
		_, err := x.db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES ('p%d')", x.q(x.claimSpec.Table), x.q("payload"), i))
		require.NoError(t, err)
	}
	strategy, err := x.d.Capabilities().Resolve(dialect.StrategyAuto)
	require.NoError(t, err)
	claimRows := func() (string, []int64) {
		tok := store.NewToken()
		var ids []int64
		_, err := x.claims.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 10, Strategy: strategy}, func(sc store.Scanner) error {
			var id, attempts int64
			var payload string
			if err := sc.Scan(&id, &attempts, &payload); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		})
		require.NoError(t, err)
		return tok, ids
	}
	claimedAt := time.Now()
	tok, ids := claimRows()
	claimedBy := time.Now()
	require.Len(t, ids, 2)
	x.checkStored(t, tt, x.claimSpec.Table, "id", ids[0], "t_claimed", claimedAt, claimedBy)

	// A live claim is not stale: the reaper of the trial returned rows
	// claimed two seconds before to pending under a 15 s timeout.
	res, err := x.claims.Reap(ctx, &store.ReapParams{Timeout: 30 * time.Second, Limit: 10})
	require.NoError(t, err)
	require.Zero(t, res.Returned, "rows claimed %v ago were reaped under a 30-second timeout", time.Since(claimedAt))
	stats, err := x.claims.Stats(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, stats.Processing)
	require.Less(t, stats.OldestProcessing, time.Since(claimedAt)+timeSlack, "the oldest claim's age: %v", stats.OldestProcessing)
	require.GreaterOrEqual(t, stats.OldestProcessing, time.Duration(0))
	list, err := x.claims.List(ctx, &store.ListParams{Set: store.SetProcessing, Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 2)
	for _, r := range list {
		require.Less(t, r.ClaimedAge, time.Since(claimedAt)+timeSlack, "row %v: claimed %v ago", r.ID, r.ClaimedAge)
	}

	// A retry with a delay sets the run-at: the row is not claimable
	// before it. At 0.8 s into a second, the run-at falls at 0.3 s into
	// one: a column of whole seconds that stored it truncated would let
	// the row go 0.3 s early.
	const delay = 1500 * time.Millisecond
	retried := atOffset(800 * time.Millisecond)
	ar, err := x.claims.Ack(ctx, &store.AckParams{Token: tok, IDs: []any{ids[0]}, Outcome: store.OutcomeRetry, Delay: delay})
	retriedBy := time.Now()
	require.NoError(t, err)
	require.Empty(t, ar.Lost)
	x.checkStored(t, tt, x.claimSpec.Table, "id", ids[0], "t_run", retried.Add(delay), retriedBy.Add(delay))

	heartbeat := time.Now()
	held, err := x.claims.Heartbeat(ctx, tok)
	require.NoError(t, err)
	require.Len(t, held, 1)
	var reapedAt, reclaimedAt time.Duration
	for reapedAt == 0 || reclaimedAt == 0 {
		if reapedAt == 0 {
			res, err := x.claims.Reap(ctx, &store.ReapParams{Timeout: time.Second, Limit: 10})
			require.NoError(t, err)
			if res.Returned > 0 {
				reapedAt = time.Since(heartbeat)
			}
		}
		if reclaimedAt == 0 {
			// The reaped row may be claimed here too; the retried one
			// only once its run-at passed.
			if _, got := claimRows(); slices.Contains(got, ids[0]) {
				reclaimedAt = time.Since(retried)
			}
		}
		require.Less(t, time.Since(heartbeat), 2*time.Second+liveness, "the heartbeaten row must be reaped and the retried row claimable within seconds (reaped after %v, reclaimed after %v)", reapedAt, reclaimedAt)
		time.Sleep(50 * time.Millisecond)
	}
	require.GreaterOrEqual(t, reapedAt, time.Second, "a row heartbeaten %v before was reaped under a one-second timeout", reapedAt)
	// A run-at is a delay, not a lock: the check is that a column of whole
	// seconds does not let the row go up to a second early (0.3 s here),
	// with 20 ms allowed for an engine's statement clock (MariaDB's start
	// of statement) against the local one.
	require.GreaterOrEqual(t, reclaimedAt, delay-20*time.Millisecond, "a row retried with a %v delay was claimed again after %v", delay, reclaimedAt)
}

// liveness bounds how long past its due time a lease may take to be free,
// or a stale row or expired lease to be reaped, before a case fails. Those
// times are a second or two away; the bound is for a lease or row that
// never frees, not for a slow one: under the race suite on two cores the
// cases of one SQLite file, which run at once, wait seconds for its single
// writer (a renewed lease was taken 5.02 s after its renewal once, against
// a bound of 5 s then). The early side, what the guarantees are about, is
// checked to the millisecond.
const liveness = 10 * time.Second

// runLease acquires key, renews it, checks that nobody else takes it before
// its TTL since the renewal started, releases it with a minimum hold that
// must keep it (tables with an expiry), and on the key table reaps it.
func (x *timeTables) runLease(t *goT, tt TimeType, ls store.LeaseStore, key any, col, kind string) {
	ctx := ctxT(t.t)
	table := kind + x.sfx
	const ttl = time.Second
	keyCol := "id"
	if kind == "cl_tk" {
		keyCol = "lease_key"
	}
	takeover := func(since time.Time, bound time.Duration, what string) store.LeaseInfo {
		for {
			info, err := ls.Acquire(ctx, key, store.NewToken(), ttl)
			if err == nil {
				// The engines keep time on the wall clock (the database's
				// now, on this host), so the bound is measured on it too:
				// the monotonic clock may run apart from it by a slew or a
				// step of the wall clock, milliseconds that are not an
				// early takeover. The new expiry is the database's now plus
				// the TTL (up to a unit later): when the engine let the
				// holder in.
				got := time.Now().Round(0).Sub(since.Round(0))
				require.GreaterOrEqual(t, got, bound, "%s: a second holder after %v on the wall clock (%v on the monotonic clock; on the database clock about %v: the new expiry %v, less the TTL, against the start %v)",
					what, got, time.Since(since), info.ExpiresAt.Add(-ttl).Sub(since.Round(0)), info.ExpiresAt, since.Round(0))
				return info
			}
			require.ErrorIs(t, err, dialect.ErrLeaseHeld)
			require.Less(t, time.Since(since), bound+liveness, "%s: the lease must be free within seconds", what)
			time.Sleep(50 * time.Millisecond)
		}
	}
	// A held lease is not acquired again (a TTL long enough for any load),
	// and the times it wrote read right.
	const long = 30 * time.Second
	acquired := time.Now()
	info, err := ls.Acquire(ctx, key, store.NewToken(), long)
	acquiredBy := time.Now()
	require.NoError(t, err)
	requireDuring(t, acquired.Add(long), acquiredBy.Add(long), info.ExpiresAt, "the expiry read back")
	stored := ttlIf(col == "t_exp", long)
	x.checkStored(t, tt, table, keyCol, key, col, acquired.Add(stored), acquiredBy.Add(stored))
	// (Every holder of a key in a table without an expiry column must use
	// the same TTL: the expiry is LockedAt + the TTL of whoever asks.)
	_, err = ls.Acquire(ctx, key, store.NewToken(), long)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld, "a held lease is not acquired again")
	ok, err := ls.Release(ctx, key, info.Owner, time.Time{})
	require.NoError(t, err)
	require.True(t, ok, "the holder releases its lease")
	info, err = ls.Acquire(ctx, key, store.NewToken(), ttl)
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	renewed := time.Now()
	info, err = ls.Renew(ctx, key, info.Owner, ttl)
	renewedBy := time.Now()
	require.NoError(t, err)
	requireDuring(t, renewed.Add(ttl), renewedBy.Add(ttl), info.ExpiresAt, "the renewed expiry")
	st, err := ls.Inspect(ctx, key, time.Minute)
	require.NoError(t, err)
	require.False(t, st.Expired, "a lease renewed just now is not expired")
	info = takeover(renewed, ttl, "renewed lease")

	if kind == "cl_tn" {
		return // no expiry column: no minimum hold, no reap
	}
	const hold = 1500 * time.Millisecond
	released := time.Now()
	if kind == "cl_tl" {
		ok, err := ls.Release(ctx, key, info.Owner, time.Time{})
		require.NoError(t, err)
		require.True(t, ok)
		return
	}
	ok, err = ls.Release(ctx, key, info.Owner, released.Add(hold))
	require.NoError(t, err)
	require.True(t, ok)
	takeover(released, hold, "lease released under a minimum hold")
	time.Sleep(ttl + 100*time.Millisecond)
	deadline := time.Now().Add(liveness)
	for {
		n, err := ls.ReapExpired(ctx, 10)
		require.NoError(t, err)
		if n == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "an expired lease must be reaped within seconds")
		time.Sleep(20 * time.Millisecond)
	}
}

// ttlIf returns ttl when cond, else zero: what a column holds relative to
// the acquisition (an expiry or a lock time).
func ttlIf(cond bool, ttl time.Duration) time.Duration {
	if cond {
		return ttl
	}
	return 0
}

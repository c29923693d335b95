package dialecttest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store"
)

// The cases below pin behaviour that the engines once implemented each on
// their own and let drift apart; every engine must now agree.

// testLeaseOwnerChecks: an empty or over-long owner is refused by every
// lease operation that takes one, before anything is written.
func testLeaseOwnerChecks(t *testing.T, h Harness) {
	_, ls := keyedLeases(t, h)
	ctx := ctxT(t)
	for _, owner := range []string{"", strings.Repeat("o", store.MaxTokenLen+1)} {
		_, err := ls.Acquire(ctx, "k", owner, time.Second)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "acquire, owner %q", owner)
		_, err = ls.Renew(ctx, "k", owner, time.Second)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "renew, owner %q", owner)
		_, err = ls.Release(ctx, "k", owner, time.Time{})
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "release, owner %q", owner)
	}
	st, err := ls.Inspect(ctx, "k", time.Minute)
	require.NoError(t, err)
	require.False(t, st.Exists, "nothing was written")
}

// testKeyOverflow: integer keys of any Go integer type are accepted, and a
// uint64 beyond int64 is refused, never wrapped to a negative key.
func testKeyOverflow(t *testing.T, h Harness) {
	f := newFixture(t, h)
	f.insert(1, 3)
	ctx := ctxT(t)
	s := f.d.Capabilities().PreferredStrategy
	tok, got := f.claim(s, 1, 3)
	require.Len(t, got, 3)
	huge := uint64(1) << 63
	_, err := f.cs.Ack(ctx, &store.AckParams{Token: tok, IDs: []any{huge}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = f.cs.Release(ctx, tok, []any{huge})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	first := got[0].ID.(int64)
	res, err := f.cs.Ack(ctx, &store.AckParams{Token: tok, IDs: []any{uint8(first), int16(first + 1), uint64(first + 2)}})
	require.NoError(t, err)
	require.Empty(t, res.Lost, "keys of other integer types match their rows")

	task := taskLeases(t, h)
	_, err = task.Acquire(ctx, huge, store.NewToken(), time.Second)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

// taskLeases is a lease cs on a task table with integer keys.
func taskLeases(t *testing.T, h Harness) store.LeaseStore {
	d, _ := h.Open(t)
	def := store.TableDef{Table: "cl_task", PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
		{Name: "id", Type: store.TypeInt, NotNull: true},
		{Name: "owner", Type: store.TypeText, Len: 40},
		{Name: "lock_at", Type: store.TypeTime},
	}}
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctxT(t), d, ddl))
	ls, err := store.OpenLeases(d, dialect.LeaseTable{Table: "cl_task", Key: "id", Owner: "owner", LockedAt: "lock_at"})
	require.NoError(t, err)
	return ls
}

// testErrorText: the store's error names neither the operation nor the
// engine package: the public package that runs the operation names its
// package and the operation once ("claim: ack: ...", never "claim: ack:
// postgres: ack: ...").
func testErrorText(t *testing.T, h Harness) {
	f := newFixture(t, h)
	ctx := ctxT(t)
	s := f.d.Capabilities().PreferredStrategy
	check := func(op string, err error) {
		t.Helper()
		require.Error(t, err, op)
		msg := err.Error()
		require.NotContains(t, msg, op+": ", "%q names no operation: its caller does", msg)
		for _, engine := range []string{"postgres:", "mysql:", "sqlite:"} {
			require.NotContains(t, msg, engine, "no engine package in %q", msg)
		}
	}
	_, err := f.cs.Claim(ctx, &store.ClaimParams{Limit: 1, ScopeValues: []any{1}, Strategy: s}, func(store.Scanner) error { return nil })
	check("claim", err)
	_, err = f.cs.Ack(ctx, &store.AckParams{IDs: []any{1}})
	check("ack", err)
	_, err = f.cs.Reap(ctx, &store.ReapParams{})
	check("reap", err)
	_, err = f.cs.Stats(ctx, []any{1, 2})
	check("stats", err)
	_, ls := keyedLeases(t, h)
	_, err = ls.Acquire(ctx, "k", "", time.Second)
	check("lease acquire", err)
	// An engine error names no operation either.
	gone, err := store.OpenClaims(f.d, dialect.ClaimTable{Table: "cl_no_such_table", ID: "id", Status: "status", Token: "token",
		ClaimedAt: "claimed_at", Pending: st(t, "P"), Processing: st(t, "R"), Done: st(t, "D"), Failed: st(t, "F")})
	require.NoError(t, err)
	_, err = gone.Stats(ctx, nil)
	check("stats", err)
}

// testAckRollsBack: when a statement fails inside a row-by-row ack, the whole
// ack rolls back: no row of it is acked, all stay held by the token, and
// the ack can be repeated once the cause is gone. The failure is real: a
// unique index that the requeue of one row would violate.
func testAckRollsBack(t *testing.T, h Harness) {
	d, db := h.Open(t)
	spec := dialect.ClaimTable{
		Table: "cl_target", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Version: "version", Columns: []string{"payload"}, Scope: []string{"task_id"},
		Pending: st(t, "PENDING"), Processing: st(t, "PROCESSING"), Done: st(t, "SENT"), Failed: st(t, "FAILED"),
	}
	def := store.ClaimTableDef(spec)
	def.Indexes = append(def.Indexes, store.IndexDef{Name: "cl_target_uq", Columns: []string{"status", "payload"}, Unique: true})
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	ctx := ctxT(t)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, cs.VerifySchema(ctx))
	f := &fixture{t: t, d: d, db: db, spec: spec, cs: cs}
	f.q = func(name string) string {
		q, err := store.QuoteIdent(d, "test", name)
		require.NoError(t, err)
		return q
	}
	exec := func(q string) {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	tbl, task, status, payload, version := f.q("cl_target"), f.q("task_id"), f.q("status"), f.q("payload"), f.q("version")
	exec(fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (1, 'a'), (1, 'x')", tbl, task, payload))
	exec(fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (2, 'SENT', 'x')", tbl, task, status, payload))
	tok, got := f.claim(d.Capabilities().PreferredStrategy, 1, 10)
	require.Len(t, got, 2)
	a, b := got[0], got[1]
	// b changes while it is processed, so a versioned ack sends it back to
	// pending; the other task's 'x' row is pending already, so that requeue
	// violates the unique index after a's row was set done.
	exec(fmt.Sprintf("UPDATE %s SET %s = %s + 1 WHERE %s = 'x' AND %s = 1", tbl, version, version, payload, task))
	exec(fmt.Sprintf("UPDATE %s SET %s = 'PENDING' WHERE %s = 2", tbl, status, task))
	p := &store.AckParams{Token: tok, IDs: []any{a.ID, b.ID}, Versions: []int64{a.Version, b.Version}}
	_, err = cs.Ack(ctx, p)
	require.Error(t, err, "the requeue violates the unique index")
	require.False(t, dialect.IsRetryable(err))
	require.Equal(t, errclass.Duplicate, errclass.Of(err))
	for _, id := range []any{a.ID, b.ID} {
		r := f.row(id)
		require.Equal(t, "PROCESSING", r.Status, "row %v: the ack rolled back", id)
		require.Equal(t, tok, r.Token, "row %v is still held", id)
	}
	exec(fmt.Sprintf("DELETE FROM %s WHERE %s = 2", tbl, task))
	res, err := cs.Ack(ctx, p)
	require.NoError(t, err)
	require.Equal(t, []int{1}, res.Requeued)
	require.Empty(t, res.Lost)
	require.Equal(t, "SENT", f.row(a.ID).Status)
	require.Equal(t, "PENDING", f.row(b.ID).Status)
}

// testScopeValueTypes: once the table is verified, a scope value that its
// column would convert lossily is refused before any statement runs:
// "1abc" claimed task 1 on MariaDB, and pgx turned 1.5 into 2.
func testScopeValueTypes(t *testing.T, h Harness) {
	f := newFixture(t, h)
	f.insert(1, 3)
	ctx := ctxT(t)
	s := f.d.Capabilities().PreferredStrategy
	noScan := func(store.Scanner) error { return nil }
	for _, bad := range []any{"1abc", "1", 1.5, 1.0, true} {
		_, err := f.cs.Claim(ctx, &store.ClaimParams{Token: "t", Limit: 1, ScopeValues: []any{bad}, Strategy: s}, noScan)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "claim with scope value %#v", bad)
		_, err = f.cs.Reap(ctx, &store.ReapParams{Timeout: time.Second, Limit: 1, ScopeValues: []any{bad}})
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "reap with scope value %#v", bad)
		_, err = f.cs.Stats(ctx, []any{bad})
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "stats with scope value %#v", bad)
	}
	for _, r := range f.rows() {
		require.Equal(t, "PENDING", r.Status, "nothing was claimed")
	}
	n, err := f.cs.Claim(ctx, &store.ClaimParams{Token: store.NewToken(), Limit: 1, ScopeValues: []any{int32(1)}, Strategy: s}, func(sc store.Scanner) error {
		var id any
		var v int64
		var p string
		return sc.Scan(&id, &v, new(any), &p)
	})
	require.NoError(t, err, "any Go integer type is fine")
	require.Equal(t, 1, n)
}

// testNullableCounters: a NULL in a nullable attempts or fence column
// counts as 0 on every engine. attempts + 1 on NULL stayed NULL, so such
// a row was never parked; a NULL fence failed Acquire with a scan error on
// MySQL and SQLite.
func testNullableCounters(t *testing.T, h Harness) {
	d, db := h.Open(t)
	ctx := ctxT(t)
	def := store.TableDef{Table: "cl_nullable", Columns: []store.ColumnDef{
		{Name: "id", Type: store.TypeSerial},
		{Name: "task_id", Type: store.TypeInt, NotNull: true},
		{Name: "status", Type: store.TypeText, Len: 32, NotNull: true, Default: ptr(st(t, "PENDING"))},
		{Name: "token", Type: store.TypeText, Len: 40},
		{Name: "claimed_at", Type: store.TypeTime},
		{Name: "attempts", Type: store.TypeInt},
		{Name: "lock_owner", Type: store.TypeText, Len: 40},
		{Name: "lock_at", Type: store.TypeTime},
		{Name: "fence", Type: store.TypeInt},
	}}
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	q := func(s string) string { x, err := store.QuoteIdent(d, "t", s); require.NoError(t, err); return x }
	_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (1), (1)", q("cl_nullable"), q("task_id")))
	require.NoError(t, err)
	spec := dialect.ClaimTable{Table: "cl_nullable", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Scope: []string{"task_id"},
		Pending: st(t, "PENDING"), Processing: st(t, "PROCESSING"), Done: st(t, "SENT"), Failed: st(t, "FAILED")}
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, cs.VerifySchema(ctx))
	claimAll := func() (string, []any) {
		tok := store.NewToken()
		var ids []any
		_, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 10, ScopeValues: []any{1}, Strategy: d.Capabilities().PreferredStrategy},
			func(sc store.Scanner) error {
				var id any
				err := sc.Scan(&id, new(any))
				ids = append(ids, norm(id))
				return err
			})
		require.NoError(t, err)
		return tok, ids
	}
	tok, ids := claimAll()
	require.Len(t, ids, 2)
	res, err := cs.Ack(ctx, &store.AckParams{Token: tok, IDs: ids[:1], Outcome: store.OutcomeRetry, MaxAttempts: 1})
	require.NoError(t, err)
	require.Equal(t, []int{0}, res.Parked, "the first claim counted as attempt 1")
	// The other row's count goes back to NULL behind the library's back: a
	// sweep with MaxAttempts 1 returns it rather than parking it (NULL is 0
	// attempts), and reaps rather than skips it.
	_, err = db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s = NULL", q("cl_nullable"), q("attempts")))
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	rr, err := cs.Reap(ctx, &store.ReapParams{Timeout: time.Millisecond, Limit: 10, MaxAttempts: 1})
	require.NoError(t, err)
	require.EqualValues(t, 0, rr.Parked, "a NULL count is 0 attempts, below 1")
	require.EqualValues(t, 1, rr.Returned)

	leases, err := store.OpenLeases(d, dialect.LeaseTable{Table: "cl_nullable", Key: "id", Owner: "lock_owner", LockedAt: "lock_at", Fence: "fence"})
	require.NoError(t, err)
	require.NoError(t, leases.VerifySchema(ctx))
	info, err := leases.Acquire(ctx, ids[0], store.NewToken(), time.Minute)
	require.NoError(t, err, "a NULL fence is 0")
	require.EqualValues(t, 1, info.Fence)
	st, err := leases.Inspect(ctx, ids[1], time.Minute)
	require.NoError(t, err)
	require.Zero(t, st.Fence)
}

// testClearClaimedAt: with ClearClaimedAt, every way back to pending
// (release, a retried fail, a reap) clears the claimed-at time, as the cron
// story's release does; a row that ends done keeps it. A NOT NULL column is
// refused at verification.
func testClearClaimedAt(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h, func(c *dialect.ClaimTable) { c.ClearClaimedAt = true })
	f.insert(1, 4)
	ctx := ctxT(t)
	cleared := func(id any) bool {
		var n int
		q := fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s = %v AND %s IS NULL", f.q(f.spec.Table), f.q(f.spec.ID), id, f.q(f.spec.ClaimedAt))
		require.NoError(t, f.db.QueryRowContext(ctx, q).Scan(&n))
		return n == 1
	}
	tok, got := f.claim(s, 1, 4)
	require.Len(t, got, 4)
	for _, c := range got {
		require.False(t, cleared(c.ID), "a claim sets the time")
	}
	_, err := f.cs.Release(ctx, tok, []any{got[0].ID})
	require.NoError(t, err)
	require.True(t, cleared(got[0].ID), "release")
	f.ack(tok, []any{got[1].ID}, store.OutcomeRetry, 0)
	require.True(t, cleared(got[1].ID), "retried fail")
	f.ack(tok, []any{got[2].ID}, store.OutcomeDone, 0)
	require.False(t, cleared(got[2].ID), "a done row keeps its time")
	time.Sleep(30 * time.Millisecond)
	res, err := f.cs.Reap(ctx, &store.ReapParams{Timeout: 10 * time.Millisecond, Limit: 10})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Returned)
	require.True(t, cleared(got[3].ID), "reap")

	spec := f.spec
	spec.ClaimedAt = "task_id" // a NOT NULL column
	strict, err := store.OpenClaims(f.d, spec)
	require.NoError(t, err)
	err = strict.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "ClearClaimedAt: column cl_target.task_id is NOT NULL")
}

// testRawDriverErrors: the one public predicate and classifier accept the
// raw driver errors of the application's own statements, not only errors
// that came through a store: a duplicate key from a plain INSERT is
// recognised as such on every engine, and is not retryable.
func testRawDriverErrors(t *testing.T, h Harness) {
	f := newFixture(t, h)
	f.insert(1, 1)
	ctx := ctxT(t)
	id := f.rows()[0].ID
	_, err := f.db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%v, 1, 'dup')",
		f.q(f.spec.Table), f.q(f.spec.ID), f.q("task_id"), f.q("payload"), sqlLiteral(id)))
	require.Error(t, err)
	require.Equal(t, errclass.Duplicate, errclass.Of(err), "raw %T: %v", err, err)
	require.Equal(t, errclass.Duplicate, errclass.Of(fmt.Errorf("my repository: %w", err)))
	require.False(t, dialect.IsRetryable(err))
}

// sqlLiteral renders a key read back from a fixture as a SQL literal.
func sqlLiteral(v any) string {
	if s, ok := v.(string); ok {
		return "'" + s + "'"
	}
	return fmt.Sprint(v)
}

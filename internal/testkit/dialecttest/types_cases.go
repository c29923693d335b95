package dialecttest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// narrow is a value no SMALLINT column holds (SQLite's integer columns hold
// any 64-bit value, whatever their declared type).
const narrow = 40000

// wideInts reports an engine whose integer columns hold any 64-bit value.
func wideInts(d dialect.Dialect) bool { return d.Capabilities().Engine == dialect.EngineSQLite }

// errorContainsFold checks that err's text holds want, ignoring case: the
// catalogs spell type names differently (SQLite keeps the declared case).
func errorContainsFold(t *testing.T, err error, want string) {
	t.Helper()
	require.Error(t, err)
	require.Contains(t, strings.ToLower(err.Error()), strings.ToLower(want))
}

// addColumns adds columns to table with plain ALTER TABLE statements, for
// the integer types the portable TableDef does not have.
func addColumns(t *testing.T, d dialect.Dialect, exec func(string), table string, cols ...string) {
	t.Helper()
	q, err := store.QuoteIdent(d, "table", table)
	require.NoError(t, err)
	for _, c := range cols {
		exec(fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s", q, c))
	}
}

// testNarrowColumns: a claim table as users have them, with narrower
// integer columns than the library's own DDL (status and the scope column
// SMALLINT, attempts INT). A sweep without MaxAttempts works (it bound
// math.MaxInt64 against attempts, which pgx cannot encode for an int4
// column: every sweep failed on PostgreSQL); every value a call passes or
// a status the table is described with is checked against the column's
// type once the table is verified, before any row changes: a MaxAttempts
// the attempts column cannot reach, a scope value the scope column cannot
// hold, a status out of range, a string status on an integer column and an
// integer status on a text one are errors wrapping ErrInvalidConfig that
// name the field and the column's type.
func testNarrowColumns(t *testing.T, h Harness) {
	d, db := h.Open(t)
	ctx := ctxT(t)
	exec := func(q string) {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	def := store.TableDef{Table: "cl_narrow", Columns: []store.ColumnDef{
		{Name: "id", Type: store.TypeSerial},
		{Name: "openid", Type: store.TypeText, Len: 64},
		{Name: "token", Type: store.TypeText, Len: 40},
		{Name: "claimed_at", Type: store.TypeTime},
	}}
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	addColumns(t, d, exec, "cl_narrow", "task_id SMALLINT NOT NULL DEFAULT 0", "status SMALLINT NOT NULL DEFAULT 0", "attempts INT NOT NULL DEFAULT 0")
	q := func(s string) string { x, err := store.QuoteIdent(d, "t", s); require.NoError(t, err); return x }
	exec(fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (1, 'a'), (1, 'b'), (1, 'c')", q("cl_narrow"), q("task_id"), q("openid")))
	spec := dialect.ClaimTable{Table: "cl_narrow", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Columns: []string{"openid"}, Scope: []string{"task_id"},
		Pending: st(t, 0), Processing: st(t, 1), Done: st(t, 2), Failed: st(t, 3)}
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, cs.VerifySchema(ctx))
	s := d.Capabilities().PreferredStrategy
	claim := func(scope any) (string, []any, error) {
		tok := store.NewToken()
		var ids []any
		_, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 10, ScopeValues: []any{scope}, Strategy: s},
			func(sc store.Scanner) error {
				var id any
				var attempts int64
				var openid string
				err := sc.Scan(&id, &attempts, &openid)
				ids = append(ids, norm(id))
				return err
			})
		return tok, ids, err
	}

	_, ids, err := claim(1)
	require.NoError(t, err)
	require.Len(t, ids, 3)
	time.Sleep(30 * time.Millisecond)
	res, err := cs.Reap(ctx, &store.ReapParams{Timeout: 10 * time.Millisecond, Limit: 10})
	require.NoError(t, err, "a sweep without MaxAttempts binds nothing the INT attempts column cannot hold")
	require.EqualValues(t, 3, res.Returned)

	tok, ids, err := claim(1)
	require.NoError(t, err)
	require.Len(t, ids, 3)
	const unreachable = 3_000_000_000 // more than an INT holds
	_, err = cs.Reap(ctx, &store.ReapParams{Timeout: time.Hour, Limit: 10, MaxAttempts: unreachable})
	_, ackErr := cs.Ack(ctx, &store.AckParams{Token: tok, IDs: ids, Outcome: store.OutcomeRetry, MaxAttempts: unreachable})
	if wideInts(d) {
		require.NoError(t, err)
		require.NoError(t, ackErr)
	} else {
		for _, err := range []error{err, ackErr} {
			require.ErrorIs(t, err, dialect.ErrInvalidConfig)
			errorContainsFold(t, err, "MaxAttempts: 3000000000 is outside the range of column cl_narrow.attempts (int")
		}
		res, err := cs.Ack(ctx, &store.AckParams{Token: tok, IDs: ids, Outcome: store.OutcomeRetry, MaxAttempts: 5})
		require.NoError(t, err, "the rows are still held: nothing ran")
		require.Empty(t, res.Lost)
	}

	_, got, err := claim(narrow)
	if wideInts(d) {
		require.NoError(t, err)
		require.Empty(t, got)
	} else {
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		errorContainsFold(t, err, fmt.Sprintf("scope value 0 (task_id): %d is outside the range of column cl_narrow.task_id (smallint", narrow))
		_, err = cs.Stats(ctx, []any{narrow})
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	}

	verify := func(mut func(*dialect.ClaimTable)) error {
		bad := spec
		mut(&bad)
		s, err := store.OpenClaims(d, bad)
		require.NoError(t, err)
		return s.VerifySchema(ctx)
	}
	err = verify(func(c *dialect.ClaimTable) { c.Done = st(t, narrow) })
	if wideInts(d) {
		require.NoError(t, err)
	} else {
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		errorContainsFold(t, err, fmt.Sprintf("Done: %d is outside the range of column cl_narrow.status (smallint", narrow))
	}
	err = verify(func(c *dialect.ClaimTable) {
		c.Pending, c.Processing, c.Done, c.Failed = st(t, "PENDING"), st(t, "PROCESSING"), st(t, "SENT"), st(t, "FAILED")
	})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	errorContainsFold(t, err, `Pending: status PENDING (string) for column cl_narrow.status (smallint`)
	require.ErrorContains(t, err, "which holds integers")
	err = verify(func(c *dialect.ClaimTable) { c.Attempts = "openid" })
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "Attempts: column cl_narrow.openid")

	// Integer statuses on a text status column.
	f := newFixture(t, h)
	text := f.spec
	text.Pending, text.Processing, text.Done, text.Failed = st(t, 0), st(t, 1), st(t, 2), st(t, 3)
	ts, err := store.OpenClaims(f.d, text)
	require.NoError(t, err)
	err = ts.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	errorContainsFold(t, err, "Pending: status 0 (int64) for column cl_target.status")
	require.ErrorContains(t, err, "which holds text")
}

// testNarrowLeaseColumns: a task table whose lease key and status columns
// are SMALLINT. Once verified, a key or a Finish status the column cannot
// hold, or of the wrong kind, is refused before any statement runs; a
// fence column holding text, and text keys on an integer column, are
// refused by verification.
func testNarrowLeaseColumns(t *testing.T, h Harness) {
	d, db := h.Open(t)
	ctx := ctxT(t)
	exec := func(q string) {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	def := store.TableDef{Table: "cl_narrow_task", PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
		{Name: "id", Type: store.TypeInt, NotNull: true},
		{Name: "lock_owner", Type: store.TypeText, Len: 40},
		{Name: "lock_at", Type: store.TypeTime},
	}}
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	addColumns(t, d, exec, "cl_narrow_task", "code SMALLINT NOT NULL DEFAULT 0", "status SMALLINT NOT NULL DEFAULT 0", "fence_text VARCHAR(20)")
	q := func(s string) string { x, err := store.QuoteIdent(d, "t", s); require.NoError(t, err); return x }
	exec(fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (1, 1), (2, 2)", q("cl_narrow_task"), q("id"), q("code")))
	lt := dialect.LeaseTable{Table: "cl_narrow_task", Key: "code", Owner: "lock_owner", LockedAt: "lock_at", Status: "status"}
	ls, err := store.OpenLeases(d, lt)
	require.NoError(t, err)
	require.NoError(t, ls.VerifySchema(ctx))

	_, err = ls.Acquire(ctx, narrow, store.NewToken(), time.Minute)
	if wideInts(d) {
		require.ErrorIs(t, err, dialect.ErrKeyNotFound)
	} else {
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		errorContainsFold(t, err, fmt.Sprintf("key: %d is outside the range of column cl_narrow_task.code (smallint", narrow))
	}
	owner := store.NewToken()
	_, err = ls.Acquire(ctx, 1, owner, time.Minute)
	require.NoError(t, err)
	_, err = ls.Finish(ctx, 1, owner, "DONE", time.Time{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	errorContainsFold(t, err, "Status: status DONE (string) for column cl_narrow_task.status (smallint")
	_, err = ls.Finish(ctx, 1, owner, narrow, time.Time{})
	if !wideInts(d) {
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		require.ErrorContains(t, err, "Status: 40000 is outside the range")
		done, err := ls.Finish(ctx, 1, owner, 2, time.Time{})
		require.NoError(t, err)
		require.True(t, done, "the refused calls changed nothing")
	}

	bad := lt
	bad.Fence = "fence_text"
	ls, err = store.OpenLeases(d, bad)
	require.NoError(t, err)
	err = ls.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "Fence: column cl_narrow_task.fence_text")
	bad = lt
	bad.KeyKind = dialect.IDText
	ls, err = store.OpenLeases(d, bad)
	require.NoError(t, err)
	err = ls.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	errorContainsFold(t, err, "KeyKind: text keys for column cl_narrow_task.code (smallint")
}

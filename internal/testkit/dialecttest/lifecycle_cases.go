package dialecttest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// The lifecycle cases: run-at (retry delays and snoozes on the database
// clock), the error column, and the operator actions.

// withLifecycle adds the run-at and error columns to a fixture's table.
func withLifecycle(s *dialect.ClaimTable) { s.RunAt, s.Error = "run_at", "last_error" }

// lifecycleRow is what the lifecycle cases read of a row.
type lifecycleRow struct {
	status, err string
	attempts    int64
	runAtNull   bool
}

func (f *fixture) lifecycle(id any) lifecycleRow {
	f.t.Helper()
	var r lifecycleRow
	var status any
	var isNull int64
	q := fmt.Sprintf("SELECT %s, COALESCE(%s, ''), %s, CASE WHEN %s IS NULL THEN 1 ELSE 0 END FROM %s WHERE %s = %s",
		f.q(f.spec.Status), f.q(f.spec.Error), f.q(f.spec.Attempts), f.q(f.spec.RunAt), f.q(f.spec.Table), f.q(f.spec.ID), literal(id))
	require.NoError(f.t, f.db.QueryRowContext(ctxT(f.t), q).Scan(&status, &r.err, &r.attempts, &isNull))
	r.status, r.runAtNull = fmt.Sprint(norm(status)), isNull == 1
	return r
}

func literal(id any) string {
	if s, ok := id.(string); ok {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return fmt.Sprint(id)
}

// near reports whether d is within tol of want.
func near(d, want, tol time.Duration) bool { return d >= want-tol && d <= want+tol }

// A retried row waits for its delay on the database clock: claims skip it
// until then, the scheduled listing shows the delay, retry now brings it
// back at once, and the failure's text is stored and cleared by success.
func testRunAtRetry(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h, withLifecycle)
	ctx := ctxT(t)
	f.insert(1, 3)
	tok, got := f.claim(s, 1, 10)
	require.Len(t, got, 3)
	require.EqualValues(t, 1, got[0].Attempts, "a claim returns the attempts after its increment")
	a, b, c := got[0].ID, got[1].ID, got[2].ID

	res, err := f.cs.Ack(ctx, &store.AckParams{Token: tok, IDs: []any{a}, Outcome: store.OutcomeRetry, MaxAttempts: 5,
		Error: "upstream 503: übel", Delay: time.Hour})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	_, err = f.cs.Ack(ctx, &store.AckParams{Token: tok, IDs: []any{b}, Outcome: store.OutcomeRetry, MaxAttempts: 5, Error: "flaky"})
	require.NoError(t, err)
	f.ack(tok, []any{c}, store.OutcomeDone, 0)

	ra := f.lifecycle(a)
	require.Equal(t, "PENDING", ra.status)
	require.Equal(t, "upstream 503: übel", ra.err)
	require.False(t, ra.runAtNull)
	sched, err := f.cs.List(ctx, &store.ListParams{Set: store.SetScheduled, Limit: 10})
	require.NoError(t, err)
	require.Len(t, sched, 1, "only the delayed row waits")
	require.Equal(t, norm(a), sched[0].ID)
	require.True(t, near(sched[0].RunIn, time.Hour, time.Minute), "run-at is an hour ahead on the database clock, got %v", sched[0].RunIn)
	require.Equal(t, "upstream 503: übel", sched[0].Error)
	require.EqualValues(t, 1, sched[0].Attempts)

	tok2, again := f.claim(s, 1, 10)
	require.Len(t, again, 1, "the row with a zero delay is claimable, the delayed one is not")
	require.Equal(t, norm(b), again[0].ID)
	require.EqualValues(t, 2, again[0].Attempts)
	f.ack(tok2, []any{b}, store.OutcomeDone, 0)
	require.Equal(t, "", f.lifecycle(b).err, "success clears the stored error")

	n, err := f.cs.RetryNow(ctx, store.RowFilter{ScopeValues: []any{1}, IDs: []any{a}})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.True(t, f.lifecycle(a).runAtNull)
	tok3, last := f.claim(s, 1, 10)
	require.Len(t, last, 1)
	require.Equal(t, norm(a), last[0].ID)
	// A parking retry stores the error of the attempt that parked it.
	res, err = f.cs.Ack(ctx, &store.AckParams{Token: tok3, IDs: []any{a}, Outcome: store.OutcomeRetry, MaxAttempts: 2,
		Error: "gave up", Delay: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []int{0}, res.Parked)
	require.Equal(t, lifecycleRow{status: "FAILED", err: "gave up", attempts: 2, runAtNull: true}, f.lifecycle(a), "a parked row waits for no run-at")
}

// A snooze returns a row to pending for later without counting an attempt
// or storing an error; a snooze of a row the token lost changes nothing.
func testSnooze(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h, withLifecycle)
	ctx := ctxT(t)
	f.insert(1, 2)
	tok, got := f.claim(s, 1, 10)
	require.Len(t, got, 2)
	n, err := f.cs.Snooze(ctx, tok, []any{got[0].ID}, 30*time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	r := f.lifecycle(got[0].ID)
	require.Equal(t, lifecycleRow{status: "PENDING", attempts: 0, runAtNull: false}, r, "a snooze undoes the attempt")
	n, err = f.cs.Snooze(ctx, "someone-else", []any{got[1].ID}, time.Minute)
	require.NoError(t, err)
	require.Zero(t, n, "another token's snooze touches nothing")
	require.Equal(t, "PROCESSING", f.lifecycle(got[1].ID).status)
	_, none := f.claim(s, 1, 10)
	require.Empty(t, none, "the snoozed row waits")
	sched, err := f.cs.List(ctx, &store.ListParams{Set: store.SetScheduled, ScopeValues: []any{1}, Limit: 10})
	require.NoError(t, err)
	require.Len(t, sched, 1)
	require.True(t, near(sched[0].RunIn, 30*time.Minute, time.Minute), "got %v", sched[0].RunIn)
}

// Unpark returns parked rows (by key or the whole scope, optionally with
// fresh attempts), clearing the error and run-at; List shows the parked
// and the stuck rows with what an operator needs.
func testUnparkAndList(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h, withLifecycle)
	ctx := ctxT(t)
	f.insert(1, 4)
	f.insert(2, 1)
	tok, got := f.claim(s, 1, 10)
	require.Len(t, got, 4)
	_, err := f.cs.Ack(ctx, &store.AckParams{Token: tok, IDs: ids(got[:3]), Outcome: store.OutcomeFailed, Error: "bad address"})
	require.NoError(t, err)
	tok2, other := f.claim(s, 2, 10)
	require.Len(t, other, 1)
	_, err = f.cs.Ack(ctx, &store.AckParams{Token: tok2, IDs: ids(other), Outcome: store.OutcomeFailed, Error: "other task"})
	require.NoError(t, err)

	parked, err := f.cs.List(ctx, &store.ListParams{Set: store.SetFailed, ScopeValues: []any{1}, Limit: 10})
	require.NoError(t, err)
	require.Len(t, parked, 3)
	for _, p := range parked {
		require.Equal(t, "bad address", p.Error)
		require.EqualValues(t, 1, p.Attempts)
		require.GreaterOrEqual(t, p.ClaimedAge, time.Duration(0))
		require.Empty(t, p.Token)
	}
	all, err := f.cs.List(ctx, &store.ListParams{Set: store.SetFailed, Limit: 10})
	require.NoError(t, err)
	require.Len(t, all, 4, "unscoped: every task's parked rows")
	stuck, err := f.cs.List(ctx, &store.ListParams{Set: store.SetProcessing, ScopeValues: []any{1}, Limit: 10})
	require.NoError(t, err)
	require.Len(t, stuck, 1, "the row still processing")
	require.Equal(t, tok, stuck[0].Token)
	stuck, err = f.cs.List(ctx, &store.ListParams{Set: store.SetProcessing, OlderThan: time.Hour, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, stuck, "nothing has been processing for an hour")

	n, err := f.cs.Unpark(ctx, &store.UnparkParams{RowFilter: store.RowFilter{ScopeValues: []any{1}, IDs: []any{got[0].ID}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, lifecycleRow{status: "PENDING", attempts: 1, runAtNull: true}, f.lifecycle(got[0].ID))
	n, err = f.cs.Unpark(ctx, &store.UnparkParams{RowFilter: store.RowFilter{ScopeValues: []any{1}}, ResetAttempts: true})
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "the scope's other parked rows")
	require.Equal(t, lifecycleRow{status: "PENDING", attempts: 0, runAtNull: true}, f.lifecycle(got[1].ID))
	require.Equal(t, "FAILED", f.lifecycle(other[0].ID).status, "another scope's parked row stays")
	n, err = f.cs.Unpark(ctx, &store.UnparkParams{RowFilter: store.RowFilter{ScopeValues: []any{1}}})
	require.NoError(t, err)
	require.Zero(t, n)
	_, back := f.claim(s, 1, 10)
	require.Len(t, back, 3, "unparked rows are claimable")
}

// The error column keeps whole characters within its width, and any text
// (invalid UTF-8, NUL bytes) is stored rather than failing the ack.
func testErrorWidth(t *testing.T, h Harness) {
	d, db := h.Open(t)
	ctx := ctxT(t)
	spec := dialect.ClaimTable{
		Table: "cl_errw", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at", Attempts: "attempts",
		RunAt: "run_at", Error: "last_error", Scope: []string{"task_id"},
		Pending: st(t, "PENDING"), Processing: st(t, "PROCESSING"), Done: st(t, "SENT"), Failed: st(t, "FAILED"),
	}
	def := store.ClaimTableDef(spec)
	for i := range def.Columns {
		if def.Columns[i].Name == "last_error" {
			def.Columns[i].Len = 12
		}
	}
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, cs.VerifySchema(ctx))
	q := func(n string) string { s, _ := store.QuoteIdent(d, "test", n); return s }
	_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (1), (1)", q("cl_errw"), q("task_id")))
	require.NoError(t, err)
	tok := store.NewToken()
	var keys []any
	_, err = cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 2, ScopeValues: []any{1}, Strategy: d.Capabilities().PreferredStrategy},
		func(sc store.Scanner) error {
			var id any
			err := sc.Scan(&id, new(any))
			keys = append(keys, norm(id))
			return err
		})
	require.NoError(t, err)
	require.Len(t, keys, 2)
	long := strings.Repeat("é€", 20) // 40 characters, 100 bytes
	_, err = cs.Ack(ctx, &store.AckParams{Token: tok, IDs: keys[:1], Outcome: store.OutcomeFailed, Error: long})
	require.NoError(t, err, "a long error text is cut, never refused")
	_, err = cs.Ack(ctx, &store.AckParams{Token: tok, IDs: keys[1:], Outcome: store.OutcomeFailed, Error: "bad\x00byte\xff"})
	require.NoError(t, err, "NUL bytes and invalid UTF-8 are replaced")
	read := func(id any) string {
		var s string
		require.NoError(t, db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = %v", q("last_error"), q("cl_errw"), q("id"), id)).Scan(&s))
		return s
	}
	got := read(keys[0])
	require.True(t, utf8.ValidString(got))
	if utf8.RuneCountInString(got) < utf8.RuneCountInString(long) {
		require.Equal(t, 12, utf8.RuneCountInString(got), "cut to the column's width: %q", got)
		require.True(t, strings.HasSuffix(got, "..."), got)
		require.True(t, strings.HasPrefix(long, strings.TrimSuffix(got, "...")), "whole characters: %q", got)
	} else {
		require.Equal(t, long, got, "an engine that does not bound the column keeps the text")
	}
	require.Equal(t, "bad\uFFFDbyte\uFFFD", read(keys[1]))
}

// Bad lifecycle input is refused before any statement runs, and a table
// whose run-at or error column is NOT NULL is refused by verification.
func testLifecycleBadInput(t *testing.T, h Harness) {
	f := newFixture(t, h)
	ctx := ctxT(t)
	_, err := f.cs.Snooze(ctx, "tok", []any{1}, time.Minute)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "snooze without RunAt")
	_, err = f.cs.RetryNow(ctx, store.RowFilter{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "retry now without RunAt")
	_, err = f.cs.Ack(ctx, &store.AckParams{Token: "tok", IDs: []any{1}, Outcome: store.OutcomeRetry, Delay: time.Minute})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "a delay without RunAt")
	_, err = f.cs.List(ctx, &store.ListParams{Set: store.SetScheduled, Limit: 1})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "scheduled rows without RunAt")
	for _, lim := range []int{0, -1, store.MaxListLimit + 1} {
		_, err = f.cs.List(ctx, &store.ListParams{Set: store.SetFailed, Limit: lim})
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "limit %d", lim)
	}
	_, err = f.cs.Unpark(ctx, &store.UnparkParams{RowFilter: store.RowFilter{ScopeValues: []any{1, 2}}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "two scope values for one scope column")

	g := newFixture(t, h, withLifecycle)
	_, err = g.cs.Ack(ctx, &store.AckParams{Token: "tok", IDs: []any{1}, Outcome: store.OutcomeRetry, Delay: -time.Second})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "a negative delay")
	_, err = g.cs.Snooze(ctx, "tok", []any{1}, -time.Second)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "a negative snooze")

	d, _ := h.Open(t)
	spec := g.spec
	spec.Table = "cl_notnull"
	def := store.ClaimTableDef(spec)
	for i := range def.Columns {
		if def.Columns[i].Name == "run_at" {
			def.Columns[i].NotNull = true
		}
	}
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	err = cs.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.Contains(t, err.Error(), "RunAt")
}

// AckTx commits and rolls back with the caller's own writes: a rolled-back
// transaction leaves the rows held and the caller's row absent, a committed
// one both; rows another worker took are reported lost before the caller
// commits, and untouched. Fail and release work the same way.
func testAckTx(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h, withLifecycle)
	ctx := ctxT(t)
	_, err := f.db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (%s VARCHAR(64) NOT NULL)", f.q("cl_effect"), f.q("src")))
	require.NoError(t, err)
	effect := func(tx interface {
		ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	}, id any) {
		_, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES ('%v')", f.q("cl_effect"), f.q("src"), id))
		require.NoError(t, err)
	}
	effects := func() int {
		var n int
		require.NoError(t, f.db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s", f.q("cl_effect"))).Scan(&n))
		return n
	}
	f.insert(1, 4)
	tok, got := f.claim(s, 1, 10)
	require.Len(t, got, 4)

	// Rolled back: nothing happened.
	tx, err := f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	effect(tx, got[0].ID)
	res, err := f.cs.AckTx(ctx, dialect.SQLTx(tx), &store.AckParams{Token: tok, IDs: ids(got[:1]), Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.NoError(t, tx.Rollback())
	require.Equal(t, 0, effects())
	require.Equal(t, "PROCESSING", f.row(got[0].ID).Status, "the rolled-back ack left the row held")

	// Committed: both.
	tx, err = f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	effect(tx, got[0].ID)
	res, err = f.cs.AckTx(ctx, dialect.SQLTx(tx), &store.AckParams{Token: tok, IDs: ids(got[:1]), Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.NoError(t, tx.Commit())
	require.Equal(t, 1, effects())
	require.Equal(t, "SENT", f.row(got[0].ID).Status)

	// Lost before commit: the row was released and claimed by another token.
	n, err := f.cs.Release(ctx, tok, []any{got[1].ID})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	other, again := f.claim(s, 1, 1)
	require.Len(t, again, 1)
	require.Equal(t, got[1].ID, again[0].ID)
	tx, err = f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	res, err = f.cs.AckTx(ctx, dialect.SQLTx(tx), &store.AckParams{Token: tok, IDs: ids(got[1:3]), Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Equal(t, []int{0}, res.Lost, "the caller learns of the loss before it commits")
	require.NoError(t, tx.Rollback())
	require.Equal(t, other, f.row(got[1].ID).Token, "the new owner's row is untouched")

	// Fail in a transaction.
	tx, err = f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	res, err = f.cs.AckTx(ctx, dialect.SQLTx(tx), &store.AckParams{Token: tok, IDs: ids(got[2:3]), Outcome: store.OutcomeRetry, MaxAttempts: 5,
		Error: "tx fail", Delay: time.Hour})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.NoError(t, tx.Commit())
	require.Equal(t, lifecycleRow{status: "PENDING", err: "tx fail", attempts: 1}, f.lifecycle(got[2].ID))

	_, err = f.cs.AckTx(ctx, dialect.Tx{}, &store.AckParams{Token: tok, IDs: ids(got[:1])})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "the zero Tx")
	_, err = f.cs.AckTx(ctx, dialect.SQLTx(nil), &store.AckParams{Token: tok, IDs: ids(got[:1])})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "a nil *sql.Tx")
}

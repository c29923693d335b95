package store

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store/render"
)

// fakeErr is an engine error of a given class.
type fakeErr struct{ class errclass.Class }

func (e fakeErr) Error() string { return "fake engine error" }

// fakeDB records every call and fails the calls its fail function picks.
type fakeDB struct {
	calls []string
	fail  func(call string, n int) error // n counts calls of that kind, from 1
	count map[string]int
}

func (f *fakeDB) do(call string) error {
	if f.count == nil {
		f.count = map[string]int{}
	}
	f.count[call]++
	f.calls = append(f.calls, call)
	if f.fail != nil {
		return f.fail(call, f.count[call])
	}
	return nil
}

func (f *fakeDB) Exec(context.Context, string, ...any) (int64, error) { return 0, f.do("exec") }
func (f *fakeDB) Query(context.Context, string, ...any) (Rows, error) {
	if err := f.do("query"); err != nil {
		return nil, err
	}
	return noRows{}, nil
}
func (f *fakeDB) Begin(context.Context) (Tx, error) {
	if err := f.do("begin"); err != nil {
		return nil, err
	}
	return fakeTx{f}, nil
}

type fakeTx struct{ f *fakeDB }

func (t fakeTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return 0, t.f.do("tx exec")
}
func (t fakeTx) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	if err := t.f.do("tx query"); err != nil {
		return nil, err
	}
	return noRows{}, nil
}
func (t fakeTx) Commit(context.Context) error   { return t.f.do("commit") }
func (t fakeTx) Rollback(context.Context) error { return t.f.do("rollback") }

type noRows struct{}

func (noRows) Next() bool        { return false }
func (noRows) Scan(...any) error { return nil }
func (noRows) Err() error        { return nil }
func (noRows) Close()            {}

// fakeDriver is an engine on db whose statements are trivial templates.
type fakeDriver struct {
	db        DB
	returning bool
	claims    ClaimSQL
	leases    LeaseSQL
	textTimes bool
	wideInts  bool
	quote     func(string) string
}

func (d *fakeDriver) Name() string        { return "fake" }
func (d *fakeDriver) DB() DB              { return d.db }
func (d *fakeDriver) Style() render.Style { return render.Style{} }
func (d *fakeDriver) Quote(p string) string {
	if d.quote != nil {
		return d.quote(p)
	}
	return `"` + p + `"`
}
func (d *fakeDriver) Capabilities() dialect.Capabilities {
	return dialect.Capabilities{PreferredStrategy: dialect.StrategyTokenUpdate, Returning: d.returning}
}
func (d *fakeDriver) Classify(err error) errclass.Class {
	var fe fakeErr
	if errors.As(err, &fe) {
		return fe.class
	}
	return errclass.Other
}
func (d *fakeDriver) ClaimSQL() ClaimSQL       { return d.claims }
func (d *fakeDriver) LeaseSQL() LeaseSQL       { return d.leases }
func (d *fakeDriver) ScheduleSQL() ScheduleSQL { return ScheduleSQL{} }
func (d *fakeDriver) DDL() DDL                 { return DDL{} }
func (d *fakeDriver) CheckTime(ColumnInfo, dialect.TimeFormat, bool) (string, error) {
	return "", nil
}
func (d *fakeDriver) FoldsCase() bool         { return false }
func (d *fakeDriver) IsolatesWrites() bool    { return false }
func (d *fakeDriver) IntTimes() bool          { return false }
func (d *fakeDriver) SupportsTextTimes() bool { return d.textTimes }
func (d *fakeDriver) WideInts() bool          { return d.wideInts }
func (d *fakeDriver) HintsKeys() bool         { return false }

// fakeBackend is a backend on f with the fake statements, adjusted by
// edits.
func fakeBackend(f DB, returning bool, edits ...func(*fakeDriver)) *Backend {
	d := &fakeDriver{db: f, returning: returning, claims: fakeClaimSQL, leases: fakeLeaseSQL}
	for _, e := range edits {
		e(d)
	}
	return NewBackend(d, dialect.Options{Retry: dialect.RetryPolicy{BaseDelay: time.Microsecond, MaxDelay: time.Microsecond}},
		slog.New(slog.DiscardHandler))
}

var fakeClaimSQL = ClaimSQL{
	Claim: `UPDATE {{.Table}} SET {{.Token}} = {{arg "token"}} LIMIT {{arg "limit"}}`, ReadBack: `SELECT 1`,
	Ack: `UPDATE {{.Table}} SET {{.Status}} = {{.Target}} WHERE {{.ID}} {{keys}}`, AckLock: `SELECT {{.ID}} WHERE {{.ID}} {{keys}}`,
	Heartbeat: `UPDATE h`, HeartbeatHeld: `SELECT {{.ID}}`, Release: `UPDATE r{{if .ByKeys}} WHERE {{.ID}} {{keys}}{{end}}`,
	Reap: `UPDATE reap`, Stats: `SELECT stats`, Columns: `SELECT cols`, IndexExists: `SELECT idx`,
	Indexes: IndexSQL{Claim: `CREATE INDEX a`, Token: `CREATE INDEX b`, Reap: `CREATE INDEX c`, Scope: `CREATE INDEX d`},
}

var fakeLeaseSQL = LeaseSQL{
	Acquire: `UPDATE acquire`, Insert: `INSERT`, ReadBack: `SELECT rb`, Renew: `UPDATE renew`, Release: `UPDATE release`,
	Force: `UPDATE force`, Inspect: `SELECT inspect`, Reap: `UPDATE reap`, Columns: `SELECT cols`,
	ReleaseHold: `UPDATE release hold`,
}

func fakeSpec(t *testing.T) dialect.ClaimTable {
	s := func(v string) dialect.Status { st, err := StatusOf("s", v); require.NoError(t, err); return st }
	return dialect.ClaimTable{Table: "t", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Version: "version", Pending: s("P"), Processing: s("R"), Done: s("D"), Failed: s("F")}
}

// ops are the store's operations, each marked as a read (idempotent) or a
// write.
func ops(t *testing.T, b *Backend) map[string]struct {
	read bool
	run  func(ctx context.Context) error
} {
	cs, err := newClaims(b, fakeSpec(t))
	require.NoError(t, err)
	ls, err := newLeases(b, KeyedLeaseTable("l", 10))
	require.NoError(t, err)
	scan := func(Scanner) error { return nil }
	type op = struct {
		read bool
		run  func(ctx context.Context) error
	}
	return map[string]op{
		"claim": {false, func(ctx context.Context) error {
			_, err := cs.Claim(ctx, &ClaimParams{Token: "t", Limit: 1, Strategy: dialect.StrategyTokenUpdate}, scan)
			return err
		}},
		"ack": {false, func(ctx context.Context) error {
			_, err := cs.Ack(ctx, &AckParams{Token: "t", IDs: []any{1}})
			return err
		}},
		"heartbeat": {true, func(ctx context.Context) error { _, err := cs.Heartbeat(ctx, "t"); return err }},
		"release":   {false, func(ctx context.Context) error { _, err := cs.Release(ctx, "t", nil); return err }},
		"reap": {false, func(ctx context.Context) error {
			_, err := cs.Reap(ctx, &ReapParams{Timeout: 1, Limit: 1})
			return err
		}},
		"stats":         {true, func(ctx context.Context) error { _, err := cs.Stats(ctx, nil); return err }},
		"verify":        {true, func(ctx context.Context) error { err := cs.VerifySchema(ctx); return ignoreInvalid(err) }},
		"missing index": {true, func(ctx context.Context) error { _, err := cs.MissingIndexes(ctx); return err }},
		"read back": {true, func(ctx context.Context) error {
			_, err := cs.Steps().ReadBack(ctx, nil, "t", scan, nil)
			return err
		}},
		"lease inspect": {true, func(ctx context.Context) error { _, err := ls.Inspect(ctx, "k", time.Minute); return err }},
		"lease release": {false, func(ctx context.Context) error { _, err := ls.Release(ctx, "k", "o", time.Time{}); return err }},
		"lease release hold": {false, func(ctx context.Context) error {
			_, err := ls.Release(ctx, "k", "o", time.Now().Add(time.Minute))
			return err
		}},
		"lease force":   {false, func(ctx context.Context) error { _, err := ls.ForceRelease(ctx, "k"); return err }},
		"lease reap":    {false, func(ctx context.Context) error { _, err := ls.ReapExpired(ctx, 1); return err }},
		"lease verify":  {true, func(ctx context.Context) error { return ignoreInvalid(ls.VerifySchema(ctx)) }},
		"lease renew":   {true, func(ctx context.Context) error { return ignoreLost(ls.Renew(ctx, "k", "o", time.Second)) }},
		"lease acquire": {false, func(ctx context.Context) error { return ignoreHeld(ls.Acquire(ctx, "k", "o", time.Second)) }},
		"ack row by row": {false, func(ctx context.Context) error {
			_, err := cs.Ack(ctx, &AckParams{Token: "t", IDs: []any{1}, Versions: []int64{1}})
			return err
		}},
	}
}

// The fake database has no tables and no rows: these outcomes are the
// operations' correct answers to that, not failures of the path tested.
func ignoreInvalid(err error) error {
	if errors.Is(err, dialect.ErrInvalidConfig) {
		return nil
	}
	return err
}
func ignoreLost(_ LeaseInfo, err error) error {
	if errors.Is(err, dialect.ErrLeaseLost) {
		return nil
	}
	return err
}
func ignoreHeld(_ LeaseInfo, err error) error {
	if errors.Is(err, dialect.ErrLeaseHeld) {
		return nil
	}
	return err
}

// Every operation, reads included, goes through the retrier: a deadlock on
// its first statement is retried, on every engine alike.
func TestEveryOperationRetriesConflicts(t *testing.T) {
	t.Parallel()
	for _, returning := range []bool{true, false} {
		f := &fakeDB{}
		b := fakeBackend(f, returning)
		for name, op := range ops(t, b) {
			f.count = nil
			failed := false
			f.fail = func(call string, n int) error {
				if !failed && call != "rollback" {
					failed = true
					return fakeErr{errclass.Deadlock}
				}
				return nil
			}
			before := b.retry.Retries()
			require.NoError(t, op.run(context.Background()), "%s (returning %v)", name, returning)
			require.True(t, failed, name)
			require.Equal(t, before+1, b.retry.Retries(), "%s (returning %v) retried once", name, returning)
		}
	}
}

// A broken connection re-runs reads once, and never a write that may have
// been applied.
func TestConnectionErrorsRerunOnlyReads(t *testing.T) {
	t.Parallel()
	f := &fakeDB{}
	b := fakeBackend(f, true)
	for name, op := range ops(t, b) {
		f.count = nil
		f.calls = nil
		f.fail = func(call string, n int) error {
			if call != "rollback" && len(f.calls) == 1 {
				return fakeErr{errclass.Connection}
			}
			return nil
		}
		err := op.run(context.Background())
		if op.read {
			require.NoError(t, err, "%s is re-run after a broken connection", name)
		} else {
			require.Error(t, err, "%s must not be re-run", name)
			require.Equal(t, errclass.Connection, errclass.Of(err), name)
		}
	}
}

// A statement that fails inside a transaction rolls the transaction back
// and never commits it; the error names no operation (its caller names it,
// once) and keeps the engine's error reachable.
func TestFailedStatementRollsBack(t *testing.T) {
	t.Parallel()
	for _, returning := range []bool{true, false} {
		f := &fakeDB{}
		b := fakeBackend(f, returning)
		cs, err := newClaims(b, fakeSpec(t))
		require.NoError(t, err)
		boom := fakeErr{errclass.Other}
		f.fail = func(call string, n int) error {
			if call == "tx query" {
				return boom
			}
			return nil
		}
		_, err = cs.Ack(context.Background(), &AckParams{Token: "t", IDs: []any{1}, Versions: []int64{1}})
		require.ErrorIs(t, err, boom)
		require.Equal(t, []string{"begin", "tx query", "rollback"}, f.calls)
		require.NotContains(t, err.Error(), "ack:", "the store names no operation: its caller does, once")
		require.NotContains(t, err.Error(), "fake:", "no engine name in the message")
	}
}

// A cancelled context still rolls back (without it), so no connection is
// left inside a transaction.
func TestRollbackSurvivesCancelledContext(t *testing.T) {
	t.Parallel()
	f := &fakeDB{}
	b := fakeBackend(f, true)
	ctx, cancel := context.WithCancel(context.Background())
	var rollbackCtxErr error = errors.New("not called")
	tx := &ctxTx{fakeTx: fakeTx{f}, onRollback: func(c context.Context) { rollbackCtxErr = c.Err() }}
	b.db = beginWith{f, tx}
	err := b.InTx(ctx, func(Querier) error { cancel(); return context.Canceled })
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, rollbackCtxErr, "the rollback runs on a live context")
}

type ctxTx struct {
	fakeTx
	onRollback func(context.Context)
}

func (t *ctxTx) Rollback(ctx context.Context) error { t.onRollback(ctx); return nil }

type beginWith struct {
	*fakeDB
	tx Tx
}

func (b beginWith) Begin(context.Context) (Tx, error) { return b.tx, nil }

// Keys are normalised once: any Go integer type is accepted, a uint64 that
// overflows an int64 is refused before any statement runs.
func TestKeysNormalisedAtTheBoundary(t *testing.T) {
	t.Parallel()
	f := &fakeDB{}
	cs, err := newClaims(fakeBackend(f, true), fakeSpec(t))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = cs.Ack(ctx, &AckParams{Token: "t", IDs: []any{uint64(1) << 63}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = cs.Release(ctx, "t", []any{uint64(1) << 63})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.Empty(t, f.calls, "refused before any statement")
	_, err = cs.Ack(ctx, &AckParams{Token: "t", IDs: []any{int16(1), uint32(2), uint64(3)}})
	require.NoError(t, err)
}

// A placeholder name that is not one of Args' fails when the store is
// built (claim.New, tasklock.New), not when the statement first runs.
func TestPlaceholderTypoFailsAtBuild(t *testing.T) {
	t.Parallel()
	spec := dialect.ClaimTable{Table: "jobs"}.WithDefaults()
	_, err := newClaims(fakeBackend(&fakeDB{}, true, func(d *fakeDriver) {
		d.claims = ClaimSQL{Heartbeat: `UPDATE {{.Table}} SET {{.ClaimedAt}} = now() WHERE {{.Token}} = {{arg "tokn"}}`}
	}), spec)
	require.ErrorContains(t, err, `statement heartbeat`)
	require.ErrorContains(t, err, `unknown placeholder name "tokn"`)
	_, err = newLeases(fakeBackend(&fakeDB{}, true, func(d *fakeDriver) {
		d.leases = LeaseSQL{Renew: `UPDATE {{.Table}} SET {{.LockedAt}} = now() WHERE {{.Owner}} = {{arg "ownr"}}`}
	}), dialect.LeaseTable{Table: "l", Key: "k", Owner: "o", LockedAt: "at"})
	require.ErrorContains(t, err, `unknown placeholder name "ownr"`)
}

// A claim template sees the claim table's names and its variant; a lease
// template the lease table's names: a field of the other kind is refused
// when the store is built.
func TestTemplatesSeeTheirOwnNames(t *testing.T) {
	t.Parallel()
	_, err := newClaims(fakeBackend(&fakeDB{}, true, func(d *fakeDriver) {
		d.claims.Heartbeat = `UPDATE {{.Table}} SET {{.LockedAt}} = now()`
	}), fakeSpec(t))
	require.ErrorContains(t, err, `statement heartbeat`)
	_, err = newLeases(fakeBackend(&fakeDB{}, true, func(d *fakeDriver) {
		d.leases.Renew = `UPDATE {{.Table}} SET {{.Scoped}}`
	}), dialect.LeaseTable{Table: "l", Key: "k", Owner: "o", LockedAt: "at"})
	require.ErrorContains(t, err, `statement lease renew`)
}

// The store's param checks apply the claim table's one MaxAttempts rule.
func TestParamChecksApplyTheMaxAttemptsRule(t *testing.T) {
	t.Parallel()
	full := fakeSpec(t)
	full.Attempts = "attempts"
	noAttempts := fakeSpec(t)
	for _, tc := range []struct {
		t    dialect.ClaimTable
		n    int
		want string
	}{
		{full, -1, "MaxAttempts: -1 is negative"},
		{noAttempts, 3, "needs an Attempts column"},
	} {
		require.ErrorContains(t, checkReap(tc.t, &ReapParams{Timeout: 1, Limit: 1, MaxAttempts: tc.n}), tc.want)
		require.ErrorContains(t, checkAck(tc.t, &AckParams{Token: "t", Outcome: OutcomeRetry, MaxAttempts: tc.n}, false), tc.want)
		require.ErrorContains(t, checkAck(tc.t, &AckParams{Outcome: OutcomeRetry, MaxAttempts: tc.n}, true), tc.want)
	}
	// Only a retry parks: other outcomes ignore a positive MaxAttempts.
	require.NoError(t, checkAck(noAttempts, &AckParams{Token: "t", Outcome: OutcomeDone, MaxAttempts: 3}, false))
	require.NoError(t, checkReap(full, &ReapParams{Timeout: 1, Limit: 1, MaxAttempts: 3}))
}

// A write that loses its connection, or whose COMMIT fails for a reason the
// engine does not name, may have taken effect: its error says so. A read's
// does not, and neither does a COMMIT refused by a deadlock (retried).
func TestOutcomeUnknown(t *testing.T) {
	t.Parallel()
	f := &fakeDB{}
	b := fakeBackend(f, true)
	for name, op := range ops(t, b) {
		f.count, f.calls = nil, nil
		f.fail = func(call string, n int) error {
			if call != "rollback" && len(f.calls) == 1 {
				return fakeErr{errclass.Connection}
			}
			return nil
		}
		err := op.run(context.Background())
		require.Equal(t, !op.read, errors.Is(err, dialect.ErrOutcomeUnknown), name)
	}
	cs, err := newClaims(b, fakeSpec(t))
	require.NoError(t, err)
	versioned := &AckParams{Token: "t", IDs: []any{1}, Versions: []int64{1}}
	for class, unknown := range map[errclass.Class]bool{errclass.Other: true, errclass.Connection: true, errclass.Duplicate: false} {
		f.count, f.calls = nil, nil
		f.fail = func(call string, n int) error {
			if call == "commit" {
				return fakeErr{class}
			}
			return nil
		}
		_, err = cs.Ack(context.Background(), versioned)
		require.Error(t, err)
		require.Equal(t, unknown, errors.Is(err, dialect.ErrOutcomeUnknown), "commit failing with class %d", class)
	}
	f.count, f.calls = nil, nil
	f.fail = func(call string, n int) error {
		if call == "commit" && n == 1 {
			return fakeErr{errclass.Deadlock}
		}
		return nil
	}
	_, err = cs.Ack(context.Background(), versioned)
	require.NoError(t, err, "a deadlock at COMMIT rolled back: the ack is retried")
}

// TextTimes is refused by engines with real time types.
func TestTextTimesOnlyWhereSupported(t *testing.T) {
	t.Parallel()
	spec := fakeSpec(t)
	spec.TextTimes = true
	_, err := newClaims(fakeBackend(&fakeDB{}, true), spec)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = newClaims(fakeBackend(&fakeDB{}, true, func(d *fakeDriver) { d.textTimes = true }), spec)
	require.NoError(t, err)
}

// The catalog's type text is read as MySQL and PostgreSQL write it: enum
// members with quotes doubled (and PostgreSQL's escape strings), integer
// widths signed and unsigned, and SQLite's integers all 64 bits wide.
func TestColumnTypes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"enum('a','b')":            {"a", "b"},
		"ENUM('it''s','x')":        {"it's", "x"},
		`enum(E'back\\slash','y')`: {`back\slash`, "y"},
		"enum('')":                 {""},
	} {
		got, ok := enumMembers(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"varchar(8)", "enum('a'", "enum(a)", "enum('a'b)"} {
		_, ok := enumMembers(in)
		require.False(t, ok, in)
	}
	b := fakeBackend(&fakeDB{}, true)
	for _, c := range []struct {
		typ, full string
		lo, hi    int64
	}{
		{"tinyint", "tinyint(4)", -128, 127},
		{"tinyint", "tinyint(3) unsigned", 0, 255},
		{"smallint", "smallint", -32768, 32767},
		{"mediumint", "mediumint(8) unsigned", 0, 1<<24 - 1},
		{"int", "int(11)", -1 << 31, 1<<31 - 1},
		{"integer", "integer", -1 << 31, 1<<31 - 1},
		{"bigint", "bigint(20) unsigned", 0, math.MaxInt64},
		{"bigint", "bigint", math.MinInt64, math.MaxInt64},
	} {
		lo, hi, ok := b.intRange(ColumnInfo{Type: c.typ, ColumnType: c.full})
		require.True(t, ok, c.full)
		require.Equal(t, [2]int64{c.lo, c.hi}, [2]int64{lo, hi}, c.full)
	}
	_, _, ok := b.intRange(ColumnInfo{Type: "numeric", ColumnType: "numeric"})
	require.False(t, ok, "no range for types claimlock does not know")
	b = fakeBackend(&fakeDB{}, true, func(d *fakeDriver) { d.wideInts = true })
	lo, hi, ok := b.intRange(ColumnInfo{Type: "tinyint", ColumnType: "TINYINT"})
	require.True(t, ok)
	require.Equal(t, [2]int64{math.MinInt64, math.MaxInt64}, [2]int64{lo, hi}, "SQLite")
}

// TextTimes is refused for lease tables too by engines with real time
// types.
func TestLeaseTextTimesOnlyWhereSupported(t *testing.T) {
	t.Parallel()
	spec := dialect.LeaseTable{Table: "xxx_task", Key: "id", LockedAt: "lock_at", TextTimes: true}
	sqls := LeaseSQL{Common: `{{define "held"}}1 = 1{{end}}{{define "free"}}x = NULL{{end}}{{define "hold"}}x = NULL{{end}}`}
	_, err := newLeases(fakeBackend(&fakeDB{}, true, func(d *fakeDriver) { d.leases = sqls }), spec)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "TextTimes: only SQLite keeps times as text")
	_, err = newLeases(fakeBackend(&fakeDB{}, true, func(d *fakeDriver) { d.leases, d.textTimes = sqls, true }), spec)
	require.NoError(t, err)
}

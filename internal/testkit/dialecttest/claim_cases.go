package dialecttest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

func testCapabilities(t *testing.T, h Harness) {
	d, _ := h.Open(t)
	c := d.Capabilities()
	require.NotEmpty(t, c.Engine)
	require.NotEmpty(t, c.Version)
	require.True(t, c.Supports(c.PreferredStrategy), "preferred strategy %v unsupported", c.PreferredStrategy)
	require.Contains(t, c.Strategies(), c.PreferredStrategy)
	require.Equal(t, c.SkipLocked, len(c.Strategies()) == 2)
	s, err := c.Resolve(dialect.StrategyAuto)
	require.NoError(t, err)
	require.Equal(t, c.PreferredStrategy, s)
	require.GreaterOrEqual(t, c.ClaimConcurrency, 0, "a negative default would mean no bound in disguise")
	if c.Engine == dialect.EngineTiDB {
		require.False(t, c.SkipLocked, "TiDB silently ignores SKIP LOCKED")
	}
	if !c.SkipLocked {
		_, err := c.Resolve(dialect.StrategySkipLocked)
		require.ErrorIs(t, err, dialect.ErrNotSupported)
	}
}

func testIdentifiers(t *testing.T, h Harness) {
	d, _ := h.Open(t)
	for _, bad := range []string{"", "t; DROP TABLE x", `a"b`, "a`b", "a'b", "a b", "a--b", "1abc", "a.b.c", "a..b", "tаble" /* Cyrillic a */, strings64()} {
		_, err := store.QuoteIdent(d, "Table", bad)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%q", bad)
		require.Contains(t, err.Error(), "Table")
	}
	for _, good := range []string{"t", "task_target", "_x9", "myschema.t"} {
		q, err := store.QuoteIdent(d, "Table", good)
		require.NoError(t, err)
		require.NotEqual(t, good, q, "quoted")
	}
}

func strings64() string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}

func testBadSpecs(t *testing.T, h Harness) {
	d, _ := h.Open(t)
	good := dialect.ClaimTable{Table: "t", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Pending: st(t, "P"), Processing: st(t, "R"), Done: st(t, "D"), Failed: st(t, "F")}
	_, err := store.OpenClaims(d, good)
	require.NoError(t, err)
	bad := []func(*dialect.ClaimTable){
		func(s *dialect.ClaimTable) { s.Table = "t; DROP TABLE x" },
		func(s *dialect.ClaimTable) { s.ID = "" },
		func(s *dialect.ClaimTable) { s.Token = "a`b" },
		func(s *dialect.ClaimTable) { s.Columns = []string{`x"y`} },
		func(s *dialect.ClaimTable) { s.Scope = []string{"a b"} },
		func(s *dialect.ClaimTable) { s.Done = s.Pending },
		func(s *dialect.ClaimTable) { s.Done = st(t, 3) },
		func(s *dialect.ClaimTable) { s.Processing = dialect.Status{} },
		func(s *dialect.ClaimTable) { s.Archive = "t_done" },
		func(s *dialect.ClaimTable) { s.DeleteDone, s.Archive = true, "t" },
		func(s *dialect.ClaimTable) { s.DeleteDone, s.Archive = true, "t_done; DROP TABLE t" },
	}
	for i, mut := range bad {
		s := good
		mut(&s)
		_, err := store.OpenClaims(d, s)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "case %d", i)
	}
	_, err = store.StatusOf("Pending", "x'; DROP")
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = store.StatusOf("Pending", 1.5)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = store.OpenLeases(d, dialect.LeaseTable{Table: "t", Key: "k", Owner: "o;", LockedAt: "l"})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = store.CreateTableDDL(d, store.TableDef{Table: "x y", Columns: []store.ColumnDef{{Name: "a"}}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

func testIndexes(t *testing.T, h Harness) {
	d, _ := h.Open(t)
	ctx := ctxT(t)
	spec := dialect.ClaimTable{Table: "cl_idx", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Scope: []string{"task_id"}, Pending: st(t, "P"), Processing: st(t, "R"), Done: st(t, "D"), Failed: st(t, "F")}
	ddl, err := store.CreateTableDDL(d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	require.NoError(t, store.ExecDDL(ctx, d, ddl), "CreateTableDDL must be idempotent")
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	missing, err := cs.MissingIndexes(ctx)
	require.NoError(t, err)
	require.Len(t, missing, len(cs.IndexDDL()))
	require.GreaterOrEqual(t, len(cs.IndexDDL()), 3, "claim, token and reaper indexes")
	require.NoError(t, store.ExecDDL(ctx, d, cs.IndexDDL()))
	missing, err = cs.MissingIndexes(ctx)
	require.NoError(t, err)
	require.Empty(t, missing)
}

// testOnlineIndexes: the online form of the recommended indexes
// (IndexOptions.Online) builds them on a table with rows, outside any
// transaction, through ExecDDL; it is what MissingIndexesWith reports
// before, and nothing is missing after, for either form; running it again
// is harmless.
func testOnlineIndexes(t *testing.T, h Harness) {
	f := newFixture(t, h)
	f.insert(1, 50)
	ctx := ctxT(t)
	spec := f.spec
	spec.Table = "cl_online"
	ddl, err := store.CreateTableDDL(f.d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, f.d, ddl))
	_, err = f.db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s) SELECT %s, %s FROM %s",
		f.q("cl_online"), f.q("task_id"), f.q("payload"), f.q("task_id"), f.q("payload"), f.q("cl_target")))
	require.NoError(t, err)
	cs, err := store.OpenClaims(f.d, spec)
	require.NoError(t, err)
	ix, ok := cs.(store.IndexDDLer)
	require.True(t, ok, "the store offers the online form")
	online := store.IndexOptions{Online: true}
	require.Len(t, ix.IndexDDLWith(online), len(cs.IndexDDL()))
	require.Equal(t, cs.IndexDDL(), ix.IndexDDLWith(store.IndexOptions{}))
	missing, err := ix.MissingIndexesWith(ctx, online)
	require.NoError(t, err)
	require.Equal(t, ix.IndexDDLWith(online), missing)
	require.NoError(t, store.ExecDDL(ctx, f.d, missing))
	require.NoError(t, store.ExecDDL(ctx, f.d, ix.IndexDDLWith(online)), "existing indexes are skipped")
	for _, opts := range []store.IndexOptions{{}, online} {
		missing, err = ix.MissingIndexesWith(ctx, opts)
		require.NoError(t, err)
		require.Empty(t, missing)
	}
	s := newFixtureStore(t, f.d, spec)
	n, err := s.Claim(ctx, &store.ClaimParams{Token: store.NewToken(), Limit: 10, ScopeValues: []any{1}, Strategy: f.d.Capabilities().PreferredStrategy},
		func(sc store.Scanner) error { return sc.Scan(new(any), new(any), new(any), new(any)) })
	require.NoError(t, err)
	require.Equal(t, 10, n, "the table works with the indexes built online")
}

// newFixtureStore returns a verified cs of spec.
func newFixtureStore(t *testing.T, d dialect.Dialect, spec dialect.ClaimTable) store.ClaimStore {
	t.Helper()
	s, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, s.VerifySchema(ctxT(t)))
	return s
}

func testClaim(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 10)
	f.insert(2, 5)
	tok, got := f.claim(s, 1, 4)
	require.Len(t, got, 4)
	require.Len(t, tok, store.TokenLen)
	all := f.rows()
	for i, c := range got {
		require.Equal(t, all[i].ID, c.ID, "claims take the lowest keys first")
		require.Equal(t, fmt.Sprintf("p%d", i), c.Payload)
		r := f.row(c.ID)
		require.Equal(t, "PROCESSING", r.Status)
		require.Equal(t, tok, r.Token)
		require.EqualValues(t, 1, r.Attempts)
	}
	tok2, got2 := f.claim(s, 1, 100)
	require.Len(t, got2, 6, "the rest of task 1 only")
	require.NotEqual(t, tok, tok2)
	for _, c := range got2 {
		require.Contains(t, fmt.Sprint(c.Payload), "p")
		for _, o := range got {
			require.NotEqual(t, o.ID, c.ID)
		}
	}
	_, none := f.claim(s, 1, 10)
	require.Empty(t, none)
	res := f.ack(tok, ids(got), store.OutcomeDone, 0)
	require.Empty(t, res.Lost)
	for _, c := range got {
		r := f.row(c.ID)
		require.Equal(t, "SENT", r.Status)
		require.Empty(t, r.Token)
	}
	// Acking again: the token no longer holds them.
	res = f.ack(tok, ids(got), store.OutcomeDone, 0)
	require.Len(t, res.Lost, len(got))
	// Task 2 untouched by everything above.
	_, t2 := f.claim(s, 2, 100)
	require.Len(t, t2, 5)
}

func testClaimTextKeys(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h, func(c *dialect.ClaimTable) { c.IDKind = dialect.IDText; c.Table = "cl_text" })
	f.insert(7, 6)
	tok, got := f.claim(s, 7, 4)
	require.Len(t, got, 4)
	require.Equal(t, "k7-000000", got[0].ID)
	res := f.ack(tok, append(ids(got[:2]), "k7-999999"), store.OutcomeDone, 0)
	require.Equal(t, []int{2}, res.Lost, "an unknown key is lost, the others acked")
	require.Equal(t, "SENT", f.row("k7-000001").Status)
	n, err := f.cs.Release(ctxT(t), tok, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
}

func testClaimIntegerStatus(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h, func(c *dialect.ClaimTable) {
		c.Table = "cl_intstatus"
		c.Pending, c.Processing, c.Done, c.Failed = st(t, 0), st(t, 1), st(t, 2), st(t, 3)
	})
	f.insert(1, 3)
	tok, got := f.claim(s, 1, 10)
	require.Len(t, got, 3)
	require.Equal(t, "1", f.row(got[0].ID).Status)
	res := f.ack(tok, ids(got), store.OutcomeFailed, 0)
	require.Empty(t, res.Lost)
	require.Equal(t, "3", f.row(got[2].ID).Status)
}

func testAckLost(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 3)
	ctx := ctxT(t)
	tokA, a := f.claim(s, 1, 3)
	require.Len(t, a, 3)
	// Row a[1] is returned (as a reaper would) and re-claimed by B.
	n, err := f.cs.Release(ctx, tokA, []any{a[1].ID})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	tokB, b := f.claim(s, 1, 10)
	require.Len(t, b, 1)
	require.Equal(t, a[1].ID, b[0].ID)
	res := f.ack(tokA, ids(a), store.OutcomeDone, 0)
	require.Equal(t, []int{1}, res.Lost)
	r := f.row(a[1].ID)
	require.Equal(t, "PROCESSING", r.Status, "the late ack must not overwrite the new owner's row")
	require.Equal(t, tokB, r.Token)
	// A late fail or heartbeat of A does not touch it either.
	res = f.ack(tokA, []any{a[1].ID}, store.OutcomeFailed, 0)
	require.Equal(t, []int{0}, res.Lost)
	hb, err := f.cs.Heartbeat(ctx, tokA)
	require.NoError(t, err)
	require.Empty(t, hb)
	res = f.ack(tokB, ids(b), store.OutcomeDone, 0)
	require.Empty(t, res.Lost)
	require.Equal(t, "SENT", f.row(a[1].ID).Status)
}

func testAckVersioned(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 3)
	ctx := ctxT(t)
	tok, got := f.claim(s, 1, 3)
	require.Len(t, got, 3)
	// A writer changes row 2 while it is being flushed.
	_, err := f.db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s = %s + 1 WHERE %s = %v",
		f.q("cl_target"), f.q("version"), f.q("version"), f.q("id"), got[1].ID))
	require.NoError(t, err)
	versions := []int64{got[0].Version, got[1].Version, got[2].Version}
	res, err := f.cs.Ack(ctx, &store.AckParams{Token: tok, IDs: ids(got), Versions: versions, Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.Equal(t, []int{1}, res.Requeued)
	require.Equal(t, "SENT", f.row(got[0].ID).Status)
	require.Equal(t, "PENDING", f.row(got[1].ID).Status)
	require.Empty(t, f.row(got[1].ID).Token)
	_, again := f.claim(s, 1, 10)
	require.Len(t, again, 1)
	require.Equal(t, got[1].ID, again[0].ID)
	require.Equal(t, got[1].Version+1, again[0].Version)
}

func testAckFailRetry(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 2)
	tok, got := f.claim(s, 1, 2)
	res := f.ack(tok, ids(got), store.OutcomeRetry, 2)
	require.Empty(t, res.Lost)
	require.Empty(t, res.Parked)
	require.Equal(t, "PENDING", f.row(got[0].ID).Status)
	tok, got = f.claim(s, 1, 2)
	require.Len(t, got, 2)
	require.EqualValues(t, 2, f.row(got[0].ID).Attempts)
	res = f.ack(tok, ids(got), store.OutcomeRetry, 2)
	require.Equal(t, []int{0, 1}, res.Parked)
	require.Equal(t, "FAILED", f.row(got[0].ID).Status)
	require.EqualValues(t, 2, f.row(got[0].ID).Attempts)
	_, none := f.claim(s, 1, 2)
	require.Empty(t, none, "parked rows are never claimed again")
}

func testHeartbeatReap(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 4)
	ctx := ctxT(t)
	tokA, a := f.claim(s, 1, 2)
	tokB, b := f.claim(s, 1, 2)
	// B's heartbeat must stay younger than the reap timeout until the reap
	// below has run: a second, which a loaded machine's race-instrumented
	// suite has overrun at half a second between two statements.
	const timeout = time.Second
	time.Sleep(timeout + 300*time.Millisecond)
	// Nothing is a minute old: a reap that ignored its timeout (or compared
	// the wrong way) would take rows claimed well within it.
	res, err := f.cs.Reap(ctx, &store.ReapParams{Timeout: time.Minute, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, store.ReapResult{}, res, "rows claimed within the timeout are not stale")
	held, err := f.cs.Heartbeat(ctx, tokB)
	require.NoError(t, err)
	require.Len(t, held, 2)
	res, err = f.cs.Reap(ctx, &store.ReapParams{Timeout: timeout, Limit: 100})
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Returned, "only the batch that stopped heartbeating")
	require.Zero(t, res.Parked)
	for _, c := range a {
		require.Equal(t, "PENDING", f.row(c.ID).Status)
	}
	for _, c := range b {
		require.Equal(t, tokB, f.row(c.ID).Token)
	}
	ack := f.ack(tokA, ids(a), store.OutcomeDone, 0)
	require.Len(t, ack.Lost, 2)
	ack = f.ack(tokB, ids(b), store.OutcomeDone, 0)
	require.Empty(t, ack.Lost)
	// Heartbeats in a tight loop keep reporting the rows held.
	tokC, c := f.claim(s, 1, 10)
	require.Len(t, c, 2)
	for i := 0; i < 50; i++ {
		held, err := f.cs.Heartbeat(ctx, tokC)
		require.NoError(t, err)
		require.Len(t, held, 2, "heartbeat %d", i)
	}
}

// testReapOldestFirst: a bounded reap takes the stale rows whose claim (or
// last heartbeat) is oldest, whatever their keys.
func testReapOldestFirst(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 4)
	ctx := ctxT(t)
	tokLow, low := f.claim(s, 1, 2)
	_, high := f.claim(s, 1, 2)
	require.Len(t, low, 2)
	require.Len(t, high, 2)
	time.Sleep(400 * time.Millisecond)
	// The rows with the lower keys heartbeat: the others are now older.
	held, err := f.cs.Heartbeat(ctx, tokLow)
	require.NoError(t, err)
	require.Len(t, held, 2)
	time.Sleep(400 * time.Millisecond)
	p := &store.ReapParams{Timeout: 200 * time.Millisecond, Limit: 2}
	res, err := f.cs.Reap(ctx, p)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Returned)
	for _, c := range high {
		require.Equal(t, "PENDING", f.row(c.ID).Status, "the oldest claim is reaped first")
	}
	for _, c := range low {
		require.Equal(t, tokLow, f.row(c.ID).Token)
	}
	res, err = f.cs.Reap(ctx, p)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Returned)
}

func testReapBounded(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 5)
	f.insert(2, 1)
	ctx := ctxT(t)
	_, got := f.claim(s, 1, 5)
	require.Len(t, got, 5)
	_, other := f.claim(s, 2, 5)
	require.Len(t, other, 1)
	// Two of them have been claimed three times already.
	_, err := f.db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s = 3 WHERE %s IN (%v, %v)",
		f.q("cl_target"), f.q("attempts"), f.q("id"), got[0].ID, got[4].ID))
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	p := &store.ReapParams{Timeout: 100 * time.Millisecond, Limit: 2, MaxAttempts: 3, ScopeValues: []any{1}}
	var total store.ReapResult
	for i := 0; ; i++ {
		require.Less(t, i, 10)
		res, err := f.cs.Reap(ctx, p)
		require.NoError(t, err)
		require.LessOrEqual(t, res.Returned, int64(2))
		require.LessOrEqual(t, res.Parked, int64(2))
		total.Returned += res.Returned
		total.Parked += res.Parked
		if res.Returned < 2 && res.Parked < 2 {
			break
		}
	}
	require.EqualValues(t, 3, total.Returned)
	require.EqualValues(t, 2, total.Parked)
	require.Equal(t, "FAILED", f.row(got[0].ID).Status)
	require.Equal(t, "PENDING", f.row(got[1].ID).Status)
	require.Equal(t, "PROCESSING", f.row(other[0].ID).Status, "out of scope")
	_, err = f.cs.Reap(ctx, &store.ReapParams{Timeout: 0, Limit: 1})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = f.cs.Reap(ctx, &store.ReapParams{Timeout: time.Second, Limit: 0})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

func testRelease(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 5)
	ctx := ctxT(t)
	tok, got := f.claim(s, 1, 3)
	// Another worker's batch: no release of tok touches it.
	other, theirs := f.claim(s, 1, 2)
	require.Len(t, theirs, 2)
	n, err := f.cs.Release(ctx, tok, ids(theirs))
	require.NoError(t, err)
	require.Zero(t, n, "a release of another token's rows by key")
	f.ack(tok, ids(got[:1]), store.OutcomeDone, 0)
	n, err = f.cs.Release(ctx, tok, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	require.Equal(t, "SENT", f.row(got[0].ID).Status)
	r := f.row(got[1].ID)
	require.Equal(t, "PENDING", r.Status)
	require.Empty(t, r.Token)
	require.EqualValues(t, 0, r.Attempts, "a release is not a failed attempt")
	n, err = f.cs.Release(ctx, tok, nil)
	require.NoError(t, err)
	require.Zero(t, n)
	for _, c := range theirs {
		r := f.row(c.ID)
		require.Equal(t, "PROCESSING", r.Status, "another token's row")
		require.Equal(t, other, r.Token, "another token's row")
		require.EqualValues(t, 1, r.Attempts)
	}
}

// testRead: Read returns only the rows its token holds (of ids, when
// given), with the columns a claim returns, and changes nothing.
func testRead(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 4)
	ctx := ctxT(t)
	tokA, a := f.claim(s, 1, 2)
	_, b := f.claim(s, 1, 2)
	require.Len(t, a, 2)
	require.Len(t, b, 2)
	read := func(tok string, keys []any) []claimed {
		t.Helper()
		var out []claimed
		n, err := f.cs.Read(ctx, tok, keys, func(sc store.Scanner) error {
			var c claimed
			var id any
			if err := sc.Scan(&id, &c.Version, &c.Attempts, &c.Payload); err != nil {
				return err
			}
			c.ID = norm(id)
			out = append(out, c)
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, n, len(out))
		return out
	}
	require.Equal(t, a, read(tokA, nil), "every row the token holds, in key order, as the claim returned them")
	require.Equal(t, a[1:], read(tokA, []any{b[0].ID, a[1].ID, b[1].ID}), "of the keys given, only the token's")
	require.Empty(t, read(tokA, []any{b[0].ID}))
	require.Empty(t, read(store.NewToken(), nil), "a token that holds nothing")
	for _, c := range append(a, b...) {
		require.Equal(t, "PROCESSING", f.row(c.ID).Status, "Read changes nothing")
	}
}

// testClaimSkipsLockedRows: with SKIP LOCKED, a claim passes over a pending
// row another session has locked instead of waiting for it. The other
// session holds its lock until the end of the case, so a claim that waits
// never returns rows: its context ends it.
func testClaimSkipsLockedRows(t *testing.T, h Harness) {
	f := newFixture(t, h)
	if !f.d.Capabilities().SkipLocked {
		t.Logf("%s %s has no SKIP LOCKED", f.d.Capabilities().Engine, f.d.Capabilities().Version)
		return
	}
	f.insert(1, 4)
	ctx := ctxT(t)
	first := f.rows()[0].ID
	tx, err := f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var locked any
	require.NoError(t, tx.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = %v FOR UPDATE",
		f.q(f.spec.ID), f.q(f.spec.Table), f.q(f.spec.ID), first)).Scan(&locked))

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var got []any
	n, err := f.cs.Claim(cctx, &store.ClaimParams{Token: store.NewToken(), Limit: 2, ScopeValues: []any{1}, Strategy: dialect.StrategySkipLocked},
		func(sc store.Scanner) error {
			var id any
			var version, attempts int64
			var payload string
			err := sc.Scan(&id, &version, &attempts, &payload)
			got = append(got, norm(id))
			return err
		})
	require.NoError(t, err, "a SKIP LOCKED claim waited for a locked row")
	require.Equal(t, 2, n)
	require.NotContains(t, got, norm(first), "the locked row is passed over")
	require.NoError(t, tx.Rollback())
	require.Equal(t, "PENDING", f.row(first).Status)
}

func testStats(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 6)
	f.insert(2, 2)
	ctx := ctxT(t)
	tok, got := f.claim(s, 1, 3)
	f.ack(tok, ids(got[:1]), store.OutcomeDone, 0)
	f.ack(tok, ids(got[1:2]), store.OutcomeFailed, 0)
	time.Sleep(50 * time.Millisecond)
	stats, err := f.cs.Stats(ctx, []any{1})
	require.NoError(t, err)
	require.Equal(t, store.Stats{Pending: 3, Processing: 1, Done: 1, Failed: 1, OldestProcessing: stats.OldestProcessing}, stats)
	require.Greater(t, stats.OldestProcessing, 20*time.Millisecond)
	require.Less(t, stats.OldestProcessing, time.Minute)
	all, err := f.cs.Stats(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, 5, all.Pending)
}

// testConcurrentClaims races claimers on one task: every row must be
// claimed by exactly one token and acked exactly once.
func testConcurrentClaims(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	const rows, workers, batch = 2000, 8, 25
	f.insert(1, rows)
	ctx := ctxT(t)
	var mu sync.Mutex
	owner := map[any]string{}
	var errs []error
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				tok := store.NewToken()
				var got []any
				_, err := f.cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: batch, ScopeValues: []any{1}, Strategy: s},
					func(sc store.Scanner) error {
						var id, v any
						var p string
						if err := sc.Scan(&id, &v, new(any), &p); err != nil {
							return err
						}
						got = append(got, norm(id))
						return nil
					})
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, id := range got {
					if prev, ok := owner[id]; ok {
						errs = append(errs, fmt.Errorf("row %v claimed by %s and %s", id, prev, tok))
					}
					owner[id] = tok
				}
				mu.Unlock()
				res, err := f.cs.Ack(ctx, &store.AckParams{Token: tok, IDs: got, Outcome: store.OutcomeDone})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if len(res.Lost) > 0 {
					errs = append(errs, fmt.Errorf("token %s lost %d rows nobody reaped", tok, len(res.Lost)))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if isRetryable(err) {
			t.Errorf("retryable error reached the caller: %v", err)
		}
	}
	require.Empty(t, errs)
	require.Len(t, owner, rows)
	for _, r := range f.rows() {
		require.Equal(t, "SENT", r.Status, "row %v", r.ID)
		require.EqualValues(t, 1, r.Attempts, "row %v claimed once", r.ID)
	}
	t.Logf("%s: %d rows, %d workers, %d retries", s, rows, workers, store.Retries(f.d))
}

// testBadParams: every engine refuses the same bad call params before any
// statement runs.
func testBadParams(t *testing.T, h Harness) {
	f := newFixture(t, h)
	f.insert(1, 1)
	ctx := ctxT(t)
	s := f.d.Capabilities().PreferredStrategy
	noScan := func(store.Scanner) error { return nil }
	claims := []*store.ClaimParams{
		{Token: "", Limit: 1, ScopeValues: []any{1}, Strategy: s},
		{Token: "t", Limit: 0, ScopeValues: []any{1}, Strategy: s},
		{Token: "t", Limit: 1, ScopeValues: nil, Strategy: s},
		{Token: "t", Limit: 1, ScopeValues: []any{1, 2}, Strategy: s},
	}
	for i, p := range claims {
		_, err := f.cs.Claim(ctx, p, noScan)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "claim case %d", i)
	}
	acks := []*store.AckParams{
		{Token: "", IDs: []any{1}},
		{Token: "t", IDs: []any{1}, Outcome: store.AckOutcome(9)},
		{Token: "t", IDs: []any{1}, Outcome: store.OutcomeRetry, MaxAttempts: -1},
		{Token: "t", IDs: []any{1, 2}, Versions: []int64{1}},
	}
	for i, p := range acks {
		_, err := f.cs.Ack(ctx, p)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "ack case %d", i)
	}
	reaps := []*store.ReapParams{
		{Timeout: time.Second, Limit: 1, MaxAttempts: -1},
		{Timeout: time.Second, Limit: 1, ScopeValues: []any{1, 2}},
	}
	for i, p := range reaps {
		_, err := f.cs.Reap(ctx, p)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "reap case %d", i)
	}
	_, err := f.cs.Stats(ctx, []any{1, 2})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	rows := f.rows()
	require.Len(t, rows, 1)
	require.Equal(t, "PENDING", rows[0].Status, "nothing was written")
	require.Zero(t, rows[0].Attempts)
}

// testHeartbeatPartialLoss: of 14 claimed rows an operator deletes one and
// resets another to pending mid-batch; the heartbeat reports exactly the
// 12 keys still held (the claim package loses the other two alone), and
// moves only their claim times.
func testHeartbeatPartialLoss(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 14)
	ctx := ctxT(t)
	tok, got := f.claim(s, 1, 14)
	require.Len(t, got, 14)
	gone, reset := got[3].ID, got[9].ID
	_, err := f.db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s = %v", f.q(f.spec.Table), f.q(f.spec.ID), gone))
	require.NoError(t, err)
	_, err = f.db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s = 'PENDING', %s = NULL WHERE %s = %v",
		f.q(f.spec.Table), f.q(f.spec.Status), f.q(f.spec.Token), f.q(f.spec.ID), reset))
	require.NoError(t, err)
	held, err := f.cs.Heartbeat(ctx, tok)
	require.NoError(t, err)
	var want, heldKeys []any
	for _, c := range got {
		if c.ID != gone && c.ID != reset {
			want = append(want, norm(c.ID))
		}
	}
	for _, k := range held {
		heldKeys = append(heldKeys, norm(k))
	}
	require.ElementsMatch(t, want, heldKeys, "the heartbeat lists the keys still held, and only those")
	require.Equal(t, "PENDING", f.row(reset).Status, "the reset row is not taken back")
}

// Package dialecttest is the conformance suite every claimlock dialect
// passes against a real database. A dialect proves itself by calling [Run]
// from a test in its own package:
//
//	func TestConformance(t *testing.T) {
//		dialecttest.Run(t, dialecttest.Harness{
//			Name: "mydb",
//			Open: func(t *testing.T) (dialect.Dialect, *sql.DB) { ... },
//		})
//	}
//
// Open must return a dialect on a database no other test uses (a fresh
// schema or database) and a database/sql handle on the same database, which
// the suite uses only for placeholder-free statements: inserting fixture
// rows with literal values and reading rows back for assertions. Every case
// that involves claims runs once per strategy the server supports.
package dialecttest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// Harness connects the suite to one dialect.
type Harness struct {
	// Name labels the subtests.
	Name string
	// Open returns a dialect on a fresh, isolated database and a
	// database/sql handle on the same database.
	Open func(t *testing.T) (dialect.Dialect, *sql.DB)
	// OpenVia, for engines reached over the network, is Open with every
	// connection going through a proxy: it calls via with the server's
	// host:port and connects to the address via returns instead. The
	// outage cases use it to refuse connects and to drop a connection
	// after a statement was written. Nil for SQLite.
	OpenVia func(t *testing.T, via func(server string) string) (dialect.Dialect, *sql.DB)
	// TimeTypes are the time column types the engine's users have, each
	// supported or refused (the TimeColumns case).
	TimeTypes []TimeType
}

// CreateClaimTable creates spec's table with the schema helpers
// ([store.ClaimTableDef]) and the store's recommended indexes, and returns
// the store. It fails the test on any error.
func CreateClaimTable(t testing.TB, d dialect.Dialect, spec dialect.ClaimTable) store.ClaimStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ddl, err := store.CreateTableDDL(d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, cs.IndexDDL()))
	// Verification also reads the time columns' precision, without which
	// every staleness test errs a second towards "still held".
	require.NoError(t, cs.VerifySchema(ctx))
	return cs
}

// Run runs every conformance case as a subtest of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.Open, "Harness.Open")
	cases := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"Capabilities", testCapabilities},
		{"Identifiers", testIdentifiers},
		{"BadSpecs", testBadSpecs},
		{"BadParams", testBadParams},
		{"Indexes", testIndexes},
		{"OnlineIndexes", testOnlineIndexes},
		{"VerifySchema", testVerifySchema},
		{"NarrowColumns", testNarrowColumns},
		{"NarrowLeaseColumns", testNarrowLeaseColumns},
		{"Claim", perStrategy(testClaim)},
		{"ClaimTextKeys", perStrategy(testClaimTextKeys)},
		{"ClaimIntegerStatus", perStrategy(testClaimIntegerStatus)},
		{"AckLostAfterReclaim", perStrategy(testAckLost)},
		{"AckVersioned", perStrategy(testAckVersioned)},
		{"AckFailAndRetry", perStrategy(testAckFailRetry)},
		{"HeartbeatAndReap", perStrategy(testHeartbeatReap)},
		{"HeartbeatPartialLoss", perStrategy(testHeartbeatPartialLoss)},
		{"ReapBoundedAndParks", perStrategy(testReapBounded)},
		{"ReapOldestFirst", perStrategy(testReapOldestFirst)},
		{"ReapReturnsOnlyBelowMax", perStrategy(testReapReturnsOnlyBelowMax)},
		{"Release", perStrategy(testRelease)},
		{"LockOrder", testLockOrder},
		{"Read", perStrategy(testRead)},
		{"ClaimSkipsLockedRows", testClaimSkipsLockedRows},
		{"Stats", perStrategy(testStats)},
		{"ConcurrentClaimsNeverOverlap", perStrategy(testConcurrentClaims)},
		{"LeaseKeyed", testLeaseKeyed},
		{"LeaseExpiryAndTakeover", testLeaseExpiry},
		{"LeaseRenewSameInstant", testLeaseRenewTight},
		{"LeaseTaskRow", testLeaseTaskRow},
		{"LeaseKeyedWithoutExpiry", testLeaseKeyedNoExpiry},
		{"LeaseBadInput", testLeaseBadInput},
		{"LeaseReapExpired", testLeaseReap},
		{"LeaseHeld", testLeaseHeld},
		{"LeaseContention", testLeaseContention},
		{"LeaseOwnerChecks", testLeaseOwnerChecks},
		{"LeaseMinHold", testLeaseMinHold},
		{"KeyOverflow", testKeyOverflow},
		{"ErrorText", testErrorText},
		{"AckRollsBack", testAckRollsBack},
		{"SecondPrecision", testSecondPrecision},
		{"TimeColumns", testTimeColumns},
		{"ScopeValueTypes", testScopeValueTypes},
		{"NullableCounters", testNullableCounters},
		{"ClearClaimedAt", perStrategy(testClearClaimedAt)},
		{"LeaseWithoutOwner", testLeaseWithoutOwner},
		{"RawDriverErrors", testRawDriverErrors},
		{"RunAtRetry", perStrategy(testRunAtRetry)},
		{"Snooze", perStrategy(testSnooze)},
		{"UnparkAndList", perStrategy(testUnparkAndList)},
		{"ErrorWidth", testErrorWidth},
		{"Worker", perStrategy(testWorker)},
		{"LifecycleBadInput", testLifecycleBadInput},
		{"AckTx", perStrategy(testAckTx)},
		{"AckAndClaim", perStrategy(testAckAndClaim)},
		{"AckAndClaimFailure", perStrategy(testAckAndClaimFailure)},
		{"AckAndClaimConcurrent", perStrategy(testAckAndClaimConcurrent)},
		{"OutageNothingSent", testOutageNothingSent},
		{"OutageAfterWrite", testOutageAfterWrite},
		{"OutageAtCommit", testOutageAtCommit},
		{"AckDeleteDone", perStrategy(testAckDeleteDone)},
		{"AckArchive", perStrategy(testAckArchive)},
		{"Held", testHeld},
		{"HeldDeleteDone", testHeldDeleteDone},
		{"HeldCutShort", testHeldCutShort},
		{"HeldTurns", testHeldTurns},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

type strategyTest func(t *testing.T, h Harness, s dialect.Strategy)

// perStrategy runs fn once per strategy the server supports. The dialect is
// opened once to read the capabilities; each strategy gets its own database.
func perStrategy(fn strategyTest) func(*testing.T, Harness) {
	return func(t *testing.T, h Harness) {
		d, _ := h.Open(t)
		for _, s := range d.Capabilities().Strategies() {
			t.Run(s.String(), func(t *testing.T) { fn(t, h, s) })
		}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func st(t *testing.T, v any) dialect.Status {
	s, err := store.StatusOf("status", v)
	require.NoError(t, err)
	return s
}

// fixture is a claim table created through the dialect, with helpers that
// use only placeholder-free SQL.
type fixture struct {
	t    *testing.T
	d    dialect.Dialect
	db   *sql.DB
	spec dialect.ClaimTable
	cs   store.ClaimStore
	q    func(string) string
}

type fixtureOpt func(*dialect.ClaimTable)

func newFixture(t *testing.T, h Harness, opts ...fixtureOpt) *fixture {
	t.Helper()
	d, db := h.Open(t)
	return newFixtureOn(t, d, db, opts...)
}

// newFixtureOn is newFixture on a dialect and handle opened already.
func newFixtureOn(t *testing.T, d dialect.Dialect, db *sql.DB, opts ...fixtureOpt) *fixture {
	t.Helper()
	spec := dialect.ClaimTable{
		Table: "cl_target", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Version: "version", Columns: []string{"payload"}, Scope: []string{"task_id"},
		Pending: st(t, "PENDING"), Processing: st(t, "PROCESSING"), Done: st(t, "SENT"), Failed: st(t, "FAILED"),
	}
	for _, o := range opts {
		o(&spec)
	}
	cs := CreateClaimTable(t, d, spec)
	f := &fixture{t: t, d: d, db: db, spec: spec, cs: cs}
	f.q = func(name string) string {
		s, err := store.QuoteIdent(d, "test", name)
		require.NoError(t, err)
		return s
	}
	return f
}

// insert adds n rows to task with payloads p<k>; text keys are k<task>-<seq>.
func (f *fixture) insert(task, n int) {
	f.t.Helper()
	const chunk = 500
	for start := 0; start < n; start += chunk {
		var vals []string
		for i := start; i < n && i < start+chunk; i++ {
			if f.spec.IDKind == dialect.IDText {
				vals = append(vals, fmt.Sprintf("('k%d-%06d', %d, 'p%d')", task, i, task, i))
			} else {
				vals = append(vals, fmt.Sprintf("(%d, 'p%d')", task, i))
			}
		}
		cols := fmt.Sprintf("%s, %s", f.q(f.spec.Scope[0]), f.q("payload"))
		if f.spec.IDKind == dialect.IDText {
			cols = f.q(f.spec.ID) + ", " + cols
		}
		_, err := f.db.ExecContext(ctxT(f.t), fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", f.q(f.spec.Table), cols, strings.Join(vals, ", ")))
		require.NoError(f.t, err)
	}
}

type rowState struct {
	ID       any
	Status   string
	Token    string
	Attempts int64
}

func norm(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case int:
		return int64(x)
	case int32:
		return int64(x)
	}
	return v
}

// rows reads every row ordered by key.
func (f *fixture) rows() []rowState {
	f.t.Helper()
	r, err := f.db.QueryContext(ctxT(f.t), fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s ORDER BY %s",
		f.q(f.spec.ID), f.q(f.spec.Status), f.q(f.spec.Token), f.q(f.spec.Attempts), f.q(f.spec.Table), f.q(f.spec.ID)))
	require.NoError(f.t, err)
	defer r.Close()
	var out []rowState
	for r.Next() {
		var id, status any
		var token sql.NullString
		var rs rowState
		require.NoError(f.t, r.Scan(&id, &status, &token, &rs.Attempts))
		rs.ID, rs.Status, rs.Token = norm(id), fmt.Sprint(norm(status)), token.String
		out = append(out, rs)
	}
	require.NoError(f.t, r.Err())
	return out
}

func (f *fixture) row(id any) rowState {
	f.t.Helper()
	for _, r := range f.rows() {
		if r.ID == norm(id) {
			return r
		}
	}
	f.t.Fatalf("no row %v", id)
	return rowState{}
}

// claimed is one row as returned by a claim.
type claimed struct {
	ID       any
	Version  int64
	Attempts int64
	Payload  string
}

func (f *fixture) claim(s dialect.Strategy, task, limit int) (string, []claimed) {
	f.t.Helper()
	tok := store.NewToken()
	var out []claimed
	n, err := f.cs.Claim(ctxT(f.t), &store.ClaimParams{Token: tok, Limit: limit, ScopeValues: []any{task}, Strategy: s},
		func(sc store.Scanner) error {
			var c claimed
			var id any
			dest := []any{&id}
			if f.spec.Version != "" {
				dest = append(dest, &c.Version)
			}
			if f.spec.Attempts != "" {
				dest = append(dest, &c.Attempts)
			}
			dest = append(dest, &c.Payload)
			if err := sc.Scan(dest...); err != nil {
				return err
			}
			c.ID = norm(id)
			out = append(out, c)
			return nil
		})
	require.NoError(f.t, err)
	require.Equal(f.t, n, len(out))
	sort.Slice(out, func(i, j int) bool { return less(out[i].ID, out[j].ID) })
	return tok, out
}

func less(a, b any) bool {
	x, ok1 := a.(int64)
	y, ok2 := b.(int64)
	if ok1 && ok2 {
		return x < y
	}
	return fmt.Sprint(a) < fmt.Sprint(b)
}

func ids(cs []claimed) []any {
	out := make([]any, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func (f *fixture) ack(tok string, ids []any, o store.AckOutcome, maxAttempts int) store.AckResult {
	f.t.Helper()
	res, err := f.cs.Ack(ctxT(f.t), &store.AckParams{Token: tok, IDs: ids, Outcome: o, MaxAttempts: maxAttempts})
	require.NoError(f.t, err)
	return res
}

func isRetryable(err error) bool { return errors.Is(err, dialect.ErrRetryable) }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

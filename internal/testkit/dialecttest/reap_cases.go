package dialecttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// testReapReturnsOnlyBelowMax: the return step of a reap takes only stale
// rows below MaxAttempts, so a stale row at MaxAttempts that its sweep's
// park step did not take (here: the park step's limit was used up; in a
// running system: the row turned stale between the two statements) stays
// processing until the next sweep parks it. Returned to pending, it would be
// claimed a MaxAttempts+1-th time.
//
// Rows a and b are claimed first and have used every attempt; row c is
// claimed later and is below the bound. One sweep with a limit of one parks
// a or b and returns c (not the other of a and b, which are staler); a claim
// then finds only c; the next sweep parks the last row at the bound.
func testReapReturnsOnlyBelowMax(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	f.insert(1, 3)
	ctx := ctxT(t)
	_, atMax := f.claim(s, 1, 2)
	require.Len(t, atMax, 2)
	// The later claim is the newer one on every engine's clock (SQLite
	// stores milliseconds): a reap ordered by claim time takes a and b
	// before c.
	time.Sleep(50 * time.Millisecond)
	tokC, below := f.claim(s, 1, 1)
	require.Len(t, below, 1)
	const maxAttempts = 3
	_, err := f.db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s = %d WHERE %s IN (%v, %v)",
		f.q("cl_target"), f.q("attempts"), maxAttempts, f.q("id"), atMax[0].ID, atMax[1].ID))
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)

	p := &store.ReapParams{Timeout: 100 * time.Millisecond, Limit: 1, MaxAttempts: maxAttempts, ScopeValues: []any{1}}
	res, err := f.cs.Reap(ctx, p)
	require.NoError(t, err)
	require.Equal(t, store.ReapResult{Returned: 1, Parked: 1}, res)
	c := f.row(below[0].ID)
	require.Equal(t, "PENDING", c.Status, "the stale row below MaxAttempts goes back to pending")
	require.EqualValues(t, 1, c.Attempts)
	var parked, waiting rowState
	for _, r := range []rowState{f.row(atMax[0].ID), f.row(atMax[1].ID)} {
		switch r.Status {
		case "FAILED":
			parked = r
		case "PROCESSING":
			waiting = r
		default:
			t.Fatalf("row %v at MaxAttempts is %s after one sweep: the return step took it (it must wait for the next sweep's park step)", r.ID, r.Status)
		}
	}
	require.NotNil(t, parked.ID, "one row at MaxAttempts is parked")
	require.NotNil(t, waiting.ID, "the other row at MaxAttempts stays processing, under its token")
	require.NotEmpty(t, waiting.Token)
	require.EqualValues(t, maxAttempts, waiting.Attempts)

	// A claim now can take only c: no row runs more than MaxAttempts times.
	tok, again := f.claim(s, 1, 10)
	require.Len(t, again, 1)
	require.Equal(t, below[0].ID, again[0].ID)
	require.LessOrEqual(t, again[0].Attempts, int64(maxAttempts))
	require.NotEqual(t, tokC, tok)
	f.ack(tok, ids(again), store.OutcomeDone, 0)

	res, err = f.cs.Reap(ctx, p)
	require.NoError(t, err)
	require.Equal(t, store.ReapResult{Parked: 1}, res, "the next sweep parks the row left at MaxAttempts")
	for _, r := range atMax {
		got := f.row(r.ID)
		require.Equal(t, "FAILED", got.Status)
		require.EqualValues(t, maxAttempts, got.Attempts)
	}
}

package dialecttest

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// ackClaimer returns the fixture store's ack+claim.
func (f *fixture) ackClaimer() store.AckClaimer {
	f.t.Helper()
	ac, ok := f.cs.(store.AckClaimer)
	require.True(f.t, ok, "the claim store implements store.AckClaimer")
	return ac
}

// ackAndClaim acks ack and claims up to limit rows of task under a fresh
// token, returning the ack's result, the token and the claimed rows (the
// last n passed to scan).
func (f *fixture) ackAndClaim(ctx context.Context, s dialect.Strategy, ack store.AckParams, task, limit int) (store.AckResult, string, []claimed, error) {
	tok := store.NewToken()
	var out []claimed
	res, n, err := f.ackClaimer().AckAndClaim(ctx, &store.AckClaimParams{
		Ack:   ack,
		Claim: store.ClaimParams{Token: tok, Limit: limit, ScopeValues: []any{task}, Strategy: s},
	}, func(sc store.Scanner) error {
		var c claimed
		var id any
		if err := sc.Scan(&id, &c.Version, &c.Attempts, &c.Payload); err != nil {
			return err
		}
		c.ID = norm(id)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return res, tok, nil, err
	}
	if n > len(out) {
		return res, tok, nil, fmt.Errorf("claimed %d rows, scanned %d", n, len(out))
	}
	return res, tok, out[len(out)-n:], nil
}

// testAckAndClaim checks the pipelined ack+claim: the ack part has the
// meaning of Ack (lost, requeued and parked rows reported exactly), the
// claim part that of Claim, and the claim never takes a row another token
// holds.
func testAckAndClaim(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	ctx := ctxT(t)
	f.insert(1, 3)
	f.insert(2, 2)
	tokA, a := f.claim(s, 1, 3)
	require.Len(t, a, 3)
	// Row a[1] is returned (as a reaper would) and re-claimed by B.
	n, err := f.cs.Release(ctx, tokA, []any{a[1].ID})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	tokB, b := f.claim(s, 1, 10)
	require.Len(t, b, 1)
	require.Equal(t, a[1].ID, b[0].ID)
	f.insert(1, 5)

	res, tokC, c, err := f.ackAndClaim(ctx, s, store.AckParams{Token: tokA, IDs: ids(a), Outcome: store.OutcomeDone}, 1, 4)
	require.NoError(t, err)
	require.Equal(t, []int{1}, res.Lost, "the lost row is reported, the others acked")
	require.Empty(t, res.Requeued)
	require.Equal(t, "SENT", f.row(a[0].ID).Status)
	require.Equal(t, "SENT", f.row(a[2].ID).Status)
	r := f.row(a[1].ID)
	require.Equal(t, "PROCESSING", r.Status, "the late ack must not overwrite the new owner's row")
	require.Equal(t, tokB, r.Token)
	require.Len(t, c, 4)
	all := f.rows()
	for i, got := range c {
		require.Equal(t, all[5+i].ID, got.ID, "the claim takes the lowest pending keys of its scope")
		r := f.row(got.ID)
		require.Equal(t, "PROCESSING", r.Status)
		require.Equal(t, tokC, r.Token)
		require.EqualValues(t, 1, got.Attempts)
		require.Equal(t, fmt.Sprintf("p%d", i), got.Payload)
	}

	// A versioned ack: the row whose version moved goes back to pending.
	_, err = f.db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s = %s + 1 WHERE %s = %v",
		f.q("cl_target"), f.q("version"), f.q("version"), f.q("id"), c[1].ID))
	require.NoError(t, err)
	versions := []int64{c[0].Version, c[1].Version, c[2].Version, c[3].Version}
	res, tokD, d, err := f.ackAndClaim(ctx, s, store.AckParams{Token: tokC, IDs: ids(c), Versions: versions, Outcome: store.OutcomeDone}, 1, 10)
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.Equal(t, []int{1}, res.Requeued)
	require.Equal(t, "SENT", f.row(c[0].ID).Status)
	// The claim takes the pending rows, the requeued one possibly among
	// them (it is pending once the ack ran), never a row B holds.
	for _, got := range d {
		require.NotEqual(t, b[0].ID, got.ID)
		require.Equal(t, tokD, f.row(got.ID).Token)
	}
	if len(d) == 1 {
		require.Equal(t, c[1].ID, d[0].ID)
	} else {
		require.Len(t, d, 2, "the last pending row, and the requeued one when the claim saw it")
	}

	// A retry with MaxAttempts parks the rows at their limit and reports
	// them; with nothing pending the claim is empty.
	res, _, e, err := f.ackAndClaim(ctx, s, store.AckParams{Token: tokD, IDs: ids(d), Outcome: store.OutcomeRetry, MaxAttempts: 1}, 1, 10)
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	parked := 0
	for i, got := range d {
		status := f.row(got.ID).Status
		if got.Attempts >= 1 {
			require.Equal(t, "FAILED", status)
			require.Contains(t, res.Parked, i)
			parked++
		}
	}
	require.Len(t, res.Parked, parked)
	require.Empty(t, e, "every row of task 1 is done, failed or held by B")

	// An empty ack is a plain claim; the other scope was never touched.
	res, _, t2, err := f.ackAndClaim(ctx, s, store.AckParams{}, 2, 10)
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.Len(t, t2, 2)
}

// testAckAndClaimFailure checks that the two parts commit together: when
// the claim part fails, the ack did not happen (its rows are still held and
// a plain Ack then acks them); when the ack part fails, no row is left
// claimed under the claim's token. The failures are real statement errors:
// a column that only one part writes is dropped.
func testAckAndClaimFailure(t *testing.T, h Harness, s dialect.Strategy) {
	ctx := ctxT(t)
	dropColumn := func(f *fixture, col string) {
		_, err := f.db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", f.q(f.spec.Table), f.q(col)))
		require.NoError(t, err)
	}
	// state reads the status and token of every row (not the attempts: a
	// case drops that column).
	state := func(f *fixture) map[any][2]string {
		r, err := f.db.QueryContext(ctx, fmt.Sprintf("SELECT %s, %s, %s FROM %s",
			f.q(f.spec.ID), f.q(f.spec.Status), f.q(f.spec.Token), f.q(f.spec.Table)))
		require.NoError(t, err)
		defer r.Close()
		out := map[any][2]string{}
		for r.Next() {
			var id, status any
			var token sql.NullString
			require.NoError(t, r.Scan(&id, &status, &token))
			out[norm(id)] = [2]string{fmt.Sprint(norm(status)), token.String}
		}
		require.NoError(t, r.Err())
		return out
	}
	check := func(f *fixture, tok string, want []claimed, failedTok string) {
		rows := state(f)
		for _, c := range want {
			require.Equal(t, [2]string{"PROCESSING", tok}, rows[c.ID], "row %v is still held by the ack's token", c.ID)
		}
		pending := 0
		for id, r := range rows {
			require.NotEqual(t, failedTok, r[1], "row %v stays claimed under the failed claim's token", id)
			if r[0] == "PENDING" {
				pending++
			}
		}
		require.Equal(t, 3, pending, "the rows the claim would have taken are pending")
	}

	// The claim part fails: it increments the attempts column, which an
	// ack to done never names.
	f := newFixture(t, h)
	f.insert(1, 6)
	tok, got := f.claim(s, 1, 3)
	dropColumn(f, "attempts")
	_, tokN, _, err := f.ackAndClaim(ctx, s, store.AckParams{Token: tok, IDs: ids(got), Outcome: store.OutcomeDone}, 1, 3)
	require.Error(t, err)
	require.NotErrorIs(t, err, dialect.ErrOutcomeUnknown)
	check(f, tok, got, tokN)
	res := f.ack(tok, ids(got), store.OutcomeDone, 0)
	require.Empty(t, res.Lost, "the ack of the failed ack+claim never happened")

	// The ack part fails: an ack to done clears the error column, which
	// the claim never names.
	g := newFixture(t, h, withLifecycle, func(c *dialect.ClaimTable) { c.Table = "cl_pipe_ackfail" })
	g.insert(1, 6)
	tok, got = g.claim(s, 1, 3)
	dropColumn(g, "last_error")
	_, tokN, _, err = g.ackAndClaim(ctx, s, store.AckParams{Token: tok, IDs: ids(got), Outcome: store.OutcomeDone}, 1, 3)
	require.Error(t, err)
	require.NotErrorIs(t, err, dialect.ErrOutcomeUnknown)
	check(g, tok, got, tokN)
	_, next := g.claim(s, 1, 10)
	require.Len(t, next, 3, "a plain claim takes them")
}

// testAckAndClaimConcurrent runs loops that each ack their batch and claim
// the next in one call until nothing is pending: no row is ever held by two
// batches at once, and every row is processed exactly once.
func testAckAndClaimConcurrent(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h)
	ctx := ctxT(t)
	const rows, loops, limit = 300, 4, 7
	f.insert(1, rows)
	var mu sync.Mutex
	holder := map[any]string{}
	processed := map[any]int{}
	var overlaps atomic.Int64
	take := func(tok string, got []claimed) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range got {
			if _, ok := holder[c.ID]; ok {
				overlaps.Add(1)
			}
			holder[c.ID] = tok
			processed[c.ID]++
		}
	}
	drop := func(got []claimed) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range got {
			delete(holder, c.ID)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, loops)
	for range loops {
		wg.Go(func() {
			tok, got := "", []claimed(nil)
			for first := true; first || len(got) > 0; first = false {
				drop(got) // before the ack is written
				ack := store.AckParams{Token: tok, IDs: ids(got), Outcome: store.OutcomeDone}
				res, next, c, err := f.ackAndClaim(ctx, s, ack, 1, limit)
				if err != nil {
					errs <- err
					return
				}
				if len(res.Lost) > 0 {
					errs <- fmt.Errorf("lost %v of %v", res.Lost, ids(got))
					return
				}
				take(next, c)
				tok, got = next, c
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Zero(t, overlaps.Load(), "a row was held by two batches at once")
	require.Len(t, processed, rows)
	for id, n := range processed {
		require.Equal(t, 1, n, "row %v processed %d times", id, n)
	}
	for _, r := range f.rows() {
		require.Equal(t, "SENT", r.Status)
	}
}

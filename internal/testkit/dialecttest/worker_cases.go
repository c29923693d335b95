package dialecttest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// testWorker checks the Worker column: every claim (and the claim of an
// ack+claim) writes its worker's name to the rows it marks, cut to the
// column's width in whole characters (learnt by VerifySchema, or from the
// catalog by a store that skipped it), acks leave the name of the last
// claimer, List returns it, and verification refuses a Worker column that
// cannot hold text.
func testWorker(t *testing.T, h Harness, s dialect.Strategy) {
	d, db := h.Open(t)
	ctx := ctxT(t)
	spec := dialect.ClaimTable{
		Table: "cl_worker", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at", Attempts: "attempts",
		Worker: "claimed_by", Scope: []string{"task_id"},
		Pending: st(t, "PENDING"), Processing: st(t, "PROCESSING"), Done: st(t, "SENT"), Failed: st(t, "FAILED"),
	}
	const width = 16
	def := store.ClaimTableDef(spec)
	for i := range def.Columns {
		if def.Columns[i].Name == "claimed_by" {
			def.Columns[i].Len = width
		}
	}
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, cs.VerifySchema(ctx))
	q := func(n string) string { s, _ := store.QuoteIdent(d, "test", n); return s }
	_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (1), (1), (1), (1), (1), (1)", q("cl_worker"), q("task_id")))
	require.NoError(t, err)
	workers := func() map[int64]string {
		rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT %s, COALESCE(%s, '') FROM %s", q("id"), q("claimed_by"), q("cl_worker")))
		require.NoError(t, err)
		defer rows.Close()
		out := map[int64]string{}
		for rows.Next() {
			var id int64
			var w string
			require.NoError(t, rows.Scan(&id, &w))
			out[id] = w
		}
		require.NoError(t, rows.Err())
		return out
	}
	scanKeys := func(keys *[]any) func(store.Scanner) error {
		return func(sc store.Scanner) error {
			var id any
			err := sc.Scan(&id, new(any))
			*keys = append(*keys, norm(id))
			return err
		}
	}
	claim := func(cs store.ClaimStore, worker string, limit int) (string, []any) {
		t.Helper()
		tok := store.NewToken()
		var keys []any
		_, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: limit, ScopeValues: []any{1}, Strategy: s, Worker: worker}, scanKeys(&keys))
		require.NoError(t, err)
		require.Len(t, keys, limit)
		return tok, keys
	}

	tokA, a := claim(cs, "host-a:41", 2)
	w := workers()
	for _, id := range a {
		require.Equal(t, "host-a:41", w[id.(int64)], "a claim writes its worker to the rows it marks")
	}
	listed, err := cs.List(ctx, &store.ListParams{Set: store.SetProcessing, ScopeValues: []any{1}, Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 2)
	for _, r := range listed {
		require.Equal(t, tokA, r.Token)
		require.Equal(t, "host-a:41", r.Worker, "List returns the worker of the row's claim")
	}

	// An ack+claim writes the new claim's worker, cut to the column's
	// width; the acked rows keep the name of their claimer.
	long := "worker-b-" + strings.Repeat("é", 20) // 29 characters
	var b []any
	_, _, err = cs.(store.AckClaimer).AckAndClaim(ctx, &store.AckClaimParams{
		Ack:   store.AckParams{Token: tokA, IDs: a, Outcome: store.OutcomeDone},
		Claim: store.ClaimParams{Token: store.NewToken(), Limit: 2, ScopeValues: []any{1}, Strategy: s, Worker: long},
	}, scanKeys(&b))
	require.NoError(t, err)
	require.Len(t, b, 2)
	w = workers()
	for _, id := range a {
		require.Equal(t, "host-a:41", w[id.(int64)], "an ack leaves the last claimer's name")
	}
	checkCut := func(got string) {
		t.Helper()
		require.True(t, utf8.ValidString(got), "%q", got)
		if utf8.RuneCountInString(got) < utf8.RuneCountInString(long) {
			require.Equal(t, width, utf8.RuneCountInString(got), "cut to the column's width: %q", got)
			require.True(t, strings.HasSuffix(got, "..."), got)
			require.True(t, strings.HasPrefix(long, strings.TrimSuffix(got, "...")), "whole characters: %q", got)
		} else {
			require.Equal(t, long, got, "an engine that does not bound the column keeps the name")
		}
	}
	for _, id := range b {
		checkCut(w[id.(int64)])
	}

	// A store that never verified the table learns the width itself
	// before its first claim writes a name.
	fresh, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	_, c := claim(fresh, long, 2)
	w = workers()
	for _, id := range c {
		checkCut(w[id.(int64)])
	}

	// A Worker column that cannot hold text is refused by verification.
	bad := spec
	bad.Table = "cl_worker_int"
	def = store.ClaimTableDef(bad)
	for i := range def.Columns {
		if def.Columns[i].Name == "claimed_by" {
			def.Columns[i] = store.ColumnDef{Name: "claimed_by", Type: store.TypeInt}
		}
	}
	ddl, err = store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(context.Background(), d, ddl))
	bs, err := store.OpenClaims(d, bad)
	require.NoError(t, err)
	err = bs.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.Contains(t, err.Error(), "Worker")
}

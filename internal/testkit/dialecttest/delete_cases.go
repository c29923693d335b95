package dialecttest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

func withDeleteDone(s *dialect.ClaimTable) { s.DeleteDone = true }

// has reports whether the fixture's table holds a row with key id.
func (f *fixture) has(id any) bool {
	f.t.Helper()
	for _, r := range f.rows() {
		if r.ID == norm(id) {
			return true
		}
	}
	return false
}

// archived reads the archive table's rows, by key, as rowState (with the
// payload in Token's place left out: status, token and attempts only).
func (f *fixture) archived() map[any]rowState {
	f.t.Helper()
	r, err := f.db.QueryContext(ctxT(f.t), fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s",
		f.q(f.spec.ID), f.q(f.spec.Status), f.q(f.spec.Token), f.q(f.spec.Attempts), f.q(f.spec.Archive)))
	require.NoError(f.t, err)
	defer r.Close()
	out := map[any]rowState{}
	for r.Next() {
		var id, status, token any
		var rs rowState
		require.NoError(f.t, r.Scan(&id, &status, &token, &rs.Attempts))
		rs.ID, rs.Status = norm(id), fmt.Sprint(norm(status))
		if token != nil {
			rs.Token = fmt.Sprint(norm(token))
		}
		out[rs.ID] = rs
	}
	require.NoError(f.t, r.Err())
	return out
}

// createArchive creates the fixture's archive table with the claim table's
// columns in the same order (the schema helpers' definition of the same
// description).
func (f *fixture) createArchive() {
	f.t.Helper()
	spec := f.spec
	spec.Table, spec.Archive, spec.DeleteDone = f.spec.Archive, "", false
	ddl, err := store.CreateTableDDL(f.d, store.ClaimTableDef(spec))
	require.NoError(f.t, err)
	require.NoError(f.t, store.ExecDDL(ctxT(f.t), f.d, ddl))
}

// testAckDeleteDone: with DeleteDone an ack to done deletes exactly the
// rows its token still holds, under the same conditions as the update it
// replaces: a lost row is reported and left to its new owner, a row whose
// version moved goes back to pending, failed and retried rows are kept; in
// a caller's transaction the delete commits or rolls back with it; the
// pipelined ack+claim deletes as well.
func testAckDeleteDone(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h, withDeleteDone)
	ctx := ctxT(t)
	f.insert(1, 4)
	tokA, a := f.claim(s, 1, 4)
	require.Len(t, a, 4)
	// a[1] is returned (as a reaper would) and re-claimed by B; a writer
	// changes a[2] while it is being flushed.
	n, err := f.cs.Release(ctx, tokA, []any{a[1].ID})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	tokB, b := f.claim(s, 1, 10)
	require.Len(t, b, 1)
	_, err = f.db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s = %s + 1 WHERE %s = %v",
		f.q("cl_target"), f.q("version"), f.q("version"), f.q("id"), literal(a[2].ID)))
	require.NoError(t, err)

	// Unversioned first: a[0] is deleted, a[1] is lost.
	res := f.ack(tokA, ids(a[:2]), store.OutcomeDone, 0)
	require.Equal(t, []int{1}, res.Lost)
	require.False(t, f.has(a[0].ID), "the acked row is deleted")
	r := f.row(a[1].ID)
	require.Equal(t, "PROCESSING", r.Status, "the late ack must not delete the new owner's row")
	require.Equal(t, tokB, r.Token)

	// Versioned: a[2] moved and goes back to pending, a[3] is deleted.
	res, err = f.cs.Ack(ctx, &store.AckParams{Token: tokA, IDs: ids(a[2:]), Versions: []int64{a[2].Version, a[3].Version}, Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.Equal(t, []int{0}, res.Requeued)
	require.Equal(t, "PENDING", f.row(a[2].ID).Status)
	require.False(t, f.has(a[3].ID))

	// A second ack of deleted rows reports them lost.
	res = f.ack(tokA, []any{a[0].ID, a[3].ID}, store.OutcomeDone, 0)
	require.Equal(t, []int{0, 1}, res.Lost)

	// Fails and retries keep their rows.
	tokC, c := f.claim(s, 1, 10)
	require.Len(t, c, 1)
	res = f.ack(tokC, ids(c), store.OutcomeFailed, 0)
	require.Empty(t, res.Lost)
	require.Equal(t, "FAILED", f.row(c[0].ID).Status)
	res = f.ack(tokB, ids(b), store.OutcomeRetry, 0)
	require.Empty(t, res.Lost)
	require.Equal(t, "PENDING", f.row(b[0].ID).Status)

	// In the caller's transaction: rolled back, the row stays held;
	// committed, it is gone; a row lost before is reported.
	tokD, d := f.claim(s, 1, 10)
	require.Len(t, d, 1)
	tx, err := f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	res, err = f.cs.AckTx(ctx, dialect.SQLTx(tx), &store.AckParams{Token: tokD, IDs: ids(d), Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.NoError(t, tx.Rollback())
	require.Equal(t, tokD, f.row(d[0].ID).Token, "the rolled-back delete left the row held")
	tx, err = f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	res, err = f.cs.AckTx(ctx, dialect.SQLTx(tx), &store.AckParams{Token: tokD, IDs: []any{d[0].ID, a[0].ID}, Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Equal(t, []int{1}, res.Lost)
	require.NoError(t, tx.Commit())
	require.False(t, f.has(d[0].ID))

	// Pipelined: the ack deletes, the claim claims, a lost key is reported.
	f.insert(1, 3)
	tokE, e := f.claim(s, 1, 2)
	require.Len(t, e, 2)
	res, tokF, g, err := f.ackAndClaim(ctx, s, store.AckParams{Token: tokE, IDs: []any{e[0].ID, e[1].ID, a[0].ID}, Outcome: store.OutcomeDone}, 1, 10)
	require.NoError(t, err)
	require.Equal(t, []int{2}, res.Lost)
	require.False(t, f.has(e[0].ID))
	require.False(t, f.has(e[1].ID))
	require.Len(t, g, 1)
	require.Equal(t, tokF, f.row(g[0].ID).Token)
	// Only the failed row and g's row remain.
	require.Len(t, f.rows(), 2)
}

// testAckArchive: with Archive an ack to done moves exactly the rows its
// token still holds to the archive table, as an ack without DeleteDone
// would have left them (done, no token), in one transaction with the ack;
// lost rows are reported and neither copied nor touched.
func testAckArchive(t *testing.T, h Harness, s dialect.Strategy) {
	f := newFixture(t, h, withDeleteDone)
	ctx := ctxT(t)
	f.spec.Archive = "cl_done"
	cs, err := store.OpenClaims(f.d, f.spec)
	require.NoError(t, err)
	err = cs.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "no archive table yet")
	require.Contains(t, err.Error(), "Archive")
	_, err = f.db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (%s INT)", f.q("cl_done"), f.q("id")))
	require.NoError(t, err)
	err = cs.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "an archive without the table's columns")
	_, err = f.db.ExecContext(ctx, fmt.Sprintf("DROP TABLE %s", f.q("cl_done")))
	require.NoError(t, err)
	f.createArchive()
	require.NoError(t, cs.VerifySchema(ctx))
	f.cs = cs
	f.insert(1, 4)
	tokA, a := f.claim(s, 1, 4)
	require.Len(t, a, 4)
	n, err := f.cs.Release(ctx, tokA, []any{a[1].ID})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	tokB, b := f.claim(s, 1, 10)
	require.Len(t, b, 1)

	res := f.ack(tokA, ids(a[:3]), store.OutcomeDone, 0)
	require.Equal(t, []int{1}, res.Lost)
	arch := f.archived()
	require.Len(t, arch, 2)
	for _, c := range []claimed{a[0], a[2]} {
		require.False(t, f.has(c.ID), "the acked row left the claim table")
		require.Equal(t, rowState{ID: c.ID, Status: "SENT", Attempts: 1}, arch[c.ID], "archived as done, without a token")
	}
	require.Equal(t, tokB, f.row(a[1].ID).Token, "the lost row is untouched")

	// Retries are not archived.
	res = f.ack(tokB, ids(b), store.OutcomeRetry, 0)
	require.Empty(t, res.Lost)
	require.Equal(t, "PENDING", f.row(b[0].ID).Status)
	require.Len(t, f.archived(), 2)

	// In the caller's transaction: a rollback undoes the move.
	tx, err := f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	res, err = f.cs.AckTx(ctx, dialect.SQLTx(tx), &store.AckParams{Token: tokA, IDs: ids(a[3:]), Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.NoError(t, tx.Rollback())
	require.Len(t, f.archived(), 2)
	require.Equal(t, tokA, f.row(a[3].ID).Token)

	// Pipelined: moved in the ack+claim's transaction.
	res, tokC, c, err := f.ackAndClaim(ctx, s, store.AckParams{Token: tokA, IDs: ids(a[3:]), Outcome: store.OutcomeDone}, 1, 10)
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.False(t, f.has(a[3].ID))
	require.Contains(t, f.archived(), norm(a[3].ID))
	require.Len(t, c, 1)
	require.Equal(t, b[0].ID, c[0].ID)

	// An archive that cannot take the rows fails the ack, which then
	// changes nothing.
	_, err = f.db.ExecContext(ctx, fmt.Sprintf("DROP TABLE %s", f.q("cl_done")))
	require.NoError(t, err)
	_, err = f.cs.Ack(context.WithoutCancel(ctx), &store.AckParams{Token: tokC, IDs: ids(c), Outcome: store.OutcomeDone})
	require.Error(t, err)
	r := f.row(c[0].ID)
	require.Equal(t, "PROCESSING", r.Status)
	require.Equal(t, tokC, r.Token)
}

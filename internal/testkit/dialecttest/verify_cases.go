package dialecttest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// testVerifySchema checks the catalog checks: a matching table passes; a
// missing table, a missing column or a token/owner column too short for a
// token (where the engine enforces lengths) is ErrInvalidConfig naming the
// field.
func testVerifySchema(t *testing.T, h Harness) {
	f := newFixture(t, h)
	ctx := ctxT(t)
	require.NoError(t, f.cs.VerifySchema(ctx))

	bad := f.spec
	bad.Columns = []string{"payload", "no_such_column"}
	s, err := store.OpenClaims(f.d, bad)
	require.NoError(t, err)
	err = s.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "Columns[1]")

	missing := f.spec
	missing.Table = "cl_no_such_table"
	s, err = store.OpenClaims(f.d, missing)
	require.NoError(t, err)
	require.ErrorIs(t, s.VerifySchema(ctx), dialect.ErrInvalidConfig)

	short := dialect.ClaimTable{Table: "cl_short_token", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Pending: st(t, "P"), Processing: st(t, "R"), Done: st(t, "D"), Failed: st(t, "F")}
	def := store.ClaimTableDef(short)
	for i := range def.Columns {
		if def.Columns[i].Name == "token" {
			def.Columns[i].Len = 8
		}
	}
	ddl, err := store.CreateTableDDL(f.d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, f.d, ddl))
	s, err = store.OpenClaims(f.d, short)
	require.NoError(t, err)
	err = s.VerifySchema(ctx)
	if f.d.Capabilities().Engine == dialect.EngineSQLite {
		require.NoError(t, err, "SQLite does not enforce VARCHAR lengths: the whole token is stored")
	} else {
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		require.ErrorContains(t, err, "Token")
	}

	_, ls := keyedLeases(t, h)
	require.NoError(t, ls.VerifySchema(ctx))
	// A lease spec naming a column the table lacks, on f's database.
	lt := store.KeyedLeaseTable("cl_lease", 64)
	lt.Fence = "no_fence_here"
	ls2, err := store.OpenLeases(f.d, lt)
	require.NoError(t, err)
	ddl, err = store.CreateTableDDL(f.d, store.LeaseTableDef("cl_lease", 64))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, f.d, ddl))
	err = ls2.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "Fence")
}

package tasklock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// TestAcquireVerifiesTheTable: a lease table whose owner column cannot hold
// a token, or that lacks a configured column, is refused before any lease
// is written (a non-strict MySQL would otherwise truncate owner tokens and
// every renewal would look like a lost lease).
func TestAcquireVerifiesTheTable(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		d := e.open(t)
		ctx := ctxT(t)
		def := store.LeaseTableDef("short_owner", 64)
		for i := range def.Columns {
			if def.Columns[i].Name == "owner" {
				def.Columns[i].Len = 8
			}
		}
		ddl, err := store.CreateTableDDL(d, def)
		require.NoError(t, err)
		require.NoError(t, store.ExecDDL(ctx, d, ddl))
		k, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable("short_owner"), TTL: time.Second})
		require.NoError(t, err)
		_, err = k.Acquire(ctx, "job")
		if d.Capabilities().Engine == dialect.EngineSQLite {
			require.NoError(t, err, "SQLite stores the whole token whatever the declared length")
		} else {
			require.ErrorIs(t, err, dialect.ErrInvalidConfig)
			require.ErrorContains(t, err, "Owner")
			st, err := k.Inspect(ctx, "job")
			require.NoError(t, err)
			require.False(t, st.Exists, "nothing was written")
		}

		spec := tasklock.KeyTable("short_owner")
		spec.Fence = "missing_fence"
		k2, err := tasklock.New(d, tasklock.Config{Table: spec, TTL: time.Second})
		require.NoError(t, err)
		err = k2.Verify(ctx)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		require.ErrorContains(t, err, "Fence")
	})
}

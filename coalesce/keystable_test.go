package coalesce_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestKeysTable: the keys table's description is the flushers' (same
// columns and statuses), names validated; a claimer built from it alone
// verifies against the database, counts the keys, lists a parked key with
// its error and unparks it, on every engine.
func TestKeysTable(t *testing.T) {
	_, err := coalesce.KeysTable(coalesce.Config{KeysTable: "keys; DROP TABLE x"})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "KeysTable")
	_, err = coalesce.KeysTable(coalesce.Config{KeysTable: "a", ChangesTable: "a"})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	named, err := coalesce.KeysTable(coalesce.Config{KeysTable: "ops.my_keys"})
	require.NoError(t, err)
	require.Equal(t, "ops.my_keys", named.Table)

	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		spec, err := coalesce.KeysTable(coalesce.Config{})
		require.NoError(t, err)
		require.Equal(t, coalesce.DefaultKeysTable, spec.Table)
		require.Equal(t, dialect.IDText, spec.IDKind)
		require.Equal(t, "last_error", spec.Error)

		co := newCoalescer(t, c, coalesce.Config{})
		f := newFlusher(t, c, co, coalesce.FlusherConfig{
			MaxAttempts: 1,
			Fold: func(context.Context, *sql.Tx, string, []coalesce.Record) error {
				return errors.New("ledger closed")
			},
		})
		require.Equal(t, f.ClaimConfig().ClaimTable.WithDefaults(), spec, "the flushers' description")

		cl, err := claim.New[struct{}](c.Dialect, claim.Config{ClaimTable: spec}, nil)
		require.NoError(t, err)
		require.NoError(t, cl.Verify(ctx))
		_, err = co.Accept(ctx, coalesce.Change{Key: "k1", EventID: "e1", Payload: []byte("1")})
		require.NoError(t, err)
		_, err = co.Accept(ctx, coalesce.Change{Key: "k2", EventID: "e2", Payload: []byte("1")})
		require.NoError(t, err)
		st, err := cl.TableStats(ctx)
		require.NoError(t, err)
		require.Equal(t, [2]int64{2, 0}, [2]int64{st.Pending, st.Failed})

		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := f.Flush(ctx)
			require.NoError(t, err)
			if st, err = cl.TableStats(ctx); err == nil && st.Failed == 2 {
				break
			}
			require.NoError(t, err)
			require.True(t, time.Now().Before(deadline), "keys not parked: %+v", st)
			time.Sleep(5 * time.Millisecond)
		}
		rows, err := cl.List(ctx, claim.Parked, 0, 10)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		for _, r := range rows {
			require.Contains(t, []any{"k1", "k2"}, r.ID)
			require.Contains(t, r.Error, "ledger closed")
			require.EqualValues(t, 1, r.Attempts)
		}
		n, err := cl.Unpark(ctx, true, "k1")
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		st, err = cl.TableStats(ctx)
		require.NoError(t, err)
		require.Equal(t, [2]int64{1, 1}, [2]int64{st.Pending, st.Failed})
		dirty, _, err := co.Backlog(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, dirty, "the unparked key is dirty again")
	})
}

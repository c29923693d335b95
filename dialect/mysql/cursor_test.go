package mysql_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestClaimKeyCursorFindsRowsBelowIt: claims start above the last key of
// the last full batch, yet a row that goes back to pending below that key
// (released, retried, reaped) is claimed before a claim reports fewer rows
// than asked, and no claim exceeds its limit. It runs on a pool from
// mysql.Open, so with client-side argument interpolation.
func TestClaimKeyCursorFindsRowsBelowIt(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	db, err := mysql.Open(ctx, dbtest.MySQLDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d := newDialect(t, db, dialect.Options{})
	for _, s := range []dialect.Strategy{dialect.StrategyTokenUpdate, dialect.StrategySkipLocked} {
		if !d.Capabilities().Supports(s) {
			continue
		}
		t.Run(s.String(), func(t *testing.T) {
			spec := claimSpec(t)
			spec.Table = "cur_" + map[dialect.Strategy]string{dialect.StrategyTokenUpdate: "tu", dialect.StrategySkipLocked: "sl"}[s]
			cs := createClaimTable(t, d, spec)
			insertRows(t, db, spec.Table, 1, 50)
			claim := func(tok string, limit int) []int64 {
				var ids []int64
				n, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: limit, ScopeValues: []any{1}, Strategy: s},
					func(sc store.Scanner) error {
						var id int64
						var payload string
						if err := sc.Scan(&id, new(any), &payload); err != nil {
							return err
						}
						ids = append(ids, id)
						return nil
					})
				require.NoError(t, err)
				require.Equal(t, n, len(ids))
				require.LessOrEqual(t, n, limit)
				return ids
			}
			first := claim("t1", 10) // full: the cursor moves to its last key
			require.Len(t, first, 10)
			second := claim("t2", 10) // full again, above the first
			require.Len(t, second, 10)
			require.Greater(t, second[0], first[9])
			// Rows of the first batch go back to pending, below the cursor.
			n, err := cs.Release(ctx, "t1", []any{first[2], first[5]})
			require.NoError(t, err)
			require.EqualValues(t, 2, n)
			seen := map[int64]int{}
			for _, id := range append(first, second...) {
				seen[id]++
			}
			for i := 0; ; i++ {
				require.Less(t, i, 20, "claims never drained the table")
				ids := claim(fmt.Sprintf("t%d", i+3), 7)
				for _, id := range ids {
					seen[id]++
					if i == 0 {
						require.Greater(t, id, second[9], "the claim after a full batch starts above the cursor")
					}
				}
				if len(ids) < 7 {
					break
				}
			}
			require.Len(t, seen, 50, "every row claimed")
			require.Equal(t, 2, seen[first[2]])
			require.Equal(t, 2, seen[first[5]])
			var pending int
			require.NoError(t, db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM `%s` WHERE `status` = 'PENDING'", spec.Table)).Scan(&pending))
			require.Zero(t, pending, "a short claim means nothing was pending")
		})
	}
}

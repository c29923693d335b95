package mysql_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestClaimKeepsRowsOfItsFirstStatement: a token-update claim with a key
// cursor is two autocommit statements, above the cursor and then from the
// start of the scope. When the second fails (here a trigger refuses it; on
// Galera it can exhaust its retries on certification conflicts), the rows
// the first one committed under the token are returned, not left
// processing under a token nobody holds until a reaper returns them.
func TestClaimKeepsRowsOfItsFirstStatement(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	db, err := mysql.Open(ctx, dbtest.MySQLDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d := newDialect(t, db, dialect.Options{})
	spec := claimSpec(t)
	spec.Table = "partial_claim"
	cs := createClaimTable(t, d, spec)
	insertRows(t, db, spec.Table, 1, 15)
	claim := func(tok string, limit int) ([]int64, error) {
		var ids []int64
		_, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: limit, ScopeValues: []any{1}, Strategy: dialect.StrategyTokenUpdate},
			func(sc store.Scanner) error {
				var id int64
				var payload string
				if err := sc.Scan(&id, new(any), &payload); err != nil { // key, attempts, payload
					return err
				}
				ids = append(ids, id)
				return nil
			})
		return ids, err
	}
	first, err := claim("t1", 10) // full: the cursor moves to its last key
	require.NoError(t, err)
	require.Len(t, first, 10)
	// Three rows go back to pending below the cursor, and a trigger refuses
	// to claim them.
	back := []any{first[0], first[1], first[2]}
	n, err := cs.Release(ctx, "t1", back)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	_, err = db.ExecContext(ctx, fmt.Sprintf("CREATE TRIGGER `partial_claim_refuse` BEFORE UPDATE ON `%s` FOR EACH ROW BEGIN "+
		"IF OLD.`id` IN (%d, %d, %d) AND NEW.`status` = 'PROCESSING' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF; END",
		spec.Table, first[0], first[1], first[2]))
	require.NoError(t, err)

	// Above the cursor: the 5 rows after the first batch, short; then from
	// the lowest key: refused.
	second, err := claim("t2", 10)
	require.NoError(t, err)
	require.Len(t, second, 5)
	for _, id := range second {
		require.Greater(t, id, first[9])
	}
	var held int
	require.NoError(t, db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM `%s` WHERE `token` = 't2' AND `status` = 'PROCESSING'", spec.Table)).Scan(&held))
	require.Equal(t, 5, held, "the claim returned every row its token holds")
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT `id` FROM `%s` WHERE `status` = 'PENDING' ORDER BY `id`", spec.Table))
	require.NoError(t, err)
	var pending []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		pending = append(pending, id)
	}
	require.NoError(t, rows.Err())
	require.True(t, slices.Equal(pending, []int64{first[0], first[1], first[2]}), "pending %v", pending)

	// With nothing above the cursor the refusal is the claim's error.
	_, err = claim("t3", 10)
	require.ErrorContains(t, err, "refused by the test")
}

package zombie_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/zombie"
)

// Stale lists the rows the next sweep takes, oldest claim first, and
// changes nothing: the sweep after it returns exactly those rows. A row
// claimed within the timeout is not listed.
func TestStale(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cc := jobsConfig(50)
		deadWorker(t, e, cc, 4) // claimed an hour ago
		insertRows(t, e, cc.Table, "PENDING", 2, 100)
		live, err := claim.New[struct{}](e.d, cc, nil)
		require.NoError(t, err)
		b, err := live.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, b.Len(), "claimed now")

		r, err := zombie.New(e.d, cc, zombie.Config{Timeout: time.Minute})
		require.NoError(t, err)
		stale, err := r.Stale(ctx, claim.MaxListLimit)
		require.NoError(t, err)
		require.Len(t, stale, 4)
		for i, row := range stale {
			require.NotEmpty(t, row.Token)
			require.NotEqual(t, b.Token(), row.Token, "the live batch is not stale")
			require.GreaterOrEqual(t, row.ClaimedAge, 59*time.Minute)
			if i > 0 {
				require.GreaterOrEqual(t, stale[i-1].ClaimedAge, row.ClaimedAge, "oldest claim first")
			}
		}
		two, err := r.Stale(ctx, 2)
		require.NoError(t, err)
		require.Len(t, two, 2)
		require.Equal(t, []any{stale[0].ID, stale[1].ID}, []any{two[0].ID, two[1].ID})
		_, err = r.Stale(ctx, 0)
		require.Error(t, err)

		res, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 4, res.Returned, "Stale changed nothing; the sweep takes what it listed")
		stale, err = r.Stale(ctx, claim.MaxListLimit)
		require.NoError(t, err)
		require.Empty(t, stale)
	})
}

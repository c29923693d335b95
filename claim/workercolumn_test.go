package claim_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// A claimer with a Worker column writes its Config.Worker (by default
// host:pid) to every row it claims, its scope views too, and List shows
// who holds a row in processing.
func TestWorkerColumn(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		c, cfg := jobSetup(t, e, s, 6, func(cfg *claim.Config) {
			cfg.Worker, cfg.ClaimTable.Worker, cfg.BatchSize = "sender-7", "claimed_by", 2
		})
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, b.Len())
		stuck, err := c.List(ctx, claim.Stuck, 0, 100)
		require.NoError(t, err)
		require.Len(t, stuck, 2)
		for _, r := range stuck {
			require.Equal(t, b.Token(), r.Token)
			require.Equal(t, "sender-7", r.Worker)
		}

		view, err := c.Scope(42)
		require.NoError(t, err)
		vb, err := view.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, vb.Len())

		cfg.Worker = ""
		def, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)
		db, err := def.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, db.Len())
		host, _ := os.Hostname()
		want := map[string]string{b.Token(): "sender-7", vb.Token(): "sender-7", db.Token(): host + ":" + strconv.Itoa(os.Getpid())}
		stuck, err = c.List(ctx, claim.Stuck, 0, 100)
		require.NoError(t, err)
		require.Len(t, stuck, 6)
		for _, r := range stuck {
			require.Equal(t, want[r.Token], r.Worker, "row %v", r.ID)
		}
		require.NoError(t, b.AckAll(ctx))
		require.NoError(t, vb.AckAll(ctx))
		require.NoError(t, db.AckAll(ctx))
	})
}

func TestWorkerTooLong(t *testing.T) {
	t.Parallel()
	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Worker: "claimed_by"}, Worker: strings.Repeat("w", claim.MaxWorkerLen+1)}
	err := cfg.Validate()
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "Worker")
	cfg.Worker = cfg.Worker[1:]
	require.NoError(t, cfg.Validate())
}

package claim_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMissingIndexWarning: the first claim of a configuration warns once
// when the recommended indexes are missing, and not at all once they exist.
func TestMissingIndexWarning(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		var logs syncBuffer
		cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: tableName("noidx")}, Strategy: s,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		spec, err := cfg.Resolve()
		require.NoError(t, err)
		ddl, err := store.CreateTableDDL(e.d, store.ClaimTableDef(spec))
		require.NoError(t, err)
		require.NoError(t, store.ExecDDL(ctx, e.d, ddl))

		c, err := claim.New[struct{}](e.d, cfg, nil)
		require.NoError(t, err)
		missing, err := c.MissingIndexes(ctx)
		require.NoError(t, err)
		require.Equal(t, claim.StoreOf(c).IndexDDL(), missing)
		for range 2 {
			_, err = c.Claim(ctx)
			require.NoError(t, err)
		}
		require.Equal(t, 1, strings.Count(logs.String(), "recommended indexes are missing"), logs.String())
		// Another claimer of the same configuration (built per request,
		// say) does not warn again.
		again, err := claim.New[struct{}](e.d, cfg, nil)
		require.NoError(t, err)
		_, err = again.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(logs.String(), "recommended indexes are missing"), "one warning per configuration")

		require.NoError(t, store.ExecDDL(ctx, e.d, claim.StoreOf(c).IndexDDL()))
		c, err = claim.New[struct{}](e.d, cfg, nil)
		require.NoError(t, err)
		_, err = c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(logs.String(), "recommended indexes are missing"), logs.String())
	})
}

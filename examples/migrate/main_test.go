package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
)

// The migrations apply on every engine, once: a second run applies
// nothing; the story's tables then serve a claimer and a task lease with
// every recommended index present.
func TestMigrations(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := testengine.Open(t, e, 4)
			var out bytes.Buffer
			require.NoError(t, apply(ctx, c.DB, e.Name, &out))
			require.Equal(t, "applied 0001_cron_tables.sql\napplied 0002_claimlock.sql\n", out.String())
			out.Reset()
			require.NoError(t, apply(ctx, c.DB, e.Name, &out))
			require.Empty(t, out.String())

			cfg := claim.Config{ClaimTable: dialect.ClaimTable{
				Table: "xxx_task_target", Token: "cron_token", ClaimedAt: "send_at", Attempts: "attempts",
				RunAt: "run_at", Error: "last_error", Scope: []string{"task_id"}, Columns: []string{"openid"},
				Done: dialect.StatusString("SENT"),
			}, ScopeValues: []any{1}}
			cl, err := claim.New(c.Dialect, cfg, func(s *string) []any { return []any{s} })
			require.NoError(t, err)
			require.NoError(t, cl.Verify(ctx))
			missing, err := cl.MissingIndexes(ctx)
			require.NoError(t, err)
			require.Empty(t, missing)
			lt := tasklock.TaskTable("xxx_task")
			lt.Fence = "lock_fence"
			k, err := tasklock.New(c.Dialect, tasklock.Config{Table: lt, TTL: time.Minute})
			require.NoError(t, err)
			require.NoError(t, k.Verify(ctx))
		})
	}
}

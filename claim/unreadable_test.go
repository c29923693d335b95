package claim_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// A claimed row whose column holds a NULL that the row type cannot hold
// does not block its scope: the batch's other rows proceed, and the bad row
// is parked at once (reading it again would fail the same way, whatever
// MaxAttempts says) and reported.
func TestUnreadableRowIsFailedAlone(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		const good, maxAttempts = 29, 3
		cfg := claim.Config{
			ClaimTable: dialect.ClaimTable{Table: tableName("nully"), Scope: []string{"task_id"},
				Attempts: "attempts", Columns: []string{"payload"}},
			ScopeValues: []any{1}, Strategy: s, BatchSize: 10, MaxAttempts: maxAttempts,
		}
		createTable(t, e, cfg)
		insertRows(t, e, cfg.Table, []string{"task_id", "payload"}, good+1, func(i int) []any {
			if i == 4 {
				return []any{1, nil}
			}
			return []any{1, fmt.Sprintf("p%d", i)}
		})
		c, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)
		var done int
		var bad []any
		for range 20 {
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			for _, u := range b.Unreadable() {
				bad = append(bad, u.ID)
				require.Error(t, u.Err)
			}
			if b.Len() == 0 && len(b.Unreadable()) == 0 {
				break
			}
			require.NoError(t, b.AckAll(ctx))
			done += b.Len()
		}
		require.Equal(t, good, done, "every good row was processed")
		require.Len(t, bad, 1, "the bad row was parked at once: reading it again would fail the same way")
		for _, id := range bad {
			require.Equal(t, int64(5), id)
		}
		requireStats(t, c, 0, 0, good, 1)

		// A pointer field reads the NULL.
		type nullable struct{ Payload *string }
		pc, err := claim.New(e.d, claim.Config{ClaimTable: cfg.ClaimTable, ScopeValues: []any{1}, Strategy: s},
			func(r *nullable) []any { return []any{&r.Payload} })
		require.NoError(t, err)
		var stored sql.NullString
		require.NoError(t, e.raw.QueryRowContext(ctx, fmt.Sprintf("SELECT status FROM %s WHERE id = 5", cfg.Table)).Scan(&stored))
		require.Equal(t, "FAILED", stored.String)
		_, err = e.raw.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET status = 'PENDING', attempts = 0 WHERE id = 5", cfg.Table))
		require.NoError(t, err)
		b, err := pc.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, b.Len())
		require.Empty(t, b.Unreadable())
		require.Nil(t, b.Rows()[0].Value.Payload)
		require.NoError(t, b.AckAll(ctx))
	})
}

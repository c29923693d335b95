package chaos

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestAckAndClaimUnknownOutcome lets a pipelined ack+claim reach the server
// and commit there, and holds its reply until the caller's deadline, as a
// connection lost at COMMIT would. The call reports an unknown outcome and
// no next batch; the rows its claim took are released at once instead of
// waiting for the reaper; a repeated ack reports every row the unknown
// write acked as lost; and the rest of the table is claimed and acked
// exactly once. Calls return by their deadline although the server never
// answers, even when the release of a failed claim stalls as well. On
// PostgreSQL the ack+claim is one statement, held once its arguments (the
// batch's token) are sent; on MySQL/MariaDB it is a transaction, held once
// its COMMIT is sent.
func TestAckAndClaimUnknownOutcome(t *testing.T) {
	t.Parallel()
	for _, name := range []string{testengine.Postgres, testengine.PostgresStdlib, testengine.MySQL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			spec := dialect.ClaimTable{Table: "stall_pipe", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
				Scope: []string{"task_id"}, Pending: dialect.StatusString("PENDING"),
				Processing: dialect.StatusString("PROCESSING"), Done: dialect.StatusString("SENT"), Failed: dialect.StatusString("FAILED")}
			direct, pc, p := stallSetup(t, name, spec)
			const rows, batch = 30, 10
			for i := range rows {
				_, err := direct.DB.ExecContext(ctx, fmt.Sprintf("INSERT INTO stall_pipe (id, task_id) VALUES (%d, 1)", i+1))
				require.NoError(t, err)
			}
			count := func(where string) int {
				t.Helper()
				var n int
				require.NoError(t, direct.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM stall_pipe WHERE "+where).Scan(&n))
				return n
			}

			c, err := claim.New[struct{}](pc.Dialect, claim.Config{ClaimTable: spec, ScopeValues: []any{1}, BatchSize: batch}, nil)
			require.NoError(t, err)
			cs, err := store.OpenClaims(pc.Dialect, spec)
			require.NoError(t, err)
			_, piped := cs.(store.AckClaimer)
			require.True(t, piped, "the store pipelines ack+claim, so the test does not measure the fallback")

			b, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, batch, b.Len())

			p.match = []byte(b.Token())
			if name == testengine.MySQL {
				// The COMMIT statement (a COM_QUERY packet), not the
				// isolation level a new connection sets.
				p.match = []byte("\x03COMMIT")
			}
			p.mode.Store(holdAfterMatch)
			err = within(t, 1500*time.Millisecond, func(ctx context.Context) error {
				next, err := c.AckAllAndClaim(ctx, b)
				if next != nil {
					return fmt.Errorf("a next batch of %d rows came with the error %v", next.Len(), err)
				}
				return err
			})
			p.mode.Store(passReplies)
			require.ErrorIs(t, err, dialect.ErrOutcomeUnknown, "the write reached the server and its reply never came: %v", err)

			// The write committed on the server: the batch's rows are sent,
			// and the rows its claim took go back to pending at once (in
			// the background: the call returned by its deadline), not after
			// the reaper's timeout.
			require.Equal(t, batch, count("status = 'SENT'"), "the ack committed")
			require.Eventually(t, func() bool { return count("status = 'PROCESSING'") == 0 }, 10*time.Second, 20*time.Millisecond,
				"the unknown claim's rows are released, not left for the reaper")
			require.Equal(t, rows-batch, count("status = 'PENDING' AND token IS NULL"))

			// The batch still holds its rows as far as it knows; acking them
			// again finds each one written by the unknown write: lost.
			err = b.AckAll(ctx)
			var lost *claim.LostError
			require.True(t, errors.As(err, &lost), "a repeated ack reports the rows as lost: %v", err)
			require.Len(t, lost.IDs, batch)
			require.Equal(t, batch, count("status = 'SENT'"))

			// The rest is claimed and acked exactly once, pipelined again.
			seen := map[int64]bool{}
			next, err := c.Claim(ctx)
			require.NoError(t, err)
			for next.Len() > 0 {
				for _, id := range next.IDs() {
					k := id.(int64)
					require.False(t, seen[k], "row %d claimed twice", k)
					require.Greater(t, k, int64(batch), "row %d of the first batch claimed again", k)
					seen[k] = true
				}
				next, err = c.AckAllAndClaim(ctx, next)
				require.NoError(t, err)
			}
			require.Len(t, seen, rows-batch)
			require.Equal(t, rows, count("status = 'SENT'"))

			// Every reply held: a failed claim's release stalls too, and
			// the claim still returns by its deadline (the release goes on
			// in the background).
			p.mode.Store(holdReplies)
			err = within(t, time.Second, func(ctx context.Context) error {
				_, err := c.Claim(ctx)
				return err
			})
			p.mode.Store(passReplies)
			require.Error(t, err)
		})
	}
}

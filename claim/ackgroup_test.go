package claim_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/await"
	"github.com/claimlock/claimlock/observe"
)

// TestAckGroup: Ack calls made while an ack statement of the batch is in
// flight wait for it and are written together by the next statement; each
// call gets its own rows' outcome (a lost row to the call that acked it), a
// waiting call whose context ends withdraws without writing, and a row in a
// call not yet written cannot be acked twice.
func TestAckGroup(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		var statements, rows atomic.Int64
		c, cfg := jobSetup(t, e, s, 9, func(cfg *claim.Config) {
			watch(cfg, func(ev observe.Event) {
				if ev.Op == claim.OpAck {
					statements.Add(1)
					rows.Add(int64(ev.Acked + ev.Requeued + ev.Lost))
				}
			})
		})
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 9, b.Len())
		ids := make([]any, 9)
		for i, r := range b.Rows() {
			ids[i] = r.ID
		}

		// Another writer holds row 0 (its ack statement waits for it) and
		// has taken row 5 from the batch: reaped and claimed again.
		tx, err := e.raw.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		_, err = tx.ExecContext(ctx, e.rebind("UPDATE "+cfg.Table+" SET payload = payload WHERE id = ?"), ids[0])
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, e.rebind("UPDATE "+cfg.Table+" SET token = 'someone-else' WHERE id = ?"), ids[5])
		require.NoError(t, err)

		errs := make([]error, 9)
		var wg sync.WaitGroup
		ack := func(ctx context.Context, i int) {
			wg.Go(func() { errs[i] = b.Ack(ctx, ids[i]) })
		}
		ack(ctx, 0)
		await.Until(t, "the first ack in flight", 10*time.Second, func() (bool, string) {
			in, q := claim.AckGroupState(b)
			return in && q == 0, fmt.Sprintf("in flight %v, queued %d", in, q)
		})
		for i := 1; i < 8; i++ {
			ack(ctx, i)
		}
		leave, cancel := context.WithCancel(ctx)
		ack(leave, 8)
		await.Until(t, "8 acks queued behind the first", 10*time.Second, func() (bool, string) {
			in, q := claim.AckGroupState(b)
			return in && q == 8, fmt.Sprintf("in flight %v, queued %d", in, q)
		})
		// A row already in a call not written yet is not held for another.
		require.ErrorIs(t, b.Ack(ctx, ids[3]), claim.ErrNotHeld)
		require.ErrorIs(t, b.Fail(ctx, ids[3], errors.New("x")), claim.ErrNotHeld)
		cancel()
		await.Until(t, "the cancelled call withdrawn", 10*time.Second, func() (bool, string) {
			_, q := claim.AckGroupState(b)
			return q == 7, fmt.Sprintf("queued %d", q)
		})
		require.Equal(t, int64(0), statements.Load(), "nothing written while the first statement waits")
		require.NoError(t, tx.Commit())
		wg.Wait()

		for i, err := range errs {
			switch i {
			case 5:
				var le *claim.LostError
				require.ErrorIs(t, err, dialect.ErrClaimLost)
				require.ErrorAs(t, err, &le)
				require.Equal(t, []any{ids[5]}, le.IDs, "the lost row, to the call that acked it")
			case 8:
				require.ErrorIs(t, err, context.Canceled)
			default:
				require.NoError(t, err, "row %d", i)
			}
		}
		require.Equal(t, int64(2), statements.Load(), "the first call's statement, then one for the 7 that waited")
		require.Equal(t, int64(8), rows.Load())
		require.Equal(t, []any{ids[5]}, b.Lost())
		require.Equal(t, []any{ids[8]}, b.Unacked(), "the withdrawn call wrote nothing")
		requireStats(t, c, 0, 2, 7, 0) // row 5 is someone else's (processing), row 8 still held

		require.NoError(t, b.Ack(ctx, ids[8]), "the withdrawn row can be acked again")
		require.Equal(t, int64(3), statements.Load())
		requireStats(t, c, 0, 1, 8, 0)
		require.ErrorIs(t, b.Err(), claim.ErrBatchDone, "its last write found no row lost")
	})
}

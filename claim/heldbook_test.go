package claim_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// heldIDs returns the keys of b's rows, in key order.
func heldIDs(b *claim.Held[job]) []any {
	var ids []any
	for _, r := range b.Rows() {
		ids = append(ids, r.ID)
	}
	return ids
}

// requireHeldOpen checks that the rows b counts open are want, and that
// they are the rows its held claim holds open.
func requireHeldOpen(t *testing.T, b *claim.Held[job], want []any, msg string) {
	t.Helper()
	book, held := claim.HeldOpen(b)
	if len(book) == 0 {
		book = nil // as held and want say none
	}
	require.Equal(t, want, book, "the batch's open rows: %s", msg)
	require.Equal(t, held, book, "the batch's open rows are those its held claim holds: %s", msg)
}

// TestHeldOpenRowsFollowTheStore: a held batch's open rows are those its
// held claim holds, after acks, fails, acks of keys settled already, a
// savepoint rollback (every row open again, and the database undone with
// it), and a loss (none).
func TestHeldOpenRowsFollowTheStore(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		c, cfg := jobSetup(t, e, dialect.StrategySkipLocked, 5, func(cfg *claim.Config) { cfg.BatchSize = 5 })
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 1})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var calls atomic.Int64
		checked := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- h.Run(ctx, func(ctx context.Context, b *claim.Held[job]) error {
				if calls.Add(1) > 1 {
					return nil // the rows failed below, held again: acked
				}
				defer close(checked)
				ids := b.Rows()
				require.Len(t, ids, 5)
				id := func(i int) any { return ids[i].ID }
				requireHeldOpen(t, b, []any{id(0), id(1), id(2), id(3), id(4)}, "held")
				require.NoError(t, b.Ack(ctx, id(0)))
				requireHeldOpen(t, b, []any{id(1), id(2), id(3), id(4)}, "after an ack")
				require.NoError(t, b.Fail(ctx, id(1), errors.New("boom")))
				requireHeldOpen(t, b, []any{id(2), id(3), id(4)}, "after a fail")
				require.ErrorIs(t, b.Ack(ctx, id(0), id(2)), dialect.ErrClaimLost, "a row acked already")
				requireHeldOpen(t, b, []any{id(3), id(4)}, "after an ack of one settled and one open row")
				_, err := b.Exec(ctx, "UPDATE no_such_table SET x = 1")
				require.Error(t, err)
				requireHeldOpen(t, b, []any{id(0), id(1), id(2), id(3), id(4)}, "after the savepoint rollback")
				return err
			})
		}()
		<-checked
		awaitStats(t, "the five rows to be done", c.Stats, func(st claim.Stats) bool { return st.Done == 5 }, nil)
		cancel()
		require.NoError(t, <-done)
		require.EqualValues(t, 2, calls.Load())
		var attempts int
		require.NoError(t, e.raw.QueryRowContext(context.Background(), "SELECT SUM(attempts) FROM "+cfg.Table+" WHERE task_id = 42").Scan(&attempts))
		require.Equal(t, 5, attempts, "one failure each: the fail before the savepoint rollback was undone with it")

		// A loss outside Run: a failed statement rolls the batch back.
		c, _ = jobSetup(t, e, dialect.StrategySkipLocked, 5, func(cfg *claim.Config) { cfg.BatchSize = 5 })
		h, err = c.Holder(claim.HoldConfig{MaxInFlight: 1})
		require.NoError(t, err)
		b, err := h.Hold(context.Background())
		require.NoError(t, err)
		ids := heldIDs(b)
		require.Len(t, ids, 5)
		require.NoError(t, b.Ack(context.Background(), ids[0]))
		requireHeldOpen(t, b, ids[1:], "after an ack")
		_, err = b.Exec(context.Background(), "UPDATE no_such_table SET x = 1")
		require.ErrorIs(t, err, dialect.ErrClaimLost)
		requireHeldOpen(t, b, nil, "after the loss")
		b, err = h.Hold(context.Background())
		require.NoError(t, err)
		require.Equal(t, ids, heldIDs(b), "the lost batch's ack was rolled back with it")
		require.NoError(t, b.Rollback(context.Background()))
	})
}

// TestHeldAckWrongKeyType: an ack or a fail of a key of the wrong type is
// refused with an error matching dialect.ErrInvalidConfig, not
// dialect.ErrClaimLost, and the batch goes on: on its own and under
// Holder.Run, where it does not fail the batch either.
func TestHeldAckWrongKeyType(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		c, _ := jobSetup(t, e, dialect.StrategySkipLocked, 4, func(cfg *claim.Config) { cfg.BatchSize = 2 })
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 1})
		require.NoError(t, err)
		bg := context.Background()
		refused := func(err error) {
			t.Helper()
			require.ErrorIs(t, err, dialect.ErrInvalidConfig)
			require.NotErrorIs(t, err, dialect.ErrClaimLost)
		}

		b, err := h.Hold(bg)
		require.NoError(t, err)
		ids := heldIDs(b)
		require.Len(t, ids, 2)
		refused(b.Ack(bg, "not-a-number"))
		refused(b.Ack(bg, ids[0], 1.5))
		refused(b.Fail(bg, "not-a-number", errors.New("boom")))
		requireHeldOpen(t, b, ids, "nothing was written")
		require.NoError(t, b.Context().Err(), "the batch goes on")
		require.NoError(t, b.Ack(bg, ids...))
		require.NoError(t, b.Commit(bg))
		requireStats(t, c, 2, 0, 2, 0)

		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- h.Run(ctx, func(ctx context.Context, b *claim.Held[job]) error {
				refused(b.Ack(ctx, "not-a-number"))
				refused(b.Fail(ctx, struct{}{}, errors.New("boom")))
				return b.Ack(ctx, heldIDs(b)...)
			})
		}()
		awaitStats(t, "the other rows to be done", c.Stats, func(st claim.Stats) bool { return st.Done == 4 }, nil)
		cancel()
		require.NoError(t, <-done)
		requireStats(t, c, 0, 0, 4, 0)
	})
}

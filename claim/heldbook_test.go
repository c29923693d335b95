package claim_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// heldIDs returns the keys of b's rows, in key order.
func heldIDs[T any](b *claim.Held[T]) []any {
	var ids []any
	for _, r := range b.Rows() {
		ids = append(ids, r.ID)
	}
	return ids
}

// runHolder runs h.Run with handle on a goroutine and returns the function
// that stops it and returns its error. A test that ends early stops it too,
// so that no held batch keeps the table locked behind it.
func runHolder(t *testing.T, h *claim.Holder[job], handle func(context.Context, *claim.Held[job]) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		err = h.Run(ctx, handle)
	}()
	stop = func() error {
		cancel()
		<-finished
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// checkHeldOpen checks that the rows b counts open are want, and that
// they are the rows its held claim holds open. It does not stop the test:
// a handler of Holder.Run calls it on Run's goroutine.
func checkHeldOpen(t *testing.T, b *claim.Held[job], want []any, msg string) {
	t.Helper()
	book, held := claim.HeldOpen(b)
	if len(book) == 0 {
		book = nil // as held and want say none
	}
	assert.Equal(t, want, book, "the batch's open rows: %s", msg)
	assert.Equal(t, held, book, "the batch's open rows are those its held claim holds: %s", msg)
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
		var calls atomic.Int64
		checked := make(chan struct{})
		stop := runHolder(t, h, func(ctx context.Context, b *claim.Held[job]) error {
			if calls.Add(1) > 1 {
				return nil // the rows failed below, held again: acked
			}
			defer close(checked)
			ids := b.Rows()
			if !assert.Len(t, ids, 5) {
				return nil
			}
			id := func(i int) any { return ids[i].ID }
			checkHeldOpen(t, b, []any{id(0), id(1), id(2), id(3), id(4)}, "held")
			assert.NoError(t, b.Ack(ctx, id(0)))
			checkHeldOpen(t, b, []any{id(1), id(2), id(3), id(4)}, "after an ack")
			assert.NoError(t, b.Fail(ctx, id(1), errors.New("boom")))
			checkHeldOpen(t, b, []any{id(2), id(3), id(4)}, "after a fail")
			assert.ErrorIs(t, b.Ack(ctx, id(0), id(2)), dialect.ErrClaimLost, "a row acked already")
			checkHeldOpen(t, b, []any{id(3), id(4)}, "after an ack of one settled and one open row")
			_, err := b.Exec(ctx, "UPDATE no_such_table SET x = 1")
			assert.Error(t, err)
			checkHeldOpen(t, b, []any{id(0), id(1), id(2), id(3), id(4)}, "after the savepoint rollback")
			return err
		})
		<-checked
		require.False(t, t.Failed(), "the checks in the handler failed")
		awaitStats(t, "the five rows to be done", c.Stats, func(st claim.Stats) bool { return st.Done == 5 }, nil)
		require.NoError(t, stop())
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
		t.Cleanup(func() { _ = b.Rollback(context.Background()) }) // a test that stops early leaves no lock
		ids := heldIDs(b)
		require.Len(t, ids, 5)
		require.NoError(t, b.Ack(context.Background(), ids[0]))
		checkHeldOpen(t, b, ids[1:], "after an ack")
		_, err = b.Exec(context.Background(), "UPDATE no_such_table SET x = 1")
		require.ErrorIs(t, err, dialect.ErrClaimLost)
		checkHeldOpen(t, b, nil, "after the loss")
		b2, err := h.Hold(context.Background())
		require.NoError(t, err)
		t.Cleanup(func() { _ = b2.Rollback(context.Background()) })
		require.Equal(t, ids, heldIDs(b2), "the lost batch's ack was rolled back with it")
		require.NoError(t, b2.Rollback(context.Background()))
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
		refused := func(err error) { // also on Run's goroutine: does not stop the test
			t.Helper()
			assert.ErrorIs(t, err, dialect.ErrInvalidConfig)
			assert.NotErrorIs(t, err, dialect.ErrClaimLost)
		}

		b, err := h.Hold(bg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Rollback(bg) }) // a test that stops early leaves no lock
		ids := heldIDs(b)
		require.Len(t, ids, 2)
		refused(b.Ack(bg, "not-a-number"))
		refused(b.Ack(bg, ids[0], 1.5))
		refused(b.Fail(bg, "not-a-number", errors.New("boom")))
		checkHeldOpen(t, b, ids, "nothing was written")
		require.False(t, t.Failed())
		require.NoError(t, b.Context().Err(), "the batch goes on")
		require.NoError(t, b.Ack(bg, ids...))
		require.NoError(t, b.Commit(bg))
		requireStats(t, c, 2, 0, 2, 0)

		var calls atomic.Int64
		stop := runHolder(t, h, func(ctx context.Context, b *claim.Held[job]) error {
			if calls.Add(1) > 1 {
				return nil
			}
			refused(b.Ack(ctx, "not-a-number"))
			refused(b.Fail(ctx, struct{}{}, errors.New("boom")))
			return b.Ack(ctx, heldIDs(b)...)
		})
		awaitStats(t, "the other rows to be done", c.Stats, func(st claim.Stats) bool { return st.Done == 4 || t.Failed() }, nil)
		require.NoError(t, stop())
		require.EqualValues(t, 1, calls.Load(), "the batch was not failed: its rows did not come back")
		requireStats(t, c, 0, 0, 4, 0)
	})
}

// TestHeldFailRules: a held batch fails rows by the rules Batch.Fail
// follows: the failure's text stored, a RetryAfter's delay, a Park, and
// otherwise Config.Backoff, given the attempt this failure counts (a held
// claim counts none); a SnoozeFor is refused and the batch goes on. Under
// Holder.Run a failed handler fails every row so: each with its own
// backoff, or all with the error's one delay.
func TestHeldFailRules(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		c, _ := jobSetup(t, e, dialect.StrategySkipLocked, 4, func(cfg *claim.Config) {
			withLifecycle(cfg)
			cfg.BatchSize, cfg.MaxAttempts = 4, 5
			cfg.Backoff = func(attempts int) time.Duration { return time.Duration(attempts) * time.Hour }
		})
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 1})
		require.NoError(t, err)
		scheduled := func(id any, in time.Duration, msg string, attempts int64) {
			t.Helper()
			got, info := scheduledIn(t, c, id)
			require.InDelta(t, in.Seconds(), got.Seconds(), 60, "row %v", id)
			require.Equal(t, msg, info.Error, "row %v", id)
			require.Equal(t, attempts, info.Attempts, "row %v", id)
		}

		b, err := h.Hold(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Rollback(ctx) }) // a test that stops early leaves no lock
		ids := heldIDs(b)
		require.Len(t, ids, 4)
		require.NoError(t, b.Fail(ctx, ids[0], errors.New("boom")))
		require.NoError(t, b.Fail(ctx, ids[1], claim.RetryAfter(90*time.Minute, errors.New("429"))))
		require.NoError(t, b.Fail(ctx, ids[2], claim.Park(errors.New("poison"))))
		require.ErrorIs(t, b.Fail(ctx, ids[3], claim.SnoozeFor(time.Minute)), dialect.ErrNotSupported)
		require.NoError(t, b.Commit(ctx), "the refused snooze did not end the batch")
		scheduled(ids[0], time.Hour, "boom", 1)
		scheduled(ids[1], 90*time.Minute, "429", 1)
		parked, err := c.List(ctx, claim.Parked, 0, 10)
		require.NoError(t, err)
		require.Len(t, parked, 1)
		require.Equal(t, ids[2], parked[0].ID)
		require.Equal(t, "poison", parked[0].Error)
		requireStats(t, c, 3, 0, 0, 1) // two waiting, ids[3] untouched

		// Holder.Run: a handler's error fails every row with its own backoff,
		// then a RetryAfter fails them all with its delay.
		for _, tc := range []struct {
			err  error
			want func(id any)
		}{
			{errors.New("all"), func(id any) {
				if id == ids[3] {
					scheduled(id, time.Hour, "all", 1)
				} else {
					scheduled(id, 2*time.Hour, "all", 2)
				}
			}},
			{claim.RetryAfter(30*time.Minute, errors.New("later")), func(id any) {
				att := int64(3)
				if id == ids[3] {
					att = 2
				}
				scheduled(id, 30*time.Minute, "later", att)
			}},
		} {
			_, err := c.RetryNow(ctx)
			require.NoError(t, err)
			var calls atomic.Int64
			handled := make(chan []any, 1)
			stop := runHolder(t, h, func(ctx context.Context, b *claim.Held[job]) error {
				if calls.Add(1) == 1 {
					handled <- heldIDs(b)
				}
				return tc.err
			})
			got := <-handled
			require.NoError(t, stop(), "Run lets the batch in flight commit")
			require.Equal(t, []any{ids[0], ids[1], ids[3]}, got)
			require.EqualValues(t, 1, calls.Load(), "the failed rows wait for their delay")
			for _, id := range got {
				tc.want(id)
			}
		}
	})
}

// TestNegativeBackoff: a Config.Backoff that returns a negative delay
// retries the row at once, for a held batch as for a batch (it was
// refused for a held one).
func TestNegativeBackoff(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		c, _ := jobSetup(t, e, dialect.StrategySkipLocked, 2, func(cfg *claim.Config) {
			withLifecycle(cfg)
			cfg.BatchSize, cfg.MaxAttempts = 1, 5
			cfg.Backoff = func(int) time.Duration { return -time.Hour }
		})
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 1})
		require.NoError(t, err)
		hb, err := h.Hold(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = hb.Rollback(ctx) })
		held := heldIDs(hb)
		require.Len(t, held, 1)
		require.NoError(t, hb.Fail(ctx, held[0], errors.New("held")))
		require.NoError(t, hb.Commit(ctx))

		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, b.Len())
		claimed := b.IDs()[0]
		require.NoError(t, b.Fail(ctx, claimed, errors.New("batch")))

		scheduled, err := c.List(ctx, claim.Scheduled, 0, 10)
		require.NoError(t, err)
		require.Empty(t, scheduled, "a negative backoff schedules no row for later")
		// Both rows are claimable again at once.
		seen := map[any]bool{}
		for range 2 {
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, b.Len())
			seen[b.IDs()[0]] = true
			require.NoError(t, b.AckAll(ctx))
		}
		require.Len(t, seen, 2, "both rows of the table")
		require.True(t, seen[held[0]] && seen[claimed], "the failed rows are among them: %v", seen)
	})
}

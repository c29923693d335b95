package claim_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// ackCounter counts ack statements (one call per statement that acked
// something) and acked rows.
type ackCounter struct {
	mu         sync.Mutex
	statements int
	rows       int
}

func (a *ackCounter) hook(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.statements++
	a.rows += n
}

func (a *ackCounter) get() (statements, rows int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.statements, a.rows
}

func TestDeferredAcksCoalesce(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		var acks ackCounter
		c, _ := jobSetup(t, e, s, 10, func(cfg *claim.Config) {
			cfg.AckDelay = time.Hour // only size and Flush trigger writes here
			onAck(cfg, acks.hook)
		})
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 10, b.Len())

		for _, r := range b.Rows()[:9] {
			require.NoError(t, b.Ack(ctx, r.ID))
		}
		require.ErrorIs(t, b.Ack(ctx, b.Rows()[0].ID), claim.ErrNotHeld, "deferred twice")
		require.ErrorIs(t, b.Ack(ctx, b.Rows()[0].ID), claim.ErrNotHeld)
		require.ErrorIs(t, b.Fail(ctx, b.Rows()[0].ID, errors.New("x")), claim.ErrNotHeld)
		require.Equal(t, []any{b.Rows()[9].ID}, b.Unacked())
		st, rows := acks.get()
		require.Zero(t, st, "nothing written before the buffer fills")
		require.Zero(t, rows)
		requireStats(t, c, 0, 10, 0, 0)

		// The last held row fills the batch: one background statement.
		require.NoError(t, b.Ack(ctx, b.Rows()[9].ID))
		require.NoError(t, b.Flush(ctx))
		require.NoError(t, b.Flush(ctx), "a second flush has nothing to do")
		st, rows = acks.get()
		require.Equal(t, 1, st, "one ack statement for the whole batch")
		require.Equal(t, 10, rows)
		requireStats(t, c, 0, 0, 10, 0)
		require.Empty(t, b.Unacked())
	})
}

func TestDeferredAcksDelayAndBuffer(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()

		// The delay bounds how long a deferred ack waits, without any call.
		var delayed ackCounter
		d, _ := jobSetup(t, e, s, 3, func(cfg *claim.Config) {
			cfg.AckDelay = 30 * time.Millisecond
			onAck(cfg, delayed.hook)
		})
		db, err := d.Claim(ctx)
		require.NoError(t, err)
		require.NoError(t, db.Ack(ctx, db.Rows()[0].ID))
		waitFor(t, "the delayed write", func() bool { _, n := delayed.get(); return n == 1 })
		requireStats(t, d, 0, 2, 1, 0)
		_, err = db.Release(ctx)
		require.NoError(t, err)

		// With an hour's delay, only the buffer size can start this write.
		var acks ackCounter
		c, _ := jobSetup(t, e, s, 10, func(cfg *claim.Config) {
			cfg.AckDelay = time.Hour
			cfg.AckBuffer = 4
			onAck(cfg, acks.hook)
		})
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		for _, r := range b.Rows()[:4] {
			require.NoError(t, b.Ack(ctx, r.ID))
		}
		waitFor(t, "the buffered write", func() bool { _, n := acks.get(); return n == 4 })
		st, _ := acks.get()
		require.Equal(t, 1, st, "four deferred acks in one statement")

		// Release writes the deferred acks, then releases the rest.
		require.NoError(t, b.Ack(ctx, b.Rows()[4].ID))
		require.NoError(t, b.Ack(ctx, b.Rows()[5].ID))
		require.NoError(t, b.Ack(ctx, b.Rows()[6].ID))
		released, err := b.Release(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 3, released)
		st, n := acks.get()
		require.Equal(t, [2]int{2, 7}, [2]int{st, n})
		requireStats(t, c, 3, 0, 7, 0)
		require.NoError(t, b.Flush(ctx))

		// AckAll writes the deferred acks and every other row held in one
		// statement.
		c2, _ := jobSetup(t, e, s, 5, func(cfg *claim.Config) {
			cfg.AckDelay = time.Hour
			onAck(cfg, acks.hook)
		})
		b2, err := c2.Claim(ctx)
		require.NoError(t, err)
		require.NoError(t, b2.Ack(ctx, b2.Rows()[0].ID, b2.Rows()[2].ID))
		require.NoError(t, b2.AckAll(ctx))
		st, n = acks.get()
		require.Equal(t, [2]int{3, 12}, [2]int{st, n}, "one more statement for five rows")
		requireStats(t, c2, 0, 0, 5, 0)
	})
}

func TestDeferredAcksReportLostRows(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		c, _ := jobSetup(t, e, s, 4, func(cfg *claim.Config) { cfg.AckDelay = time.Hour })
		old, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 4, old.Len())
		require.NoError(t, old.Ack(ctx, old.Rows()[1].ID))
		require.NoError(t, old.Ack(ctx, old.Rows()[3].ID))

		// The worker stalls: a reaper returns its rows, another claims them.
		time.Sleep(20 * time.Millisecond)
		_, err = claim.StoreOf(c).Reap(ctx, &store.ReapParams{Timeout: time.Millisecond, Limit: 100})
		require.NoError(t, err)
		fresh, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 4, fresh.Len())

		err = old.Flush(ctx)
		require.ErrorIs(t, err, dialect.ErrClaimLost)
		var le *claim.LostError
		require.ErrorAs(t, err, &le)
		require.Equal(t, []any{old.Rows()[1].ID, old.Rows()[3].ID}, le.IDs, "each deferred row's outcome")
		require.NoError(t, old.Flush(ctx), "reported once")
		requireStats(t, c, 0, 4, 0, 0) // the new owner's rows are untouched

		// A background write's lost rows surface at the next Flush.
		for _, r := range fresh.Rows() {
			require.NoError(t, fresh.Ack(ctx, r.ID))
		}
		require.NoError(t, fresh.Flush(ctx))
		requireStats(t, c, 0, 0, 4, 0)
	})
}

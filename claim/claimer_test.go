package claim_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
)

type job struct{ Payload string }

func jobFields(j *job) []any { return []any{&j.Payload} }

// jobSetup creates a jobs table with attempts and version columns, n rows of
// task 42 and 3 rows of task 7, and a claimer scoped to task 42.
func jobSetup(t *testing.T, e *env, s dialect.Strategy, n int, mod func(*claim.Config)) (*claim.Claimer[job], claim.Config) {
	t.Helper()
	cfg := claim.Config{
		ClaimTable: dialect.ClaimTable{
			Table: tableName("jobs"), Scope: []string{"task_id"},
			Attempts: "attempts", Version: "version", Columns: []string{"payload"},
		},
		ScopeValues: []any{42}, Strategy: s, BatchSize: 10, MaxAttempts: 2,
	}
	if mod != nil {
		mod(&cfg)
	}
	createTable(t, e, cfg)
	insertRows(t, e, cfg.Table, []string{"task_id", "payload"}, n+3, func(i int) []any {
		if i >= n {
			return []any{7, "other"}
		}
		return []any{42, "p" + string(rune('a'+i%26))}
	})
	c, err := claim.New(e.d, cfg, jobFields)
	require.NoError(t, err)
	require.Equal(t, s, c.Strategy())
	return c, cfg
}

func requireStats(t *testing.T, c *claim.Claimer[job], pending, processing, done, failed int64) {
	t.Helper()
	st, err := c.Stats(context.Background())
	require.NoError(t, err)
	require.Equal(t, [4]int64{pending, processing, done, failed}, [4]int64{st.Pending, st.Processing, st.Done, st.Failed},
		"pending, processing, done, failed")
}

func TestClaimAckScopeAndColumns(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		var claimed, acked, empty atomic.Int64
		c, _ := jobSetup(t, e, s, 15, func(cfg *claim.Config) {
			onClaim(cfg, func(n int) {
				claimed.Add(int64(n))
				if n == 0 {
					empty.Add(1)
				}
			})
			onAck(cfg, func(n int) { acked.Add(int64(n)) })
		})
		b1, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 10, b1.Len())
		require.Len(t, b1.Token(), store.TokenLen)
		for i, r := range b1.Rows() {
			require.IsType(t, int64(0), r.ID)
			require.Equal(t, "p"+string(rune('a'+i%26)), r.Value.Payload, "columns are read in key order")
			if i > 0 {
				require.Greater(t, r.ID.(int64), b1.Rows()[i-1].ID.(int64))
			}
		}
		b2, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 5, b2.Len(), "only task 42's rows are in scope")
		requireStats(t, c, 0, 15, 0, 0)

		// Ack accepts any integer type, once.
		first := int(b1.Rows()[0].ID.(int64))
		require.NoError(t, b1.Ack(ctx, first))
		require.ErrorIs(t, b1.Ack(ctx, first), claim.ErrNotHeld)
		require.ErrorIs(t, b1.Ack(ctx, int64(1<<40)), claim.ErrNotHeld)
		require.Len(t, b1.Unacked(), 9)
		require.NoError(t, b1.AckAll(ctx))
		require.NoError(t, b2.AckAll(ctx))
		require.Empty(t, b1.Unacked())

		b3, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 0, b3.Len(), "nothing pending is an empty batch, not an error")
		requireStats(t, c, 0, 0, 15, 0)
		require.EqualValues(t, 15, claimed.Load())
		require.EqualValues(t, 15, acked.Load())
		require.EqualValues(t, 1, empty.Load())
	})
}

func TestLateAckIsLost(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		var lost atomic.Int64
		c, _ := jobSetup(t, e, s, 10, func(cfg *claim.Config) {
			watch(cfg, func(e observe.Event) { n := e.Lost; lost.Add(int64(n)) })
		})
		old, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 10, old.Len())

		// The old worker stalls; a reaper with a tiny timeout takes its rows
		// back and another worker claims them.
		time.Sleep(30 * time.Millisecond)
		res, err := claim.StoreOf(c).Reap(ctx, &store.ReapParams{Timeout: time.Millisecond, Limit: 100})
		require.NoError(t, err)
		require.EqualValues(t, 10, res.Returned)
		fresh, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, old.IDs(), fresh.IDs())

		n, err := old.Heartbeat(ctx)
		require.ErrorIs(t, err, dialect.ErrClaimLost)
		require.Zero(t, n)

		require.Equal(t, old.IDs(), old.Lost())
		require.ErrorIs(t, old.Err(), dialect.ErrClaimLost, "every row lost: the batch ended")

		// Later writes of the rows found lost report them lost and write
		// nothing.
		err = old.Fail(ctx, old.Rows()[0].ID, errors.New("boom"))
		var le *claim.LostError
		require.ErrorAs(t, err, &le)
		require.Equal(t, []any{old.IDs()[0]}, le.IDs)
		err = old.Ack(ctx, old.IDs()[1:]...)
		require.ErrorAs(t, err, &le)
		require.Equal(t, old.IDs()[1:], le.IDs)
		require.NoError(t, old.AckAll(ctx), "the heartbeat reported the lost rows already")
		require.EqualValues(t, 10, lost.Load())

		// The new owner's state is intact: still processing under its token.
		requireStats(t, c, 0, 10, 0, 0)
		n, err = fresh.Heartbeat(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 10, n)
		require.NoError(t, fresh.AckAll(ctx))
		requireStats(t, c, 0, 0, 10, 0)
	})
}

func TestVersionConditionedAck(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		var requeued atomic.Int64
		c, cfg := jobSetup(t, e, s, 5, func(cfg *claim.Config) {
			watch(cfg, func(e observe.Event) { n := e.Requeued; requeued.Add(int64(n)) })
		})
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 5, b.Len())
		moved := b.Rows()[2].ID
		require.Zero(t, b.Rows()[2].Version)

		// A writer changes the row while it is being processed.
		require.EqualValues(t, 1, e.exec(t, "UPDATE "+cfg.Table+" SET version = version + 1, payload = ? WHERE id = ?", "new", moved))

		require.NoError(t, b.AckAll(ctx), "a requeue is not an error")
		require.Equal(t, []any{moved}, b.Requeued())
		require.EqualValues(t, 1, requeued.Load())
		requireStats(t, c, 1, 0, 4, 0)

		again, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, again.Len())
		require.Equal(t, moved, again.Rows()[0].ID)
		require.EqualValues(t, 1, again.Rows()[0].Version)
		require.Equal(t, "new", again.Rows()[0].Value.Payload)
		require.NoError(t, again.AckAll(ctx))
		require.Empty(t, again.Requeued())
		requireStats(t, c, 0, 0, 5, 0)
	})
}

func TestFailRetriesThenParks(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		var failed atomic.Int64
		c, _ := jobSetup(t, e, s, 1, func(cfg *claim.Config) {
			watch(cfg, func(e observe.Event) { n := e.Failed; failed.Add(int64(n)) })
		})
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, b.Len())
		require.NoError(t, b.Fail(ctx, b.Rows()[0].ID, errors.New("first")))
		require.ErrorIs(t, b.Fail(ctx, b.Rows()[0].ID, errors.New("again")), claim.ErrNotHeld)
		requireStats(t, c, 1, 0, 0, 0)

		b, err = c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, b.Len())
		require.NoError(t, b.Fail(ctx, b.Rows()[0].ID, errors.New("second")))
		requireStats(t, c, 0, 0, 0, 1) // parked at MaxAttempts = 2
		require.EqualValues(t, 2, failed.Load())

		// Park parks at once, whatever MaxAttempts says.
		p, _ := jobSetup(t, e, s, 1, nil)
		b, err = p.Claim(ctx)
		require.NoError(t, err)
		require.NoError(t, b.Fail(ctx, b.Rows()[0].ID, claim.Park(errors.New("fatal"))))
		requireStats(t, p, 0, 0, 0, 1)
	})
}

func TestReleaseAndKeepAlive(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		c, _ := jobSetup(t, e, s, 10, func(cfg *claim.Config) { cfg.HeartbeatInterval = 50 * time.Millisecond })
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.NoError(t, b.Ack(ctx, b.Rows()[0].ID, b.Rows()[1].ID, b.Rows()[2].ID))
		n, err := b.Release(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 7, n)
		requireStats(t, c, 7, 0, 3, 0)
		require.Empty(t, b.Unacked())

		// A kept-alive batch survives a reaper whose timeout is shorter than
		// the processing time; once stopped, its rows go stale. Heartbeats
		// run every 50 ms against a 3 s timeout: a loaded machine's late
		// heartbeat is no loss.
		b, err = c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 7, b.Len())
		stop := b.KeepAlive(ctx)
		time.Sleep(3500 * time.Millisecond)
		reap := &store.ReapParams{Timeout: 3 * time.Second, Limit: 100}
		res, err := claim.StoreOf(c).Reap(ctx, reap)
		require.NoError(t, err)
		require.Zero(t, res.Returned, "heartbeats keep the rows")
		stop()
		stop() // idempotent
		time.Sleep(3200 * time.Millisecond)
		res, err = claim.StoreOf(c).Reap(ctx, reap)
		require.NoError(t, err)
		require.EqualValues(t, 7, res.Returned)
		require.ErrorIs(t, b.AckAll(ctx), dialect.ErrClaimLost)
		requireStats(t, c, 7, 0, 3, 0)
	})
}

type target struct{ OpenID string }

func TestTextKeysAndIntegerStatuses(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		cfg := claim.Config{
			ClaimTable: dialect.ClaimTable{
				Table: tableName("tk"), IDKind: dialect.IDText, Status: "st", Token: "cron_token",
				ClaimedAt: "send_at", Columns: []string{"openid"},
				Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2), Failed: dialect.StatusInt(3),
			},
			Strategy: s, BatchSize: 3,
		}
		createTable(t, e, cfg)
		insertRows(t, e, cfg.Table, []string{"id", "openid"}, 5, func(i int) []any {
			return []any{string(rune('e' - i)), "o" + string(rune('0'+i))}
		})
		c, err := claim.New(e.d, cfg, func(x *target) []any { return []any{&x.OpenID} })
		require.NoError(t, err)
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, []any{"a", "b", "c"}, b.IDs())
		require.Equal(t, "o4", b.Rows()[0].Value.OpenID)
		require.NoError(t, b.Ack(ctx, []byte("b")))
		require.NoError(t, b.Fail(ctx, "a", errors.New("x"))) // no Attempts column: parked at once
		_, err = b.Release(ctx)
		require.NoError(t, err)
		st, err := c.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, [4]int64{3, 0, 1, 1}, [4]int64{st.Pending, st.Processing, st.Done, st.Failed})
	})
}

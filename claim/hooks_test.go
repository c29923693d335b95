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
	"github.com/claimlock/claimlock/observe"
)

// recorder collects observer events with their context's trace marker.
type recorder struct {
	mu     sync.Mutex
	events []observe.Event
	marks  []any
}

type markKey struct{}

func (r *recorder) Observe(ctx context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.marks = append(r.marks, ctx.Value(markKey{}))
}

func (r *recorder) take() ([]observe.Event, []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev, m := r.events, r.marks
	r.events, r.marks = nil, nil
	return ev, m
}

// The observer sees every operation with the caller's context, the table
// and scope, and counts equal to what the database did; the older counting
// hooks keep working beside it.
func TestObserverEvents(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		rec := &recorder{}
		var legacyAcked int
		var mu sync.Mutex
		c, cfg := jobSetup(t, e, s, 6, func(cfg *claim.Config) {
			withLifecycle(cfg)
			cfg.MaxAttempts = 1
			cfg.Observer = rec
			onAck(cfg, func(n int) { mu.Lock(); legacyAcked += n; mu.Unlock() })
		})
		ctx := context.WithValue(context.Background(), markKey{}, "caller")
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 6, b.Len())
		ids := b.IDs()
		require.NoError(t, b.Ack(ctx, ids[0], ids[1]))
		require.NoError(t, b.Fail(ctx, ids[2], errors.New("boom"))) // parked: MaxAttempts 1
		require.NoError(t, b.Fail(ctx, ids[3], claim.SnoozeFor(time.Hour)))
		n, err := b.Heartbeat(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		released, err := b.Release(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 2, released)
		again, err := c.Claim(ctx) // the released rows; the snoozed one waits
		require.NoError(t, err)
		require.Equal(t, 2, again.Len())

		events, marks := rec.take()
		var ops []observe.Op
		for i, ev := range events {
			ops = append(ops, ev.Op)
			require.Equal(t, "caller", marks[i], "event %d (%s) carries the caller's context", i, ev.Op)
			require.Equal(t, observe.SourceClaim, ev.Source)
			require.Equal(t, cfg.Table, ev.Table)
			require.Equal(t, []string{"task_id"}, ev.Scope)
			require.Equal(t, []any{42}, ev.ScopeValues)
			require.NoError(t, ev.Err)
			require.False(t, ev.Background)
			require.False(t, ev.Start.IsZero())
			require.GreaterOrEqual(t, ev.Duration, time.Duration(0))
		}
		require.Equal(t, []observe.Op{claim.OpClaim, claim.OpAck, claim.OpFail, claim.OpSnooze, claim.OpHeartbeat, claim.OpRelease, claim.OpClaim}, ops)
		require.Equal(t, 6, events[0].Claimed)
		require.Equal(t, b.Token(), events[0].Token)
		require.Equal(t, 2, events[1].Acked)
		require.Equal(t, [2]int{1, 1}, [2]int{events[2].Failed, events[2].Parked})
		require.EqualValues(t, 1, events[3].Rows)
		require.EqualValues(t, 2, events[4].Rows)
		require.EqualValues(t, 2, events[5].Rows)
		require.Equal(t, 2, events[6].Claimed)
		mu.Lock()
		require.Equal(t, 2, legacyAcked)
		mu.Unlock()
		requireStats(t, c, 1, 2, 2, 1)
	})
}

// Deferred acks written by the batch's timer and keep-alive heartbeats are
// reported as background work; a lost row is counted, not an error.
func TestObserverBackgroundAndLost(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		rec := &recorder{}
		c, _ := jobSetup(t, e, s, 2, func(cfg *claim.Config) {
			cfg.AckDelay = time.Millisecond
			cfg.HeartbeatInterval = time.Millisecond
			cfg.Observer = rec
		})
		ctx := context.WithValue(context.Background(), markKey{}, "caller")
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		ids := b.IDs()
		require.NoError(t, b.Ack(ctx, ids[0]))
		require.Eventually(t, func() bool { return hasOp(rec, claim.OpAck) }, 5*time.Second, time.Millisecond)
		require.NoError(t, b.Flush(ctx))
		stop := b.KeepAlive(ctx)
		require.Eventually(t, func() bool { return hasOp(rec, claim.OpHeartbeat) }, 5*time.Second, 5*time.Millisecond)
		stop()
		// An operator releases the row under the batch: the ack finds it lost.
		_, err = claim.StoreOf(c).Release(context.Background(), b.Token(), nil)
		require.NoError(t, err)
		require.NoError(t, b.Ack(ctx, ids[1]), "deferred: the loss is learnt when the ack is written")
		require.ErrorIs(t, b.Flush(ctx), dialect.ErrClaimLost)

		events, _ := rec.take()
		var sawAck, sawBeat, sawLost bool
		for _, ev := range events {
			switch {
			case ev.Op == claim.OpAck && ev.Acked == 1:
				require.True(t, ev.Background, "the timer's write is background work")
				sawAck = true
			case ev.Op == claim.OpHeartbeat:
				require.True(t, ev.Background)
				sawBeat = true
			case ev.Op == claim.OpAck && ev.Lost == 1:
				require.NoError(t, ev.Err)
				require.Zero(t, ev.Acked)
				sawLost = true // written in the background (the last row held was deferred) or by Flush
			}
		}
		require.True(t, sawAck && sawBeat && sawLost, "%+v", events)
	})
}

func hasOp(r *recorder, op observe.Op) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Op == op {
			return true
		}
	}
	return false
}

// A claim that fails reports its error; observe.Func adapts a function.
func TestObserverClaimError(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	var got []observe.Event
	c, err := claim.New[job](e.d, claim.Config{
		ClaimTable: dialect.ClaimTable{Table: "no_such_table"},
		Observer: observe.Func(func(_ context.Context, ev observe.Event) {
			got = append(got, ev)
		}),
	}, nil)
	require.NoError(t, err)
	_, err = c.Claim(context.Background())
	require.Error(t, err)
	require.Len(t, got, 1)
	require.Equal(t, claim.OpClaim, got[0].Op)
	require.Equal(t, "no_such_table", got[0].Table)
	require.ErrorIs(t, got[0].Err, dialect.ErrInvalidConfig)
}

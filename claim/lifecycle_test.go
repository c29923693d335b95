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
)

// withLifecycle gives a job table run-at and error columns.
func withLifecycle(cfg *claim.Config) { cfg.RunAt, cfg.Error = "run_at", "last_error" }

// scheduledIn returns how long until the row's run-at, on the database
// clock, from the claimer's listing.
func scheduledIn(t *testing.T, c *claim.Claimer[job], id any) (time.Duration, claim.RowInfo) {
	t.Helper()
	rows, err := c.List(context.Background(), claim.Scheduled, 0, 100)
	require.NoError(t, err)
	for _, r := range rows {
		if r.ID == id {
			return r.RunIn, r
		}
	}
	t.Fatalf("row %v is not scheduled: %+v", id, rows)
	return 0, claim.RowInfo{}
}

// A row failing again and again is retried at the backoff's delays,
// measured on the database clock (the delays are hours, so no claim can take
// it early, and the test never sleeps): claims skip it until its run-at,
// operators bring it back with RetryNow, and after MaxAttempts it is parked
// with the last error stored. Unpark with fresh attempts starts it over.
func TestRetryBackoffOnDatabaseClock(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		c, _ := jobSetup(t, e, s, 1, func(cfg *claim.Config) {
			withLifecycle(cfg)
			cfg.MaxAttempts = 3
			cfg.Backoff = func(attempts int) time.Duration { return time.Duration(attempts) * time.Hour }
		})
		var id any
		for attempt := 1; attempt <= 3; attempt++ {
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, b.Len(), "attempt %d", attempt)
			r := b.Rows()[0]
			require.EqualValues(t, attempt, r.Attempts, "the claim reports the row's attempts")
			id = r.ID
			require.NoError(t, b.Fail(ctx, id, fmt.Errorf("send API down (attempt %d)", attempt)))
			if attempt == 3 {
				break
			}
			in, info := scheduledIn(t, c, id)
			want := time.Duration(attempt) * time.Hour
			require.InDelta(t, want.Seconds(), in.Seconds(), 60, "attempt %d waits %v on the database clock", attempt, want)
			require.Equal(t, fmt.Sprintf("send API down (attempt %d)", attempt), info.Error)
			empty, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Zero(t, empty.Len(), "a row waiting for its run-at is not claimed")
			n, err := c.RetryNow(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
		}
		requireStats(t, c, 0, 0, 0, 1)
		parked, err := c.List(ctx, claim.Parked, 0, 10)
		require.NoError(t, err)
		require.Len(t, parked, 1)
		require.Equal(t, claim.RowInfo{ID: id, Attempts: 3, ClaimedAge: parked[0].ClaimedAge, Error: "send API down (attempt 3)"}, parked[0])

		n, err := c.Unpark(ctx, true)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, b.Len())
		require.EqualValues(t, 1, b.Rows()[0].Attempts, "unparked with fresh attempts")
		require.NoError(t, b.AckAll(ctx))
		requireStats(t, c, 0, 0, 1, 0)
	})
}

// Fail with RetryAfter and SnoozeFor errors takes explicit delays; a
// snooze is not an attempt. Handlers ask for them with the same errors.
func TestExplicitDelaysAndSnoozes(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		c, _ := jobSetup(t, e, s, 4, func(cfg *claim.Config) { withLifecycle(cfg); cfg.MaxAttempts = 5 })
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 4, b.Len())
		rows := b.Rows()
		require.NoError(t, b.Fail(ctx, rows[0].ID, claim.RetryAfter(90*time.Minute, errors.New("429"))))
		require.NoError(t, b.Fail(ctx, rows[1].ID, claim.SnoozeFor(45*time.Minute)))
		require.ErrorIs(t, b.Fail(ctx, rows[1].ID, claim.SnoozeFor(time.Minute)), claim.ErrNotHeld)
		require.ErrorIs(t, b.Fail(ctx, rows[2].ID, claim.RetryAfter(-time.Second, nil)), dialect.ErrInvalidConfig)
		require.NoError(t, b.AckAll(ctx))

		in, info := scheduledIn(t, c, rows[0].ID)
		require.InDelta(t, (90 * time.Minute).Seconds(), in.Seconds(), 60)
		require.Equal(t, "429", info.Error)
		require.EqualValues(t, 1, info.Attempts)
		in, info = scheduledIn(t, c, rows[1].ID)
		require.InDelta(t, (45 * time.Minute).Seconds(), in.Seconds(), 60)
		require.Equal(t, "", info.Error)
		require.EqualValues(t, 0, info.Attempts, "a snooze undoes the claim's attempt")

		// The same through a worker's handler.
		_, err = c.RetryNow(ctx)
		require.NoError(t, err)
		var handled atomic.Int64
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- c.Run(runCtx, claim.WorkerConfig[job]{PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
				Handler: func(_ context.Context, r claim.Row[job]) error {
					handled.Add(1)
					switch r.ID {
					case rows[0].ID:
						return claim.RetryAfter(2*time.Hour, errors.New("rate limited"))
					case rows[1].ID:
						return claim.SnoozeFor(3 * time.Hour)
					}
					return nil
				}})
		}()
		awaitStats(t, "both rows handled and none processing", c.Stats, func(st claim.Stats) bool {
			return handled.Load() >= 2 && st.Processing == 0
		}, func() string { return fmt.Sprintf("%d handled", handled.Load()) })
		cancel()
		require.NoError(t, <-done)
		in, info = scheduledIn(t, c, rows[0].ID)
		require.InDelta(t, (2 * time.Hour).Seconds(), in.Seconds(), 60)
		require.Contains(t, info.Error, "rate limited")
		in, info = scheduledIn(t, c, rows[1].ID)
		require.InDelta(t, (3 * time.Hour).Seconds(), in.Seconds(), 60)
		require.EqualValues(t, 0, info.Attempts)
	})
}

// Delays need a RunAt column: a Backoff without one is refused by New, an
// explicit delay by the call.
func TestDelaysNeedRunAt(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	_, err := claim.New[job](e.d, claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Columns: []string{"payload"}},
		Backoff: claim.DefaultBackoff}, jobFields)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.Contains(t, err.Error(), "Backoff")

	ctx := context.Background()
	c, _ := jobSetup(t, e, dialect.StrategyTokenUpdate, 2, nil)
	b, err := c.Claim(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, b.Fail(ctx, b.Rows()[0].ID, claim.RetryAfter(time.Minute, nil)), dialect.ErrInvalidConfig)
	require.ErrorIs(t, b.Fail(ctx, b.Rows()[0].ID, claim.SnoozeFor(time.Minute)), dialect.ErrInvalidConfig)
	_, err = c.RetryNow(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.NoError(t, b.AckAll(ctx), "the refused calls left the rows held")
}

// The default backoff grows exponentially with jitter and a cap.
func TestDefaultBackoff(t *testing.T) {
	t.Parallel()
	for attempts, base := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 20: time.Hour, 1000: time.Hour} {
		for range 50 {
			d := claim.DefaultBackoff(attempts)
			require.GreaterOrEqual(t, d, base-base/4, "attempts %d", attempts)
			require.LessOrEqual(t, d, min(base+base/4, claim.DefaultBackoffMax), "attempts %d", attempts)
		}
	}
	require.Nil(t, claim.ExponentialBackoff(0, time.Second))
	require.Nil(t, claim.ExponentialBackoff(time.Minute, time.Second))
	f := claim.ExponentialBackoff(time.Minute, 10*time.Minute)
	require.LessOrEqual(t, f(100), 10*time.Minute)
}

// The pipelined ack+claim honours run-at like a claim: a row failed with a
// delay is not taken again by the claim of the same round trip.
func TestPipelineRespectsRunAt(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		c, _ := jobSetup(t, e, s, 4, func(cfg *claim.Config) { withLifecycle(cfg); cfg.BatchSize = 2; cfg.MaxAttempts = 5 })
		var calls sync.Map
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		var first atomic.Value
		go func() {
			done <- c.Run(runCtx, claim.WorkerConfig[job]{Pipeline: claim.PipelineOn, PollMin: time.Millisecond, PollMax: 10 * time.Millisecond,
				Handler: func(ctx context.Context, r claim.Row[job]) error {
					n, _ := calls.LoadOrStore(r.ID, new(atomic.Int32))
					n.(*atomic.Int32).Add(1)
					if first.CompareAndSwap(nil, r.ID) {
						return claim.RetryAfter(time.Hour, errors.New("come back later"))
					}
					return nil
				}})
		}()
		awaitStats(t, "three rows done", c.Stats, func(st claim.Stats) bool { return st.Done == 3 }, nil)
		cancel()
		require.NoError(t, <-done)
		requireStats(t, c, 1, 0, 3, 0)
		n, _ := calls.Load(first.Load())
		require.EqualValues(t, 1, n.(*atomic.Int32).Load(), "the delayed row is not claimed again")
	})
}

package claim_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/await"
)

// drainStall is how long a drain of these tests may go without a row
// reaching a final state before the test fails: their steps are
// milliseconds apart, so ten seconds without one is a hang (a row retried
// forever, a lock never released), also on a loaded machine with the race
// detector, not a slow run.
const drainStall = 10 * time.Second

// awaitStats waits until stats satisfy done. It fails when no row has
// reached a final state for drainStall (progress: done and failed rows,
// less pending and processing ones, so that deleted done rows count too),
// naming what was awaited and the last stats seen, with seen's report
// when given.
func awaitStats(t *testing.T, what string, stats func(context.Context) (claim.Stats, error), done func(claim.Stats) bool, seen func() string) {
	t.Helper()
	await.Progress(t, what, drainStall, 0, func() (await.State, error) {
		ctx, cancel := context.WithTimeout(context.Background(), drainStall)
		defer cancel()
		st, err := stats(ctx)
		if err != nil {
			// The database may be away for a while (the outage tests):
			// not progress, and shown if it lasts.
			return await.State{Progress: math.MinInt64, Seen: fmt.Sprintf("stats failed: %v", err)}, nil
		}
		s := fmt.Sprintf("%+v", st)
		if seen != nil {
			s += "; " + seen()
		}
		return await.State{Done: done(st), Progress: st.Done + st.Failed - st.Pending - st.Processing, Seen: s}, nil
	})
}

// drainRun runs c.Run with w in drain mode, and fails the test unless it
// returns nil on its own, before its minute is up.
func drainRun(t *testing.T, c *claim.Claimer[job], w claim.WorkerConfig[job]) {
	t.Helper()
	w.Drain = true
	took, err := runFor(t, c, w, time.Minute)
	require.NoError(t, err)
	require.Less(t, took, 50*time.Second, "the drain returned on its own, not at the deadline")
}

// A drain processes every row of its scope, the rows its failures made
// pending again at once included (no RunAt column), until they succeed or
// park, and returns. Its loops never poll (the poll interval is an hour):
// the drain knows when nothing is left instead of waiting for a claim to
// come back empty after the interval.
func TestRunDrain(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		const rows = 60
		c, _ := jobSetup(t, e, s, rows, nil) // MaxAttempts 2
		poison := func(id int64) bool { return id%13 == 0 }
		flaky := func(id int64) bool { return id%5 == 0 }
		var mu sync.Mutex
		calls := map[int64]int{}
		done := map[int64]int{}
		drainRun(t, c, claim.WorkerConfig[job]{
			Workers: 4, PollMin: time.Hour, PollMax: time.Hour,
			Handler: func(_ context.Context, r claim.Row[job]) error {
				id := r.ID.(int64)
				mu.Lock()
				defer mu.Unlock()
				calls[id]++
				if poison(id) || flaky(id) && calls[id] == 1 {
					return errors.New("failed")
				}
				done[id]++
				return nil
			},
		})
		var parked int64
		for id := int64(1); id <= rows; id++ {
			switch {
			case poison(id):
				parked++
				require.Equal(t, 2, calls[id], "row %d: a poison row is tried MaxAttempts times", id)
				require.Zero(t, done[id], "row %d", id)
			case flaky(id):
				require.Equal(t, 2, calls[id], "row %d: failed once, then done", id)
				require.Equal(t, 1, done[id], "row %d", id)
			default:
				require.Equal(t, 1, calls[id], "row %d: handled exactly once", id)
				require.Equal(t, 1, done[id], "row %d", id)
			}
		}
		require.Len(t, calls, rows, "only rows of the claimer's scope")
		requireStats(t, c, 0, 0, rows-parked, parked)
		other, err := c.Scope(7)
		require.NoError(t, err)
		requireStats(t, other, 3, 0, 0, 0)
	})
}

// A drain does not wait for rows it cannot claim now: rows a retry or a
// snooze gave a run_at in the future, and rows other workers hold. It
// returns with them pending and processing.
func TestRunDrainDoesNotWait(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := ctxT(t)
		c, cfg := jobSetup(t, e, s, 30, func(cfg *claim.Config) { cfg.RunAt = "run_at" })
		other, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)
		held, err := other.Claim(ctx) // another worker's batch, left processing
		require.NoError(t, err)
		require.Equal(t, 10, held.Len())
		heldIDs := map[int64]bool{}
		for _, id := range held.IDs() {
			heldIDs[id.(int64)] = true
		}
		var mu sync.Mutex
		calls := map[int64]int{}
		drainRun(t, c, claim.WorkerConfig[job]{
			Workers: 3, PollMin: time.Hour, PollMax: time.Hour,
			Handler: func(_ context.Context, r claim.Row[job]) error {
				id := r.ID.(int64)
				mu.Lock()
				calls[id]++
				mu.Unlock()
				switch id % 7 {
				case 0:
					return claim.RetryAfter(time.Hour, errors.New("try later"))
				case 1:
					return claim.SnoozeFor(time.Hour)
				}
				return nil
			},
		})
		var later int64
		for id := int64(1); id <= 30; id++ {
			if heldIDs[id] {
				require.Zero(t, calls[id], "row %d is another worker's", id)
				continue
			}
			require.Equal(t, 1, calls[id], "row %d: handled once, its retry not waited for", id)
			if id%7 <= 1 {
				later++
			}
		}
		require.Positive(t, later)
		requireStats(t, c, later, 10, 20-later, 0)
		require.NoError(t, held.AckAll(ctx))
		requireStats(t, c, later, 0, 30-later, 0)
	})
}

// A drain with nothing to claim returns at once; one whose context ends
// first shuts down and returns nil, as Run does.
func TestRunDrainEmptyAndCancelled(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		c, _ := jobSetup(t, e, s, 0, nil)
		handled := 0
		drainRun(t, c, claim.WorkerConfig[job]{Workers: 2, PollMin: time.Hour, PollMax: time.Hour,
			Handler: func(context.Context, claim.Row[job]) error { handled++; return nil }})
		require.Zero(t, handled)

		busy, _ := jobSetup(t, e, s, 5, func(cfg *claim.Config) { cfg.BatchSize = 5 })
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		var once sync.Once
		err := busy.Run(ctx, claim.WorkerConfig[job]{Drain: true,
			Handler: func(hctx context.Context, _ claim.Row[job]) error {
				once.Do(func() { close(started) })
				cancel()
				<-hctx.Done()
				return hctx.Err()
			}})
		<-started
		require.NoError(t, err)
		requireStats(t, busy, 5, 0, 0, 0) // released: ShutdownRelease
	})
}

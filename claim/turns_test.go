package claim_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/observe"
)

// TestRunScopesFairDrain: one pool of 8 workers drains two scopes, a large
// one (100,000 rows; 20,000 with -short or the race detector, 5,000 on
// SQLite with the race detector, which slows modernc's SQLite some 30
// times) inserted before a small one (100 rows). Claiming in key order would serve the small scope last; taking
// the scopes in turn serves it at once. Checked exactly:
//
//   - every row is handled exactly once and done, and the drain returns;
//   - no claim takes more than ScopeInFlight rows, and no scope ever holds
//     more than ScopeInFlight rows (claimed less acked, as the observer
//     sees them: a claim is reported after its rows are claimed, an ack
//     before its rows are released to the turns, so the count seen is
//     never below the real one);
//   - the bound: when the small scope's last row is handled, the large
//     scope has handled fewer than fairBound = 1,000 rows. The small
//     scope's 100 rows are one batch, which the turns give the second
//     claim of the Run; while it is processed the large scope holds at
//     most ScopeInFlight = 200 rows at once (two batches), so only the
//     large batches processed meanwhile count: 200 to 400 rows when every
//     row costs the same. The bound leaves room for a loaded machine and
//     is 1% of the large scope (5%, 20%: smaller runs), where claims in
//     key order would serve the small scope after all of it.
func TestRunScopesFairDrain(t *testing.T) {
	t.Parallel()
	const small, workers, batch, inFlight, fairBound = 100, 8, 100, 200, 1_000
	for _, en := range engines {
		if en.kind == testengine.PostgresStdlib {
			continue // the same server as Postgres: the turns do not depend on the driver
		}
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			large := 100_000
			switch {
			case raceEnabled && en.kind == testengine.SQLite:
				large = 5_000
			case raceEnabled || testing.Short():
				large = 20_000
			}
			e := open(t, en)
			var mu sync.Mutex
			held := map[any]int{} // scope value -> rows claimed less rows acked
			var overClaim, overHeld []string
			_, cfg := jobSetup(t, e, e.d.Capabilities().PreferredStrategy, 0, func(cfg *claim.Config) {
				cfg.BatchSize, cfg.MaxAttempts = batch, 0
				cfg.Attempts = ""
				watch(cfg, func(ev observe.Event) {
					if ev.Err != nil || (ev.Op != claim.OpClaim && ev.Op != claim.OpAck) {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					task := ev.ScopeValues[0]
					if ev.Op == claim.OpClaim {
						held[task] += ev.Claimed
						if ev.Claimed > inFlight {
							overClaim = append(overClaim, ev.Token)
						}
					} else {
						held[task] -= ev.Acked
					}
					if held[task] > inFlight {
						overHeld = append(overHeld, ev.Token)
					}
				})
			})
			start := time.Now()
			insertRows(t, e, cfg.Table, []string{"task_id", "payload"}, large, func(int) []any { return []any{1, "large"} })
			insertRows(t, e, cfg.Table, []string{"task_id", "payload"}, small, func(int) []any { return []any{2, "small"} })
			t.Logf("inserted %d rows in %v", large+small, time.Since(start).Round(time.Millisecond))
			c, err := claim.New(e.d, cfg, jobFields)
			require.NoError(t, err)

			first := 4 // jobSetup's 3 rows of task 7 come first
			calls := make([]atomic.Int32, first+large+small)
			var largeDone, smallDone atomic.Int64
			largeAtSmallEnd := int64(-1)
			start = time.Now()
			var smallEnd time.Duration
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			err = c.Run(ctx, claim.WorkerConfig[job]{
				Workers: workers, Drain: true, Scopes: [][]any{{1}, {2}}, ScopeInFlight: inFlight,
				PollMin: time.Hour, PollMax: time.Hour,
				Handler: func(_ context.Context, r claim.Row[job]) error {
					calls[r.ID.(int64)].Add(1)
					if r.Value.Payload == "large" {
						largeDone.Add(1)
					} else if smallDone.Add(1) == small {
						largeAtSmallEnd = largeDone.Load()
						smallEnd = time.Since(start)
					}
					return nil
				},
			})
			took := time.Since(start)
			require.NoError(t, err)
			require.NoError(t, ctx.Err(), "the drain returned on its own")
			t.Logf("drained %d rows in %v; the small scope's last row after %v, when the large scope had handled %d rows",
				large+small, took.Round(time.Millisecond), smallEnd.Round(time.Millisecond), largeAtSmallEnd)

			for id := first; id < len(calls); id++ {
				require.EqualValues(t, 1, calls[id].Load(), "row %d handled exactly once", id)
			}
			require.EqualValues(t, large, largeDone.Load())
			require.EqualValues(t, small, smallDone.Load())
			for task, n := range map[int]int{1: large, 2: small} {
				v, err := c.Scope(task)
				require.NoError(t, err)
				requireStats(t, v, 0, 0, int64(n), 0)
			}
			seven, err := c.Scope(7)
			require.NoError(t, err)
			requireStats(t, seven, 3, 0, 0, 0) // not listed: not served
			mu.Lock()
			require.Empty(t, overClaim, "claims of more than ScopeInFlight rows")
			require.Empty(t, overHeld, "a scope held more than ScopeInFlight rows")
			require.Zero(t, held[int64(1)]+held[1]+held[2]+held[int64(2)], "every claimed row acked: %v", held)
			mu.Unlock()
			require.GreaterOrEqual(t, largeAtSmallEnd, int64(0))
			require.Less(t, largeAtSmallEnd, int64(fairBound),
				"the small scope finished only after the large one had handled %d rows", largeAtSmallEnd)
		})
	}
}

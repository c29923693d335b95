package claim_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
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
//   - no scope ever holds more than ScopeInFlight rows (see
//     scopeWatch), set above what 8 workers of 100-row batches can hold
//     (800): the turns alone, not the bound, must serve the small scope;
//   - the bound: when the small scope's last row is handled, the large
//     scope has handled fewer than fairBound = 1,000 rows. The small
//     scope's 100 rows are one batch, which the turns give the second
//     claim of the Run; while it is processed the other 7 workers take
//     large batches, so a few hundred large rows are handled meanwhile
//     when every row costs the same (measured: 0 to 100). The bound leaves
//     room for a loaded machine and is 1% of the large scope (5%, 20%:
//     smaller runs), where claims in key order (or turns that always
//     start at the first scope) serve the small scope after all of it.
//
// TestRunScopesInFlight checks that the bound is reached and held.
func TestRunScopesFairDrain(t *testing.T) {
	t.Parallel()
	const small, workers, batch, inFlight, fairBound = 100, 8, 100, 1_000, 1_000
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
			sw := &scopeWatch{held: map[any]int{}, max: map[any]int{}}
			_, cfg := jobSetup(t, e, e.d.Capabilities().PreferredStrategy, 0, func(cfg *claim.Config) {
				cfg.BatchSize, cfg.MaxAttempts = batch, 0
				cfg.Attempts = ""
				watch(cfg, sw.observe)
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
			sw.mu.Lock()
			require.LessOrEqual(t, sw.max[1], inFlight)
			require.LessOrEqual(t, sw.max[2], inFlight)
			require.Equal(t, map[any]int{1: 0, 2: 0}, sw.held, "every claimed row acked")
			sw.mu.Unlock()
			require.GreaterOrEqual(t, largeAtSmallEnd, int64(0))
			require.Less(t, largeAtSmallEnd, int64(fairBound),
				"the small scope finished only after the large one had handled %d rows", largeAtSmallEnd)
		})
	}
}

// scopeWatch follows, through the observer, the rows each scope holds:
// rows claimed less rows acked, by the first scope value. A claim is
// reported after its rows are claimed and an ack before Run counts its
// rows as ended, so the count seen is never below what Run holds.
type scopeWatch struct {
	mu     sync.Mutex
	held   map[any]int   // scope value -> rows held now
	max    map[any]int   // scope value -> most rows held at once
	claims map[any][]int // scope value -> rows of each claim that took some
}

func (w *scopeWatch) observe(ev observe.Event) {
	if ev.Err != nil || (ev.Op != claim.OpClaim && ev.Op != claim.OpAck) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	task := ev.ScopeValues[0]
	if ev.Op == claim.OpClaim {
		w.held[task] += ev.Claimed
		if ev.Claimed > 0 && w.claims != nil {
			w.claims[task] = append(w.claims[task], ev.Claimed)
		}
	} else {
		w.held[task] -= ev.Acked
	}
	w.max[task] = max(w.max[task], w.held[task])
}

// TestRunScopesInFlight: a scope whose handler blocks holds exactly
// ScopeInFlight rows (claims of 10, 10 and then the 5 left under the bound
// of 25) and never more, while the other workers drain the other scope;
// once released, the drain ends with every row done exactly once.
func TestRunScopesInFlight(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		const rows, inFlight = 100, 25
		sw := &scopeWatch{held: map[any]int{}, max: map[any]int{}, claims: map[any][]int{}}
		c, cfg := jobSetup(t, e, s, 0, func(cfg *claim.Config) {
			cfg.MaxAttempts, cfg.Attempts = 0, "" // BatchSize 10
			watch(cfg, sw.observe)
		})
		for _, task := range []int{1, 2} {
			insertRows(t, e, cfg.Table, []string{"task_id", "payload"}, rows, func(int) []any { return []any{task, fmt.Sprint(task)} })
		}
		gate := make(chan struct{})
		var calls sync.Map
		var twoDone atomic.Int64
		errc := make(chan error, 1)
		go func() {
			_, err := runFor(t, c, claim.WorkerConfig[job]{
				Workers: 8, Drain: true, Scopes: [][]any{{1}, {2}}, ScopeInFlight: inFlight,
				PollMin: time.Hour, PollMax: time.Hour,
				Handler: func(ctx context.Context, r claim.Row[job]) error {
					if n, _ := calls.LoadOrStore(r.ID, new(atomic.Int32)); n.(*atomic.Int32).Add(1) != 1 {
						return fmt.Errorf("row %v handled twice", r.ID)
					}
					if r.Value.Payload == "1" {
						select {
						case <-gate:
						case <-ctx.Done():
							return ctx.Err()
						}
						return nil
					}
					twoDone.Add(1)
					return nil
				},
			}, time.Minute)
			errc <- err
		}()
		two, err := c.Scope(2)
		require.NoError(t, err)
		awaitStats(t, "scope 2 done while scope 1 blocks", two.Stats, func(st claim.Stats) bool { return st.Done == rows }, nil)
		one, err := c.Scope(1)
		require.NoError(t, err)
		awaitStats(t, "scope 1 at its bound", one.Stats, func(st claim.Stats) bool { return st.Processing == inFlight }, nil)
		requireStats(t, one, rows-inFlight, inFlight, 0, 0)
		sw.mu.Lock()
		require.Equal(t, inFlight, sw.max[1], "scope 1 holds its bound")
		require.ElementsMatch(t, []int{10, 10, 5}, sw.claims[1], "claims of scope 1 stop at the bound")
		sw.mu.Unlock()
		close(gate)
		require.NoError(t, <-errc)
		requireStats(t, one, 0, 0, rows, 0)
		requireStats(t, two, 0, 0, rows, 0)
		n := 0
		calls.Range(func(_, v any) bool {
			n++
			require.EqualValues(t, 1, v.(*atomic.Int32).Load())
			return true
		})
		require.Equal(t, 2*rows, n)
		require.EqualValues(t, rows, twoDone.Load())
		sw.mu.Lock()
		require.Equal(t, inFlight, sw.max[1])
		require.LessOrEqual(t, sw.max[2], inFlight)
		sw.mu.Unlock()
	})
}

package claim_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// TestFairOrderUnderRepending: rows go back to pending at once after every
// claim (a dirty-marked user, a retried row), faster than the one worker
// drains them. Claims that always started at the lowest key took keys 1-10
// on every claim and never the other 90 (the hot-row trial's starvation);
// with the rotating cursor every key is claimed once per sweep. The bound
// of docs/claim.md, checked as the issue states it: the worst key decile's
// longest wait (in claims) at most 3x the best decile's, and no key
// waiting more than 10x the median.
func TestFairOrderUnderRepending(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		const rows, batch, claims = 100, 10, 60
		ctx := ctxT(t)
		c, _ := jobSetup(t, e, s, rows, func(cfg *claim.Config) { cfg.BatchSize, cfg.MaxAttempts = batch, 0 })
		last := map[int64]int{} // key -> the claim that last took it (-1: pending since the start)
		wait := map[int64]int{} // key -> its longest wait, in claims
		for i := range claims {
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, batch, b.Len(), "claim %d: every row is pending again at once", i)
			for _, id := range b.IDs() {
				k := id.(int64)
				from, seen := last[k]
				if !seen {
					from = -1
				}
				wait[k] = max(wait[k], i-from)
				last[k] = i
			}
			_, err = b.Release(ctx)
			require.NoError(t, err)
		}
		// Keys the task holds: the scope's rows are the first 100 keys.
		var waits []int
		for k := int64(1); k <= rows; k++ {
			w := wait[k]
			if from, seen := last[k]; seen {
				w = max(w, claims-from) // still waiting at the end
			} else {
				w = claims + 1 // never claimed
			}
			waits = append(waits, w)
		}
		slices.Sort(waits)
		decile := rows / 10
		best, worst, median := waits[decile-1], waits[rows-1], waits[rows/2]
		t.Logf("longest waits in claims: best decile %d, median %d, worst %d", best, median, worst)
		require.LessOrEqual(t, worst, 3*best, "the worst key decile waited more than 3x the best: %v", waits)
		require.LessOrEqual(t, worst, 10*median, "a key waited more than 10x the median: %v", waits)
	})
}

// TestFairOrderConcurrentWallClock is the fairness bound under sustained
// re-pending load as a service sees it: two claimers (two processes' worth
// of stores, each with its own cursor), two workers each, every claimed row
// pending again at once after its batch (a dirty-marked key, a retried
// row), for ten sweeps of the key space. A key's wait is the wall-clock
// time from its becoming pending to its next claim. Checked as the bound of
// docs/claim.md states it: the worst key decile (by key order, where
// claims from the lowest key starved the high keys) waits at most 3x as
// long as the best, and no key waits more than 10x the median key.
func TestFairOrderConcurrentWallClock(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		const keys, batch, sweeps, claimers, workers = 300, 10, 10, 2, 2
		ctx := ctxT(t)
		first, cfg := jobSetup(t, e, s, keys, func(cfg *claim.Config) { cfg.BatchSize, cfg.MaxAttempts = batch, 0 })
		cs := []*claim.Claimer[job]{first}
		for range claimers - 1 {
			c, err := claim.New(e.d, cfg, jobFields)
			require.NoError(t, err)
			cs = append(cs, c)
		}
		var mu sync.Mutex
		start := time.Now()
		pendingSince := map[int64]time.Time{} // key -> when it last became pending
		longest := map[int64]time.Duration{}  // key -> its longest wait
		total := keys * sweeps / batch
		var claims atomic.Int64
		g, gctx := errgroup.WithContext(ctx)
		for _, c := range cs {
			for range workers {
				g.Go(func() error {
					for claims.Add(1) <= int64(total) {
						b, err := c.Claim(gctx)
						if err != nil {
							return err
						}
						now := time.Now()
						mu.Lock()
						for _, id := range b.IDs() {
							k := id.(int64)
							since, ok := pendingSince[k]
							if !ok {
								since = start
							}
							longest[k] = max(longest[k], now.Sub(since))
						}
						mu.Unlock()
						if _, err := b.Release(gctx); err != nil {
							return err
						}
						now = time.Now()
						mu.Lock()
						for _, id := range b.IDs() {
							pendingSince[id.(int64)] = now
						}
						mu.Unlock()
					}
					return nil
				})
			}
		}
		require.NoError(t, g.Wait())
		end := time.Now()
		// The scope's rows are the first keys; a key still pending at the
		// end has waited since it became pending (never claimed: the
		// whole run).
		waits := make([]time.Duration, keys)
		for k := int64(1); k <= keys; k++ {
			since, ok := pendingSince[k]
			if !ok {
				since = start
			}
			waits[k-1] = max(longest[k], end.Sub(since))
		}
		var deciles [10]time.Duration // by key order: the longest wait of each tenth of the keys
		for i, w := range waits {
			d := i * 10 / keys
			deciles[d] = max(deciles[d], w)
		}
		best, worst := slices.Min(deciles[:]), slices.Max(deciles[:])
		sorted := slices.Sorted(slices.Values(waits))
		median := sorted[keys/2]
		t.Logf("%d claims in %v; longest wait by key decile %v; keys' longest waits: p10 %v, median %v, max %v",
			total, end.Sub(start).Round(time.Millisecond), roundAll(deciles[:]), sorted[keys/10].Round(time.Millisecond),
			median.Round(time.Millisecond), sorted[keys-1].Round(time.Millisecond))
		require.LessOrEqual(t, worst, 3*best, "the worst key decile waited more than 3x the best: %v", roundAll(deciles[:]))
		require.LessOrEqual(t, sorted[keys-1], 10*median, "a key waited more than 10x the median key")
	})
}

// roundAll rounds durations to the millisecond, for messages.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

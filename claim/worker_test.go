package claim_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
)

// waitFor polls cond every few milliseconds for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunProcessesEveryRow(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		const n = 300
		var acked, failed, claims atomic.Int64
		c, _ := jobSetup(t, e, s, n, func(cfg *claim.Config) {
			cfg.MaxAttempts, cfg.HeartbeatInterval = 3, 50*time.Millisecond
			onAck(cfg, func(k int) { acked.Add(int64(k)) })
			watch(cfg, func(e observe.Event) { k := e.Failed; failed.Add(int64(k)) })
			onClaim(cfg, func(k int) { claims.Add(1) })
		})
		var mu sync.Mutex
		seen := map[int64]int{}
		done := map[int64]int{}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			errc <- c.Run(ctx, claim.WorkerConfig[job]{
				Workers: 4, PollMin: time.Millisecond, PollMax: 20 * time.Millisecond,
				Handler: func(ctx context.Context, r claim.Row[job]) error {
					id := r.ID.(int64)
					mu.Lock()
					seen[id]++
					first := seen[id] == 1
					if !(first && (id%10 == 0 || id == 3)) {
						done[id]++
					}
					mu.Unlock()
					if first && id == 3 {
						panic("handler bug")
					}
					if first && id%10 == 0 {
						return errors.New("transient")
					}
					return nil
				},
			})
		}()
		waitFor(t, "all rows done", func() bool {
			st, err := c.Stats(context.Background())
			require.NoError(t, err)
			return st.Done == n
		})
		cancel()
		require.NoError(t, <-errc)
		requireStats(t, c, 0, 0, n, 0)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, done, n)
		for id, k := range done {
			require.Equal(t, 1, k, "row %d completed once", id)
		}
		require.EqualValues(t, n, acked.Load())
		require.EqualValues(t, n/10+1, failed.Load())
		require.Positive(t, claims.Load())
	})
}

func TestRunShutdown(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		const n = 25
		// Release: a handler blocked at cancellation gives its rows back.
		c, _ := jobSetup(t, e, s, n, nil)
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{}, n)
		errc := make(chan error, 1)
		go func() {
			errc <- c.Run(ctx, claim.WorkerConfig[job]{Workers: 2, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond,
				Handler: func(ctx context.Context, r claim.Row[job]) error {
					started <- struct{}{}
					<-ctx.Done()
					return ctx.Err()
				}})
		}()
		<-started
		<-started
		cancel()
		require.NoError(t, <-errc)
		requireStats(t, c, n, 0, 0, 0)

		// Finish: the claimed batch is processed and acked, nothing more.
		c, _ = jobSetup(t, e, s, n, nil)
		ctx, cancel = context.WithCancel(context.Background())
		go func() {
			errc <- c.Run(ctx, claim.WorkerConfig[job]{Workers: 1, ShutdownMode: claim.ShutdownFinish,
				Handler: func(hctx context.Context, r claim.Row[job]) error {
					cancel()
					time.Sleep(time.Millisecond)
					return hctx.Err()
				}})
		}()
		require.NoError(t, <-errc)
		requireStats(t, c, n-10, 0, 10, 0)
	})
}

func TestRunRejectsBadWorkerConfig(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	c, _ := jobSetup(t, e, dialect.StrategyTokenUpdate, 1, nil)
	h := func(context.Context, claim.Row[job]) error { return nil }
	for name, w := range map[string]claim.WorkerConfig[job]{
		"no handler":    {},
		"negative":      {Handler: h, Workers: -1},
		"poll inverted": {Handler: h, PollMin: time.Second, PollMax: time.Millisecond},
		"bad mode":      {Handler: h, ShutdownMode: 7},
	} {
		require.ErrorIs(t, c.Run(context.Background(), w), dialect.ErrInvalidConfig, name)
	}
}

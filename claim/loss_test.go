package claim_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
)

// TestLossDeadlineBeforeReclaim freezes a worker (no heartbeat, no ack) past
// the reaper's timeout while a reaper and a second worker poll. The frozen
// batch's context ends, at its local deadline, before the second worker's
// claim of the same rows succeeds; the frozen worker's late ack reports the
// loss and changes nothing.
func TestLossDeadlineBeforeReclaim(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		const timeout, margin = time.Second, 300 * time.Millisecond
		ctx := ctxT(t)
		c, cfg := jobSetup(t, e, s, 3, func(cfg *claim.Config) { cfg.ReapTimeout, cfg.SafetyMargin = timeout, margin })
		other, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)

		frozen, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, frozen.Len())
		deadline, ok := frozen.Deadline()
		require.True(t, ok)
		require.True(t, time.Until(deadline) <= timeout-margin)
		fctx, cancel := frozen.Context(ctx)
		defer cancel()
		require.NoError(t, fctx.Err())

		// The reaper (with the declared timeout) and a second worker poll
		// until the second worker holds the rows; at that moment the frozen
		// batch must already have been told.
		var second *claim.Batch[job]
		var ctxEnded, errSet bool
		for second == nil {
			_, err := claim.StoreOf(c).Reap(ctx, &store.ReapParams{Timeout: timeout, Limit: 100, ScopeValues: cfg.ScopeValues})
			require.NoError(t, err)
			b, err := other.Claim(ctx)
			require.NoError(t, err)
			if b.Len() > 0 {
				second = b
				ctxEnded, errSet = fctx.Err() != nil, frozen.Err() != nil
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		require.True(t, errSet, "Batch.Err of the frozen batch was nil when another worker claimed its rows")
		require.True(t, ctxEnded, "the frozen batch's context was live when another worker claimed its rows")
		require.Equal(t, frozen.IDs(), second.IDs())
		cause := context.Cause(fctx)
		require.ErrorIs(t, cause, dialect.ErrClaimLost)
		require.ErrorIs(t, cause, dialect.ErrLocalDeadline)
		require.ErrorIs(t, frozen.Err(), dialect.ErrLocalDeadline)

		// The late ack reports every row lost and changes nothing.
		err = frozen.AckAll(ctx)
		var lost *claim.LostError
		require.ErrorAs(t, err, &lost)
		require.ElementsMatch(t, frozen.IDs(), lost.IDs)
		requireStats(t, c, 0, 3, 0, 0)
		require.NoError(t, second.AckAll(ctx), "the new owner's claim is intact")
		requireStats(t, c, 0, 0, 3, 0)
	})
}

// TestRunHandlerSeesLoss: a heartbeat that finds a running batch's rows gone
// cancels its handler's context, even with ShutdownFinish; Run hands out no
// more rows of that batch and counts no failure for it.
func TestRunHandlerSeesLoss(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := ctxT(t)
		var failed atomic.Int64
		c, cfg := jobSetup(t, e, s, 3, func(cfg *claim.Config) {
			cfg.ReapTimeout, cfg.HeartbeatInterval = time.Minute, 50*time.Millisecond
			watch(cfg, func(e observe.Event) { n := e.Failed; failed.Add(int64(n)) })
		})
		other, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)

		started := make(chan struct{})
		causes := make(chan error, 3)
		var calls atomic.Int64
		rctx, stopRun := context.WithCancel(ctx)
		runErr := make(chan error, 1)
		go func() {
			runErr <- c.Run(rctx, claim.WorkerConfig[job]{
				PollMin: time.Millisecond, PollMax: 10 * time.Millisecond,
				ShutdownMode: claim.ShutdownFinish,
				Handler: func(ctx context.Context, r claim.Row[job]) error {
					if calls.Add(1) == 1 {
						close(started)
					}
					<-ctx.Done()
					causes <- context.Cause(ctx)
					return ctx.Err()
				},
			})
		}()
		<-started
		// Shut Run down now: with ShutdownFinish the handler's context is
		// not cancelled by that, only by the loss, and the loop claims
		// nothing more, so the rows stolen below go to the other worker
		// (not back to this loop once it has seen the loss).
		stopRun()
		// Take the rows away under the running batch (as a reaper with a
		// far too short timeout would), and have another worker claim them.
		steal(t, c, cfg)
		second, err := other.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, second.Len())

		cause := <-causes
		require.ErrorIs(t, cause, dialect.ErrClaimLost)
		require.NotErrorIs(t, cause, dialect.ErrLocalDeadline, "found by a heartbeat, long before the deadline")
		require.NoError(t, <-runErr)
		require.EqualValues(t, 1, calls.Load(), "no more rows of the lost batch were handed out")
		require.Zero(t, failed.Load(), "a handler stopped by the loss is not a failure")
		requireStats(t, c, 0, 3, 0, 0)
		require.NoError(t, second.AckAll(ctx))
		requireStats(t, c, 0, 0, 3, 0)
	})
}

// steal returns every processing row of cfg's scope to pending, as a
// reaper with a far too short timeout would, under a batch that heartbeats.
func steal(t *testing.T, c *claim.Claimer[job], cfg claim.Config) {
	t.Helper()
	p := &store.ReapParams{Timeout: time.Millisecond, Limit: 100, ScopeValues: cfg.ScopeValues}
	waitFor(t, "the rows to be reaped", func() bool {
		_, err := claim.StoreOf(c).Reap(context.Background(), p)
		require.NoError(t, err)
		st, err := c.Stats(context.Background())
		require.NoError(t, err)
		return st.Processing == 0
	})
}

// keepAlives counts the running keep-alive goroutines of batches.
func keepAlives() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			// Whether or not the goroutine has run yet.
			return strings.Count(string(buf[:n]), "created by github.com/claimlock/claimlock/claim.(*Batch[...]).KeepAlive in ")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestKeepAliveEnds checks that a keep-alive goroutine ends by itself when
// every row is lost, when its context ends and when the batch holds
// nothing. Not parallel: it counts goroutines while the parallel tests wait.
func TestKeepAliveEnds(t *testing.T) {
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			e := open(t, en)
			ctx := ctxT(t)
			base := keepAlives()
			c, cfg := jobSetup(t, e, strategies(e)[0], 9, func(cfg *claim.Config) { cfg.BatchSize, cfg.HeartbeatInterval = 3, 20*time.Millisecond })
			gone := func(what string) {
				waitFor(t, what, func() bool { return keepAlives() == base })
			}

			// Every row lost.
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			stop := b.KeepAlive(ctx)
			defer stop()
			require.Equal(t, base+1, keepAlives())
			steal(t, c, cfg)
			gone("the keep-alive of a lost batch to end")
			require.ErrorIs(t, b.Err(), dialect.ErrClaimLost)
			stop()

			// Context ended.
			b, err = c.Claim(ctx)
			require.NoError(t, err)
			kctx, cancel := context.WithCancel(ctx)
			stop = b.KeepAlive(kctx)
			defer stop()
			require.Equal(t, base+1, keepAlives())
			cancel()
			gone("the keep-alive to end with its context")
			require.NoError(t, b.Err(), "the batch still holds its rows")
			_, err = b.Release(ctx)
			require.NoError(t, err)
			require.ErrorIs(t, b.Err(), claim.ErrBatchDone)

			// Nothing held any more.
			b, err = c.Claim(ctx)
			require.NoError(t, err)
			stop = b.KeepAlive(ctx)
			defer stop()
			require.Equal(t, base+1, keepAlives())
			require.NoError(t, b.AckAll(ctx))
			gone("the keep-alive of an acked batch to end")
			require.ErrorIs(t, b.Err(), claim.ErrBatchDone)
		})
	}
}

// TestLossConfig checks the validation of ReapTimeout, SafetyMargin and
// the heartbeat interval Run derives from them.
func TestLossConfig(t *testing.T) {
	t.Parallel()
	base := claim.Config{ClaimTable: dialect.ClaimTable{Table: "t"}}
	for name, tc := range map[string]struct {
		edit  func(*claim.Config)
		field string
	}{
		"negative timeout":    {func(c *claim.Config) { c.ReapTimeout = -time.Second }, "ReapTimeout"},
		"tiny timeout":        {func(c *claim.Config) { c.ReapTimeout = time.Microsecond }, "ReapTimeout"},
		"negative margin":     {func(c *claim.Config) { c.ReapTimeout, c.SafetyMargin = time.Second, -1 }, "SafetyMargin"},
		"margin alone":        {func(c *claim.Config) { c.SafetyMargin = time.Second }, "SafetyMargin"},
		"margin eats timeout": {func(c *claim.Config) { c.ReapTimeout, c.SafetyMargin = time.Second, time.Second }, "SafetyMargin"},
	} {
		cfg := base
		tc.edit(&cfg)
		err := cfg.Validate()
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, name)
		require.Contains(t, err.Error(), tc.field, name)
	}
	cfg := base
	cfg.ReapTimeout = time.Second
	require.NoError(t, cfg.Validate())
	cfg.HeartbeatInterval = 950 * time.Millisecond
	err := cfg.Validate()
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.Contains(t, err.Error(), "HeartbeatInterval")
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

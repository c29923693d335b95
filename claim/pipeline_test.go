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
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/await"
	"github.com/claimlock/claimlock/observe"
)

// pipeDialect wraps a dialect so that its claim stores count ack+claim
// calls, or (hide) do not implement store.AckClaimer at all.
type pipeDialect struct {
	dialect.Dialect
	hide  bool
	calls atomic.Int64
}

func (p *pipeDialect) WrapClaims(s store.ClaimStore) store.ClaimStore {
	if p.hide {
		return struct{ store.ClaimStore }{s}
	}
	return &pipeStore{ClaimStore: s, p: p}
}

// Inner implements the store's test wrapping.
func (p *pipeDialect) Inner() dialect.Dialect { return p.Dialect }

type pipeStore struct {
	store.ClaimStore
	p *pipeDialect
}

func (s *pipeStore) AckAndClaim(ctx context.Context, p *store.AckClaimParams, scan func(store.Scanner) error) (store.AckResult, int, error) {
	s.p.calls.Add(1)
	return s.ClaimStore.(store.AckClaimer).AckAndClaim(ctx, p, scan)
}

// TestRunPipelineReportsLostRows: a row the token no longer holds when
// the pipelined ack+claim runs is left untouched and counted as lost; the
// others are acked and the loop goes on.
func TestRunPipelineReportsLostRows(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		var lost, acked atomic.Int64
		pd := &pipeDialect{Dialect: e.d}
		e2 := *e
		e2.d = pd
		c, cfg := jobSetup(t, &e2, s, 25, func(cfg *claim.Config) {
			watch(cfg, func(ev observe.Event) {
				if ev.Op == claim.OpAck {
					lost.Add(int64(ev.Lost))
					acked.Add(int64(ev.Acked))
				}
			})
		})
		var stolen atomic.Value
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- c.Run(runCtx, claim.WorkerConfig[job]{Pipeline: claim.PipelineOn, PollMin: time.Millisecond, PollMax: 10 * time.Millisecond,
				Handler: func(ctx context.Context, r claim.Row[job]) error {
					if stolen.CompareAndSwap(nil, r.ID) {
						e.exec(t, fmt.Sprintf("UPDATE %s SET token = 'thief' WHERE id = ?", cfg.Table), r.ID)
					}
					return nil
				}})
		}()
		await.Progress(t, "24 rows acked", drainStall, 0, func() (await.State, error) {
			n := acked.Load()
			return await.State{Done: n == 24, Progress: n, Seen: fmt.Sprintf("%d acked, %d lost", n, lost.Load())}, nil
		})
		cancel()
		require.NoError(t, <-done)
		require.EqualValues(t, 1, lost.Load(), "the stolen row was reported lost")
		require.Positive(t, pd.calls.Load(), "the loop acked and claimed in one call")
		requireStats(t, c, 0, 1, 24, 0)
		var tok string
		require.NoError(t, e.raw.QueryRowContext(ctx, e.rebind(fmt.Sprintf("SELECT token FROM %s WHERE id = ?", cfg.Table)), stolen.Load()).Scan(&tok))
		require.Equal(t, "thief", tok, "the new owner's row is untouched")
	})
}

// TestRunPipeline runs Run with the pipeline on and off, with handler
// failures: every row is processed, failures are retried, and with the
// pipeline on the loops really ack and claim in one call.
func TestRunPipeline(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		for _, mode := range []claim.Pipeline{claim.PipelineOn, claim.PipelineOff} {
			t.Run(mode.String(), func(t *testing.T) {
				const n = 120
				pd := &pipeDialect{Dialect: e.d}
				var acked atomic.Int64
				_, cfg := jobSetup(t, e, s, n, func(cfg *claim.Config) {
					cfg.MaxAttempts = 3
					onAck(cfg, func(k int) { acked.Add(int64(k)) })
				})
				c, err := claim.New(pd, cfg, jobFields)
				require.NoError(t, err)
				var mu sync.Mutex
				seen := map[int64]int{}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				errc := make(chan error, 1)
				go func() {
					errc <- c.Run(ctx, claim.WorkerConfig[job]{
						Workers: 3, PollMin: time.Millisecond, PollMax: 20 * time.Millisecond, Pipeline: mode,
						Handler: func(ctx context.Context, r claim.Row[job]) error {
							id := r.ID.(int64)
							mu.Lock()
							seen[id]++
							first := seen[id] == 1
							mu.Unlock()
							if first && id%7 == 0 {
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
				require.EqualValues(t, n, acked.Load(), "each row acked once")
				mu.Lock()
				defer mu.Unlock()
				for id, k := range seen {
					if id%7 == 0 {
						require.Equal(t, 2, k, "row %d failed once, then done", id)
					} else {
						require.Equal(t, 1, k, "row %d", id)
					}
				}
				if mode == claim.PipelineOn {
					require.NotZero(t, pd.calls.Load(), "the loops acked and claimed in one call")
				} else {
					require.Zero(t, pd.calls.Load())
				}
			})
		}
	})
}

// TestRunPipelineConfig checks Run's refusals of a bad Pipeline.
func TestRunPipelineConfig(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		_, cfg := jobSetup(t, e, s, 1, nil)
		handler := func(context.Context, claim.Row[job]) error { return nil }
		c, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)
		err = c.Run(context.Background(), claim.WorkerConfig[job]{Handler: handler, Pipeline: 7})
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		hidden, err := claim.New(&pipeDialect{Dialect: e.d, hide: true}, cfg, jobFields)
		require.NoError(t, err)
		err = hidden.Run(context.Background(), claim.WorkerConfig[job]{Handler: handler, Pipeline: claim.PipelineOn})
		require.ErrorIs(t, err, dialect.ErrNotSupported)
	})
}

// An Observer wraps the claimer's store; the wrapper keeps the store's
// ack+claim visible (else Run with PipelineOn would refuse it), and
// reports its ack.
func TestObservedStoreKeepsPipeline(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		var mu sync.Mutex
		var acked int
		c, _ := jobSetup(t, e, s, 4, func(cfg *claim.Config) {
			cfg.BatchSize = 2
			cfg.Observer = observe.Func(func(_ context.Context, ev observe.Event) {
				if ev.Op == claim.OpAck {
					mu.Lock()
					acked += ev.Acked
					mu.Unlock()
				}
			})
		})
		_, ok := claim.StoreOf(c).(store.AckClaimer)
		require.True(t, ok, "the observed store still acks and claims in one round trip")
		runCtx, cancel := context.WithCancel(ctx)
		var handled atomic.Int32
		require.NoError(t, c.Run(runCtx, claim.WorkerConfig[job]{Pipeline: claim.PipelineOn, PollMin: time.Millisecond, PollMax: 10 * time.Millisecond,
			Handler: func(context.Context, claim.Row[job]) error {
				if handled.Add(1) == 4 {
					cancel()
				}
				return nil
			}}))
		requireStats(t, c, 0, 0, 4, 0)
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, 4, acked, "the pipelined ack is reported like any ack")
	})
}

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
	"github.com/claimlock/claimlock/internal/store"
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

// TestAckAllAndClaimLoop drains a scope with a hand-written loop: each
// batch's acks (one of them deferred) are written together with the next
// claim, and every row ends done exactly once.
func TestAckAllAndClaimLoop(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		const n = 35
		var acked, claims atomic.Int64
		c, _ := jobSetup(t, e, s, n, func(cfg *claim.Config) {
			cfg.AckDelay = time.Hour
			cfg.Hooks.OnAck = func(k int) { acked.Add(int64(k)) }
			cfg.Hooks.OnClaim = func(int, time.Duration) { claims.Add(1) }
		})
		seen := map[any]bool{}
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		for b.Len() > 0 {
			for _, r := range b.Rows() {
				require.False(t, seen[r.ID], "row %v handed out twice", r.ID)
				seen[r.ID] = true
			}
			require.NoError(t, b.AckLater(b.Rows()[0].ID))
			next, err := c.AckAllAndClaim(ctx, b)
			require.NoError(t, err)
			require.Empty(t, b.Unacked())
			require.ErrorIs(t, b.Err(), claim.ErrBatchDone)
			require.NoError(t, b.Flush(ctx), "the deferred ack rode along")
			b = next
		}
		require.Len(t, seen, n)
		require.EqualValues(t, n, acked.Load())
		require.EqualValues(t, 5, claims.Load(), "four full batches and the empty one")
		requireStats(t, c, 0, 0, n, 0)
	})
}

// TestAckAndClaimLost checks that a lost row is reported exactly, the other
// rows acked, and the next batch claimed without it.
func TestAckAndClaimLost(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		c, cfg := jobSetup(t, e, s, 25, nil)
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 10, b.Len())
		lostID := b.Rows()[4].ID
		n, err := c.Store().Release(ctx, b.Token(), []any{lostID})
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		cfg.BatchSize = 1
		other, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)
		ob, err := other.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, []any{lostID}, ob.IDs(), "another worker took the released row")

		ids := b.IDs()
		next, err := c.AckAndClaim(ctx, b, ids[:6]...)
		require.ErrorIs(t, err, claim.ErrClaimLost)
		var le *claim.LostError
		require.ErrorAs(t, err, &le)
		require.Equal(t, []any{lostID}, le.IDs)
		require.NotNil(t, next, "the claim happened with the ack")
		require.Equal(t, 10, next.Len())
		for _, r := range next.Rows() {
			require.NotContains(t, ids, r.ID)
		}
		require.ErrorIs(t, b.Err(), claim.ErrClaimLost)
		require.Equal(t, ids[6:], b.Unacked(), "rows not named stay held")
		require.NoError(t, b.AckAll(ctx))
		require.NoError(t, next.AckAll(ctx))
		require.NoError(t, ob.AckAll(ctx))
		requireStats(t, c, 5, 0, 20, 0)
	})
}

// TestAckAndClaimBadInput checks that bad input writes and claims nothing.
func TestAckAndClaimBadInput(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		c, cfg := jobSetup(t, e, s, 15, nil)
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		_, err = c.AckAllAndClaim(ctx, nil)
		require.ErrorIs(t, err, claim.ErrInvalidConfig)
		other, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)
		_, err = other.AckAllAndClaim(ctx, b)
		require.ErrorIs(t, err, claim.ErrInvalidConfig)
		_, err = c.AckAndClaim(ctx, b, int64(1_000_000))
		require.ErrorIs(t, err, claim.ErrNotHeld)
		_, err = c.AckAndClaim(ctx, b, "not an integer key")
		require.ErrorIs(t, err, claim.ErrInvalidConfig)
		requireStats(t, c, 5, 10, 0, 0)
		require.Len(t, b.Unacked(), 10)

		// A deferred ack rides along with the named rows, once.
		ids := b.IDs()
		require.NoError(t, b.AckLater(ids[0]))
		next, err := c.AckAndClaim(ctx, b, ids[1])
		require.NoError(t, err)
		require.NoError(t, b.Flush(ctx))
		require.Equal(t, ids[2:], b.Unacked())
		require.Equal(t, 5, next.Len())
		requireStats(t, c, 0, 13, 2, 0)
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
					cfg.Hooks.OnAck = func(k int) { acked.Add(int64(k)) }
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
		require.ErrorIs(t, err, claim.ErrInvalidConfig)
		hidden, err := claim.New(&pipeDialect{Dialect: e.d, hide: true}, cfg, jobFields)
		require.NoError(t, err)
		err = hidden.Run(context.Background(), claim.WorkerConfig[job]{Handler: handler, Pipeline: claim.PipelineOn})
		require.ErrorIs(t, err, claim.ErrNotSupported)
	})
}

// An Observer wraps the claimer's store; the wrapper keeps the store's
// ack+claim visible (else Run with PipelineOn would refuse it and
// AckAllAndClaim would quietly take two round trips), and reports its ack.
func TestObservedStoreKeepsPipeline(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		var mu sync.Mutex
		var acked int
		c, _ := jobSetup(t, e, s, 4, func(cfg *claim.Config) {
			cfg.BatchSize = 2
			cfg.Hooks.Observer = claim.ObserverFunc(func(_ context.Context, ev claim.Event) {
				if ev.Op == claim.OpAck {
					mu.Lock()
					acked += ev.Acked
					mu.Unlock()
				}
			})
		})
		_, ok := c.Store().(store.AckClaimer)
		require.True(t, ok, "the observed store still acks and claims in one round trip")
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		next, err := c.AckAllAndClaim(ctx, b)
		require.NoError(t, err)
		require.Equal(t, 2, next.Len())
		require.NoError(t, next.AckAll(ctx))
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, 4, acked, "the pipelined ack is reported like any ack")
	})
}

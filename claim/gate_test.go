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

// gateDialect wraps a dialect so that its claim stores record how many
// Claim calls run at once, each held open for hold, and (when capsConc is
// set) so that its capabilities report capsConc as the engine's default
// claim concurrency.
type gateDialect struct {
	dialect.Dialect
	hold          time.Duration
	capsConc      int
	inFlight, max atomic.Int32
	entered       chan struct{} // receives a value as each Claim starts
}

func (g *gateDialect) Capabilities() dialect.Capabilities {
	c := g.Dialect.Capabilities()
	if g.capsConc != 0 {
		c.ClaimConcurrency = g.capsConc
	}
	return c
}

func (g *gateDialect) WrapClaims(s store.ClaimStore) store.ClaimStore {
	return &gateStore{ClaimStore: s, g: g}
}

// Inner implements the store's test wrapping.
func (g *gateDialect) Inner() dialect.Dialect { return g.Dialect }

type gateStore struct {
	store.ClaimStore
	g *gateDialect
}

func (s *gateStore) Claim(ctx context.Context, p *store.ClaimParams, scan func(store.Scanner) error) (int, error) {
	n := s.g.inFlight.Add(1)
	defer s.g.inFlight.Add(-1)
	for {
		m := s.g.max.Load()
		if n <= m || s.g.max.CompareAndSwap(m, n) {
			break
		}
	}
	if s.g.entered != nil {
		s.g.entered <- struct{}{}
	}
	time.Sleep(s.g.hold)
	return s.ClaimStore.Claim(ctx, p, scan)
}

// TestClaimConcurrencyBound checks that a claimer runs at most
// ClaimConcurrency claim statements at once (the engine's default when it is
// zero, none when negative) while every row is still claimed exactly once.
func TestClaimConcurrencyBound(t *testing.T) {
	t.Parallel()
	const goroutines, rows = 8, 160
	for _, tc := range []struct {
		name            string
		setting, engine int   // Config.ClaimConcurrency, the engine's default
		want            int32 // the most claims in flight at once
	}{
		{"one", 1, 0, 1},
		{"three", 3, 0, 3},
		{"three over the engine's two", 3, 2, 3},
		{"engine default", 0, 2, 2},
		{"no bound from the engine", 0, 0, goroutines},
		{"no bound over the engine's two", -1, 2, goroutines},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := open(t, engines[0])
			g := &gateDialect{Dialect: e.d, hold: 20 * time.Millisecond, capsConc: tc.engine}
			if tc.engine == 0 {
				require.Zero(t, e.d.Capabilities().ClaimConcurrency, "this case wants an engine without a default bound")
			}
			c, _ := jobSetup(t, &env{kind: e.kind, d: g, raw: e.raw, dollar: e.dollar}, dialect.StrategyTokenUpdate, rows,
				func(cfg *claim.Config) { cfg.ClaimConcurrency = tc.setting })
			ctx := context.Background()
			var claimed atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for {
						b, err := c.Claim(ctx)
						if !assertNoError(t, err) || b.Len() == 0 {
							return
						}
						claimed.Add(int64(b.Len()))
						assertNoError(t, b.AckAll(ctx))
					}
				})
			}
			wg.Wait()
			require.EqualValues(t, rows, claimed.Load())
			if tc.want == goroutines {
				// Unbounded: more claims ran at once than any bound of
				// this test allows (all eight usually; a loaded machine
				// may start the goroutines too far apart for that).
				require.Greater(t, g.max.Load(), int32(3), "most claims in flight at once")
			} else {
				// Eight goroutines holding each claim 20 ms keep every
				// slot busy: the bound is reached and never exceeded.
				require.Equal(t, tc.want, g.max.Load(), "most claims in flight at once")
			}
			requireStats(t, c, 0, 0, rows, 0)
		})
	}
}

// TestClaimWaitHonoursContext checks that a claim waiting for a claim slot
// returns when its context ends, without touching the database.
func TestClaimWaitHonoursContext(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	g := &gateDialect{Dialect: e.d, hold: 300 * time.Millisecond, entered: make(chan struct{}, 4)}
	c, _ := jobSetup(t, &env{kind: e.kind, d: g, raw: e.raw, dollar: e.dollar}, dialect.StrategyTokenUpdate, 10,
		func(cfg *claim.Config) { cfg.ClaimConcurrency = 1 })
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		b, err := c.Claim(ctx)
		if err == nil {
			err = b.AckAll(ctx)
		}
		first <- err
	}()
	<-g.entered // the first claim holds the only slot
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := c.Claim(wctx)
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
	require.Len(t, g.entered, 0, "the waiting claim never reached the store")
	require.NoError(t, <-first)
}

// assertNoError reports err from a goroutine other than the test's own.
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

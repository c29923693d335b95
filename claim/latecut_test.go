package claim_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// lateServer is a claim store whose claims the client stops waiting for
// (the claim's context ends) while the server goes on: it runs the real
// claim after lag, on a context of its own, and returns the caller's
// context error at once, as go-sql-driver/mysql does when it closes the
// connection of a statement that MySQL then finishes and commits.
type lateServer struct {
	store.ClaimStore
	lag  time.Duration
	cut  context.CancelFunc // ends the claim's context
	done chan lateClaim
	// failing says which releases of the claim's token fail (by their
	// number, from 1) with an error that may pass, as releases failed
	// where the server ran out of connections (it was still finishing
	// the statements of connections that go-sql-driver/mysql had closed).
	failing  func(n int32) bool
	releases atomic.Int32
}

// errNoConnections is an error that may pass, as MySQL's "Too many
// connections".
var errNoConnections = errors.New("too many connections")

func (s *lateServer) Release(ctx context.Context, token string, ids []any) (int64, error) {
	if n := s.releases.Add(1); s.failing != nil && s.failing(n) {
		return 0, errNoConnections
	}
	return s.ClaimStore.Release(ctx, token, ids)
}

// lateClaim is what the server's late claim did.
type lateClaim struct {
	n   int
	err error
}

func (s *lateServer) Claim(ctx context.Context, p *store.ClaimParams, _ func(store.Scanner) error) (int, error) {
	s.cut()
	<-ctx.Done()
	q := *p
	go func() {
		time.Sleep(s.lag)
		n, err := s.ClaimStore.Claim(context.Background(), &q, func(store.Scanner) error { return nil })
		s.done <- lateClaim{n, err}
	}()
	// As the store reports a write whose context ended while the server
	// had it.
	return 0, fmt.Errorf("%w: %w", dialect.ErrOutcomeUnknown, ctx.Err())
}

// TestClaimFinishedLate: a claim cut short whose statement the server
// finishes after the claim returned, and after the claim's first release
// of its token found nothing, leaves no row processing: the release is
// tried again until it finds the rows, with no reaper. On every engine,
// with every strategy (the lag is longer than the first late release's
// pause, shorter than the last's). Also when releases fail with an error
// that may pass: the first one (the release is retried after the outage,
// finds nothing yet, and goes on late), or the first two late ones.
func TestClaimFinishedLate(t *testing.T) {
	t.Parallel()
	failures := []struct {
		name    string
		failing func(n int32) bool
	}{
		{"releases-succeed", nil},
		{"first-release-fails", func(n int32) bool { return n == 1 }},
		{"late-releases-fail", func(n int32) bool { return n == 2 || n == 3 }},
	}
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		for _, f := range failures {
			t.Run(f.name, func(t *testing.T) {
				c, _ := jobSetup(t, e, s, 5, nil)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				srv := &lateServer{lag: 400 * time.Millisecond, cut: cancel, done: make(chan lateClaim, 1), failing: f.failing}
				claim.WrapStore(c, func(cs store.ClaimStore) store.ClaimStore {
					srv.ClaimStore = cs
					return srv
				})
				_, err := c.Claim(ctx)
				require.ErrorIs(t, err, context.Canceled)
				late := <-srv.done
				require.NoError(t, late.err, "the server's late claim")
				require.Equal(t, 5, late.n, "the server's late claim marks every row")
				require.Eventually(t, func() bool {
					st, err := c.Stats(context.Background())
					return err == nil && st.Processing == 0
				}, 6*time.Second, 20*time.Millisecond, "the late claim's rows stayed processing")
				requireStats(t, c, 5, 0, 0, 0)
			})
		}
	})
}

package claim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// lateReplyDialect wraps a dialect so that, once armed, the next claim or
// heartbeat of its claim stores runs its statement and then waits before
// returning until the test lets it go: a reply that is slow to come back.
// The database wrote claimed_at early in that call; the library learns of
// it late.
type lateReplyDialect struct {
	dialect.Dialect
	hold chan chan struct{} // an armed hold; the call waits for the inner channel
	ran  chan struct{}      // receives once the held call's statement has run
}

func newLateReplyDialect(d dialect.Dialect) *lateReplyDialect {
	return &lateReplyDialect{Dialect: d, hold: make(chan chan struct{}, 1), ran: make(chan struct{}, 1)}
}

// holdNext makes the next claim or heartbeat wait after its statement, and
// returns the function that lets it return.
func (l *lateReplyDialect) holdNext() (let func()) {
	ch := make(chan struct{})
	l.hold <- ch
	return func() { close(ch) }
}

// wait holds the calling operation if a hold is armed.
func (l *lateReplyDialect) wait() {
	select {
	case ch := <-l.hold:
		l.ran <- struct{}{}
		<-ch
	default:
	}
}

func (l *lateReplyDialect) WrapClaims(st store.ClaimStore) store.ClaimStore {
	return &lateReplyStore{ClaimStore: st, l: l}
}

// Inner implements the store's test wrapping.
func (l *lateReplyDialect) Inner() dialect.Dialect { return l.Dialect }

type lateReplyStore struct {
	store.ClaimStore
	l *lateReplyDialect
}

func (s *lateReplyStore) Claim(ctx context.Context, p *store.ClaimParams, scan func(store.Scanner) error) (int, error) {
	n, err := s.ClaimStore.Claim(ctx, p, scan)
	s.l.wait()
	return n, err
}

func (s *lateReplyStore) Heartbeat(ctx context.Context, token string) ([]any, error) {
	held, err := s.ClaimStore.Heartbeat(ctx, token)
	s.l.wait()
	return held, err
}

// whileHeld runs op with the next claim or heartbeat held after its
// statement, and returns an instant taken while it was held: after the
// statement was sent, before the call returned. The sleeps on either side
// keep the instant apart from both on any clock resolution.
func whileHeld(t *testing.T, l *lateReplyDialect, op func()) (mid time.Time) {
	t.Helper()
	let := l.holdNext()
	done := make(chan struct{})
	go func() {
		defer close(done)
		op()
	}()
	select {
	case <-l.ran:
	case <-time.After(30 * time.Second):
		let()
		t.Fatal("the held call never ran its statement")
	}
	time.Sleep(10 * time.Millisecond)
	mid = time.Now()
	time.Sleep(10 * time.Millisecond)
	let()
	<-done
	return mid
}

// TestLocalDeadlineFromStatementStart: a batch's local deadline is (local
// start of the claim, or of the last heartbeat that found every row held) +
// ReapTimeout - SafetyMargin. The database writes claimed_at at some
// instant after that start, so a deadline measured from when the reply
// arrived could come after the reaper may take the rows: with a reply held
// back, the deadline must still be measured from before the statement.
func TestLocalDeadlineFromStatementStart(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	l := newLateReplyDialect(e.d)
	const timeout, margin = time.Hour, 10 * time.Minute
	const life = timeout - margin
	c, _ := jobSetup(t, &env{kind: e.kind, d: l, raw: e.raw, dollar: e.dollar}, dialect.StrategyTokenUpdate, 3,
		func(cfg *claim.Config) { cfg.ReapTimeout, cfg.SafetyMargin = timeout, margin })
	ctx := ctxT(t)

	var b *claim.Batch[job]
	before := time.Now()
	mid := whileHeld(t, l, func() {
		var err error
		b, err = c.Claim(ctx)
		assertNoError(t, err)
	})
	require.NotNil(t, b)
	require.Equal(t, 3, b.Len())
	claimed, ok := b.Deadline()
	require.True(t, ok)
	require.False(t, claimed.Before(before.Add(life)), "the claim's deadline is before its start + ReapTimeout - SafetyMargin")
	require.True(t, claimed.Before(mid.Add(life)),
		"the claim's deadline is measured from when its reply arrived (%v after an instant while the reply was held), not from the start of its statement",
		claimed.Sub(mid.Add(life)))

	before = time.Now()
	mid = whileHeld(t, l, func() {
		n, err := b.Heartbeat(ctx)
		assertNoError(t, err)
		if n != 3 {
			t.Errorf("the heartbeat found %d rows held, want 3", n)
		}
	})
	moved, ok := b.Deadline()
	require.True(t, ok)
	require.True(t, moved.After(claimed), "a heartbeat that found every row held moves the deadline")
	require.False(t, moved.Before(before.Add(life)), "the heartbeat's deadline is before its start + ReapTimeout - SafetyMargin")
	require.True(t, moved.Before(mid.Add(life)),
		"the heartbeat's deadline is measured from when its reply arrived (%v after an instant while the reply was held), not from the start of its statement",
		moved.Sub(mid.Add(life)))
	require.NoError(t, b.Err())
	require.NoError(t, b.AckAll(ctx))
}

// TestHeartbeatPartialLoss: a heartbeat that finds only some of the
// batch's rows still held (another token took one of them) loses that row
// only: it reports it by key, Batch.Lost lists it, and the batch goes on
// (Done open, Err nil, its Context live). The batch ends, with ErrClaimLost
// (not the local deadline: there is none here), only when a heartbeat finds
// the last rows it held lost. The new owner's claim is untouched.
func TestHeartbeatPartialLoss(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := ctxT(t)
		c, cfg := jobSetup(t, e, s, 3, nil)
		other, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, b.Len())
		bctx, cancel := b.Context(ctx)
		defer cancel()
		ids := b.IDs()

		// One row goes back to pending under the batch (as a reaper with a
		// far too short timeout would return it) and another worker claims
		// it under its own token.
		taken := ids[1]
		n, err := claim.StoreOf(c).Release(ctx, b.Token(), []any{taken})
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		second, err := other.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, []any{taken}, second.IDs())
		require.NoError(t, b.Err(), "nothing has told the batch yet")

		held, err := b.Heartbeat(ctx)
		var lost *claim.LostError
		require.ErrorAs(t, err, &lost)
		require.ErrorIs(t, err, dialect.ErrClaimLost)
		require.Equal(t, []any{taken}, lost.IDs)
		require.EqualValues(t, 2, held, "the heartbeat still returns the rows held")
		require.Equal(t, []any{taken}, b.Lost())
		require.Equal(t, []any{ids[0], ids[2]}, b.Unacked(), "the lost row is closed")
		require.NoError(t, b.Err(), "a heartbeat that found one row lost ended the batch")
		require.NoError(t, bctx.Err())
		held, err = b.Heartbeat(ctx)
		require.NoError(t, err, "a lost row is reported once")
		require.EqualValues(t, 2, held)

		// The last rows lost: now the batch ends, lost.
		_, err = claim.StoreOf(c).Release(ctx, b.Token(), nil)
		require.NoError(t, err)
		_, err = b.Heartbeat(ctx)
		require.ErrorAs(t, err, &lost)
		require.Equal(t, []any{ids[0], ids[2]}, lost.IDs)
		require.Equal(t, ids, b.Lost())
		select {
		case <-b.Done():
		default:
			t.Fatal("a heartbeat that found the last rows lost left the batch running")
		}
		require.ErrorIs(t, b.Err(), dialect.ErrClaimLost)
		require.NotErrorIs(t, b.Err(), dialect.ErrLocalDeadline)
		select {
		case <-bctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the batch's context was not cancelled by the loss")
		}
		require.ErrorIs(t, context.Cause(bctx), dialect.ErrClaimLost)
		require.NoError(t, b.AckAll(ctx), "nothing held, nothing unreported")
		requireStats(t, c, 2, 1, 0, 0)
		require.NoError(t, second.AckAll(ctx), "the new owner's claim is intact")
		requireStats(t, c, 2, 0, 1, 0)
	})
}

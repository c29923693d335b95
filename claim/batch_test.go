package claim_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// TestKeysNormalisedOnce: keys passed to a batch are normalised with
// dialect.NormalizeKey; one that does not fit the key column is an error,
// never a wrapped value that might name another row.
func TestKeysNormalisedOnce(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	c, _ := jobSetup(t, e, dialect.StrategyTokenUpdate, 5, nil)
	ctx := context.Background()
	b, err := c.Claim(ctx)
	require.NoError(t, err)
	first := b.IDs()[0].(int64)

	// uint64(math.MaxUint64) would wrap to -1, and 1<<63 + first to a
	// negative key: both are errors, not ErrNotHeld of a wrapped key.
	for _, bad := range []any{uint64(math.MaxUint64), uint64(1<<63) + uint64(first), uint(math.MaxUint64)} {
		err := b.Ack(ctx, bad)
		require.ErrorIs(t, err, claim.ErrInvalidConfig, "%v", bad)
		require.NotErrorIs(t, err, claim.ErrNotHeld)
		require.ErrorContains(t, err, "claim: ack: ")
		require.ErrorContains(t, err, "overflows")
		require.ErrorIs(t, b.AckLater(bad), claim.ErrInvalidConfig)
		require.ErrorIs(t, b.Fail(ctx, bad, errors.New("x")), claim.ErrInvalidConfig)
	}
	for _, bad := range []any{"1", 1.0, nil, []byte("1")} {
		require.ErrorIs(t, b.Ack(ctx, bad), claim.ErrInvalidConfig, "%#v", bad)
	}
	require.Len(t, b.Unacked(), 5, "nothing was written")

	// Every integer type that fits names the same row.
	require.NoError(t, b.Ack(ctx, uint64(first)))
	for _, same := range []any{first, int(first), int32(first), uint8(first), uint(first)} {
		require.ErrorIs(t, b.Ack(ctx, same), claim.ErrNotHeld, "%T", same)
	}
	require.NoError(t, b.AckAll(ctx))
}

// TestBatchErrorMessages: a message names the package and the operation
// once.
func TestBatchErrorMessages(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	c, _ := jobSetup(t, e, dialect.StrategyTokenUpdate, 4, nil)
	ctx := context.Background()
	old, err := c.Claim(ctx)
	require.NoError(t, err)
	ids := old.IDs()
	require.EqualError(t, old.Ack(ctx, 99), "claim: ack: id 99 (int) is not held by this batch")
	require.EqualError(t, old.AckLater(99), "claim: ack later: id 99 (int) is not held by this batch")
	require.EqualError(t, old.Fail(ctx, 99, nil), "claim: fail: id 99 (int) is not held by this batch")

	time.Sleep(20 * time.Millisecond)
	_, err = c.Store().Reap(ctx, &dialect.ReapParams{Timeout: time.Millisecond, Limit: 100})
	require.NoError(t, err)
	require.EqualError(t, old.Ack(ctx, ids[:3]...), "claim: ack: lost 3 rows [1 2 3]: reaped or released, possibly re-claimed")
	require.EqualError(t, old.Fail(ctx, ids[3], errors.New("x")), "claim: fail: lost 1 row [4]: reaped or released, possibly re-claimed")
	_, err = old.Heartbeat(ctx)
	require.NoError(t, err, "nothing held, nothing expected")
}

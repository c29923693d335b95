package loop

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDoubled(t *testing.T) {
	for _, c := range []struct {
		n         int
		base, max time.Duration
		want      time.Duration
	}{
		{0, 5, 100, 5},
		{1, 5, 100, 10},
		{3, 5, 100, 40},
		{4, 5, 100, 80},
		{5, 5, 100, 100}, // capped
		{1000, 5, 100, 100},
		{math.MaxInt, time.Second, time.Hour, time.Hour}, // no overflow
		{3, 200, 100, 100}, // base above max
		{3, 5, 0, 5},       // no max: no doubling
		{3, 5, -1, 5},
		{-1, 5, 100, 5},
	} {
		require.Equal(t, c.want, Doubled(c.n, c.base, c.max), "Doubled(%d, %v, %v)", c.n, c.base, c.max)
	}
}

// draws returns the set of values f returned in n calls.
func draws(n int, f func() time.Duration) map[time.Duration]bool {
	seen := map[time.Duration]bool{}
	for range n {
		seen[f()] = true
	}
	return seen
}

// span returns the set {lo, lo+1, ..., hi}.
func span(lo, hi time.Duration) map[time.Duration]bool {
	s := map[time.Duration]bool{}
	for d := lo; d <= hi; d++ {
		s[d] = true
	}
	return s
}

// TestJitterRanges checks each jitter draws exactly the values of its
// range: every one of them turns up in 2000 draws (a value of a range of 9
// is missed with probability (8/9)^2000, about 1e-102), and none outside.
func TestJitterRanges(t *testing.T) {
	require.Equal(t, span(8, 16), draws(2000, func() time.Duration { return Equal(16) }))
	require.Equal(t, span(8, 16), draws(2000, func() time.Duration { return Equal(17) }), "d/2 rounds down, and the top is twice d/2")
	require.Equal(t, span(8, 12), draws(2000, func() time.Duration { return Spread(10, 10*2/5) }), "±20%")
	require.Equal(t, span(15, 25), draws(2000, func() time.Duration { return Spread(20, 20/2) }), "±25%")
	require.Equal(t, span(20, 40), draws(2000, func() time.Duration { return Backoff(2, 10, 40) }))
	require.Equal(t, span(20, 40), draws(2000, func() time.Duration { return Backoff(9, 10, 40) }), "capped")
}

func TestJitterEdges(t *testing.T) {
	require.Equal(t, time.Duration(0), Equal(0))
	require.Equal(t, time.Duration(-3), Equal(-3))
	require.Equal(t, time.Duration(0), Equal(1), "1/2 rounds down to 0, and so does the top")
	require.Equal(t, time.Duration(7), Spread(7, 0))
	require.Equal(t, time.Duration(7), Spread(7, -1))
	require.Equal(t, time.Duration(0), Backoff(3, 0, time.Second))
	require.Equal(t, time.Duration(0), Backoff(3, -time.Second, time.Second))
	for range 100 {
		d := Backoff(math.MaxInt, time.Second, time.Hour)
		require.True(t, d >= 30*time.Minute && d <= time.Hour, "Backoff of a huge n stays in [max/2, max]: %v", d)
	}
}

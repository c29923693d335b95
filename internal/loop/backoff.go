package loop

import (
	"math/rand/v2"
	"time"
)

// Doubled returns base doubled n times (n counts from 0), no further once
// it reaches max, and capped at max. A non-positive max means no doubling:
// base is returned as is. The doubling stops at max, so a large n never
// overflows.
func Doubled(n int, base, max time.Duration) time.Duration {
	d := base
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	if max > 0 && d > max {
		d = max
	}
	return d
}

// Backoff returns the jittered delay before try number n (0-based): base
// doubled n times, capped at max ([Doubled]), drawn uniformly from
// [d/2, d] ([Equal]). A non-positive base returns 0. Pollers use it so
// that a fleet does not wake in step.
func Backoff(n int, base, max time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	return Equal(Doubled(n, base, max))
}

// Equal returns a delay drawn uniformly from [d/2, d] ("equal jitter":
// never less than half the delay, never more than all of it). In whole
// nanoseconds the range is [d/2, 2*(d/2)], d/2 rounded down: an odd d
// never draws d itself. A non-positive d is returned as is.
func Equal(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// Spread returns d moved by a uniform offset: a delay drawn from
// [d - span/2, d - span/2 + span], so that Spread(d, d*2/5) is d ± 20% and
// Spread(d, d/2) is d ± 25%. A non-positive span returns d as is.
func Spread(d, span time.Duration) time.Duration {
	if span <= 0 {
		return d
	}
	return d - span/2 + rand.N(span+1)
}

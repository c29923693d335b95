package store

import (
	"math/rand/v2"
	"time"
)

// Backoff returns the jittered delay before poll number n (0-based): base
// doubled n times, capped at max, drawn uniformly from [d/2, d]. Pollers in
// the orchestration packages use it so that a fleet does not wake in step.
func Backoff(n int, base, max time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	if max > 0 && d > max {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}

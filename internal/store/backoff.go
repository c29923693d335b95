package store

import (
	"time"

	"github.com/claimlock/claimlock/internal/loop"
)

// Backoff is [loop.Backoff], the one backoff of the module: the jittered
// delay before poll number n (0-based), base doubled n times, capped at
// max, drawn uniformly from [d/2, d]. New code calls loop.Backoff; this
// name stays for the callers not moved onto package loop yet.
func Backoff(n int, base, max time.Duration) time.Duration { return loop.Backoff(n, base, max) }

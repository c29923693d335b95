package claim

import "github.com/claimlock/claimlock/internal/store"

// StoreOf returns the claim store of c (with its observer's wrapper), for
// tests that reap, heartbeat or read what the claimer wrote.
func StoreOf[T any](c *Claimer[T]) store.ClaimStore { return c.core.cs }

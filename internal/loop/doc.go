// Package loop is the one shape of every background loop in claimlock: the
// reapers, the leader elector, the coalescer's flusher, the scheduler, the
// keep-alives of batches (held ones too) and leases, the loops of
// claim.Holder.Run, the PostgreSQL listener's reconnects and the deadlock
// retries. It holds one backoff ([Backoff]: a capped doubling with equal
// jitter, or [Doubled] with the jitter of the caller's choice, [Equal] or
// [Spread]), one context-aware sleep ([Sleep]) and one loop ([Loop.Run]):
// a step run again and again, waiting between steps as the step says (at
// once, a pause, or a poll that a wake-up cuts short), until the context
// ends, a stop channel closes or a step ends it with its error.
//
// A wait that is no duration is the step's own: a loop of
// claim.Holder.Run whose hold found nothing waits in the claimer's waker
// (one idle loop polls, the others wait for a wake-up) before its step
// ends. The loops of claim.Claimer.Run keep a loop of their own: all their
// waits are of that kind (the waker, their turn among the scopes served)
// and a turn hands the next the batch its ack claimed, so Loop would add
// only its end; they sleep with [Sleep] and [Backoff].
//
// It imports only the standard library, so every package of the module may
// use it; it knows nothing of rows, leases or engines.
package loop

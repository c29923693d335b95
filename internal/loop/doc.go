// Package loop is the one shape of every background loop in claimlock: the
// reapers, the leader elector, the coalescer's flusher, the scheduler, the
// keep-alives of batches and leases, the PostgreSQL listener's reconnects
// and the deadlock retries. It holds one backoff ([Backoff]: a capped
// doubling with equal jitter, or [Doubled] with the jitter of the caller's
// choice, [Equal] or [Spread]), one context-aware sleep ([Sleep]) and one
// loop ([Loop.Run]): a step run again and again, waiting between steps as
// the step says (at once, a pause, or a poll that a wake-up cuts short),
// until the context ends, a stop channel closes or a step ends it with
// its error.
//
// It imports only the standard library, so every package of the module may
// use it; it knows nothing of rows, leases or engines.
package loop

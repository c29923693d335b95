// Package dialect is the boundary between claimlock's orchestration packages
// ([github.com/claimlock/claimlock/claim], [github.com/claimlock/claimlock/tasklock]
// and [github.com/claimlock/claimlock/zombie]) and one database engine.
//
// A [Dialect] is constructed by an engine package (dialect/mysql,
// dialect/postgres, dialect/sqlite) from a handle the caller already has. The
// orchestration packages describe a table once ([ClaimTable], [LeaseTable]),
// receive a prepared store ([ClaimStore], [LeaseStore]) whose statements were
// built from validated, quoted identifiers, and then call one method per
// operation with a params struct. Only engine packages hold SQL text; engine
// differences reach callers as [Capabilities], never as type switches.
//
// # Contract
//
// Every dialect honours the same semantics, proven by the exported conformance
// suite in dialect/dialecttest:
//
//   - Ages and expiries are computed on the database clock, inside the
//     statement that compares them. Application clocks are never compared.
//   - A claim marks rows processing under a fresh token; acks, heartbeats and
//     releases are conditioned on that token, so a worker whose rows were
//     reaped and re-claimed can never overwrite them ([ErrClaimLost] per row).
//   - A lease is acquired by one compare-and-set; renew and release are
//     conditioned on the owner token; the fence strictly increases with every
//     acquisition of a key.
//   - Deadlocks and serialization failures are retried inside the operation, a
//     bounded number of times with capped, jittered backoff ([RetryPolicy]);
//     [IsRetryable] reports them when they surface. Other engine errors are
//     wrapped and stay reachable with errors.As.
//   - Identifiers are validated ([ValidateIdent]) when a store is built and
//     quoted by the engine; values only ever travel as placeholders, except
//     status values, which are validated to a safe alphabet and rendered as
//     literals so that partial indexes can match them.
package dialect

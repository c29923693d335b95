// Package claimlock lets many processes share work held in a SQL database
// (MySQL/MariaDB, PostgreSQL or SQLite) without ever doing the same piece of
// it twice at the same time.
//
// The root package holds only this overview; the library is its
// sub-packages:
//
//   - [github.com/claimlock/claimlock/claim]: the row claimer. A claim marks
//     a batch of pending rows processing under a fresh token; every ack,
//     heartbeat and release is conditioned on that token.
//   - [github.com/claimlock/claimlock/tasklock]: leases on a task row or on
//     any string key, on the database clock, with renewal, a loss signal,
//     owner-verified release and a fencing token.
//   - [github.com/claimlock/claimlock/zombie]: the reaper that returns rows
//     stuck in processing after a crash and parks rows that keep failing.
//   - [github.com/claimlock/claimlock/hold]: the last check before a side
//     effect outside the database, that a context's claims and leases are
//     still held.
//   - [github.com/claimlock/claimlock/observe]: the one Observer every
//     package reports its operations to (spans and metrics in the contrib
//     modules).
//   - [github.com/claimlock/claimlock/dialect]: the engine boundary, with
//     dialect/mysql, dialect/postgres and dialect/sqlite, each of which
//     passes the module's conformance suite (internal/testkit/dialecttest).
//
// # The two guarantees
//
// Exclusive claim: at any instant a row is held by at most one claim token
// and a task or key by at most one lease. Acks are conditioned on the token,
// so a worker whose rows were reaped and re-claimed gets
// [github.com/claimlock/claimlock/dialect.ErrClaimLost] instead of
// overwriting them.
//
// Nothing lost: every pending row is eventually claimed; every claimed row is
// eventually acked, released or reaped; a row that keeps failing is parked
// with its attempt count, never dropped.
//
// Side effects outside the database (sending a message) are at-least-once
// across a crash between the send and the ack: no library can make them
// exactly-once. Make the send idempotent with a unique key per row (and, if
// the receiver must see retries as distinct, per attempt) that the receiver
// deduplicates on.
//
// # Two layers for cron jobs
//
// A task lease ([github.com/claimlock/claimlock/tasklock]) keeps two cron
// runs of one task from running at once while the lease lives. It cannot, on
// its own, stop a second process from picking up rows the first one is still
// sending once the lease was released or expired: that is what the row claim
// is for. Use both.
//
// # Choosing a strategy
//
// Claims either update a batch under a token and select it back
// (token-update: every engine, and the automatic choice on MySQL, MariaDB,
// TiDB and SQLite) or lock candidate rows with FOR UPDATE SKIP LOCKED
// (PostgreSQL, MySQL 8.0.1+, MariaDB 10.6+; the automatic choice on
// PostgreSQL). The default, [github.com/claimlock/claimlock/dialect.StrategyAuto],
// reads the server version once and picks what measured best there.
package claimlock

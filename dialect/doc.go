// Package dialect is the boundary between claimlock's orchestration packages
// ([github.com/claimlock/claimlock/claim], [github.com/claimlock/claimlock/tasklock]
// and [github.com/claimlock/claimlock/zombie]) and one database engine. It
// holds what users and engine authors touch: the [Dialect] interface, the
// table descriptions ([ClaimTable], [LeaseTable]), the stores' operations
// with their params and results, [Capabilities] and [Strategy], the
// sentinel errors and [ErrorClass], the one retry predicate [IsRetryable]
// and helper [Retry], and the portable table definitions the schema helpers
// render ([TableDef]).
//
// A [Dialect] is constructed by an engine package (dialect/mysql,
// dialect/postgres, dialect/sqlite) from a handle the caller already has. The
// orchestration packages describe a table once, receive a prepared store
// ([ClaimStore], [LeaseStore]) whose statements were built from validated,
// quoted identifiers, and then call one method per operation with a params
// struct. Engine differences reach callers as [Capabilities], never as type
// switches.
//
// # Inside: one store, three engines' SQL
//
// Everything that is not SQL lives once, in the engine-neutral store of
// dialect/internal/core: parameter checks, retries, transactions and their
// rollback, turning results into lost, requeued and parked keys, schema and
// index verification, error wrapping. An engine package supplies its
// statements as SQL templates (sql.go: quoted names such as {{.Table}} and
// status literals are filled in once per table, values are always
// placeholders written {{arg "token"}}), its placeholder style, its error
// classifier and its catalog queries, and overrides a step only where its
// protocol differs: MySQL claims by UPDATE ... LIMIT and reads the rows back
// by token (it has no RETURNING); SQLite runs multi-statement operations in
// BEGIN IMMEDIATE transactions; PostgreSQL re-runs a token-update claim that
// came back empty while rows are pending.
//
// One claim, from the caller to the SQL and back, on PostgreSQL:
//
//  1. claim/claimer.go: [claim.Claimer.Claim] takes a fresh token and calls
//     [ClaimStore.Claim] with a scan function for its row type.
//  2. dialect/internal/core/claims.go: Claims.Claim checks the params and
//     runs the rendered claim statement under the retrier, passing each
//     returned row to the scan function.
//  3. dialect/postgres/sql.go: the claim statement itself (claimSQL.Claim),
//     a WITH ... FOR UPDATE SKIP LOCKED ... UPDATE ... RETURNING.
//  4. dialect/internal/core/stmt.go: how the template became SQL text with
//     $n placeholders once, and how each call's values are bound in order.
//  5. dialect/postgres/conn.go: the pgx pool the statement runs on.
//
// On MySQL step 2 hands the claim to dialect/mysql/claim.go, which marks the
// rows and reads them back with the core's ReadBack.
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
//     wrapped once, by operation ("ack: ..."), and stay reachable with
//     errors.As.
//   - Identifiers are validated ([ValidateIdent]) when a store is built and
//     quoted by the engine; values only ever travel as placeholders, except
//     status values, which are validated to a safe alphabet and rendered as
//     literals so that partial indexes can match them.
//
// # Times
//
// Stores verify their table against the catalog before use (claimers,
// lockers and reapers do it before their first statement) and learn there
// the precision of each time column they write. A column that holds whole
// seconds (DATETIME, timestamptz(0)) stores a time up to a second early, so
// every expiry and staleness test adds the column's resolution: a lease or
// claim is never taken over before its TTL or timeout, and may be up to one
// resolution step late. Before verification the tests add a second.
package dialect

// Package dialect holds what users of claimlock describe and match, whatever
// their database: the table descriptions ([ClaimTable], [LeaseTable]),
// status values ([Status]), claim strategies ([Strategy]), the
// [Options] every engine package accepts, a caller's transaction ([Tx]),
// the sentinel errors with the predicates [IsRetryable] and [IsPermanent],
// and the retry helper [Retry] for the application's own statements.
//
// A [Dialect] is made by an engine package from a handle the caller already
// has: dialect/mysql (MySQL, MariaDB), dialect/postgres (pgx v5, natively or
// through database/sql) or dialect/sqlite. It shows only its
// [Capabilities]; claim, tasklock and zombie take it and build their
// statements on it.
//
// # Why the engine contract is internal
//
// The store that runs claims and leases, and the contract the engines
// implement, live in the module's internal/store package, not here. No
// engine outside this module could implement that contract anyway (its
// driver interface takes and returns the store's own types), and every
// exported field or method of it would let user code change the SQL or the
// capabilities the guarantees rest on. A Dialect therefore carries its
// store in an unexported field; a value of another type passed where a
// Dialect is expected is refused with an error wrapping [ErrInvalidConfig].
// A new engine is added inside this module, where it passes the same
// conformance suite (internal/testkit/dialecttest) as the others.
//
// # Inside: one store, three engines' SQL
//
// Everything that is not SQL lives once, in the engine-neutral store:
// parameter checks, retries, transactions and their rollback, turning
// results into lost, requeued and parked keys, schema and index
// verification, error wrapping. An engine package supplies its statements
// as SQL templates (sql.go: quoted names such as {{.Table}} and status
// literals are filled in once per table; values are always placeholders,
// written {{arg "token"}}, whose names are checked when the statements are
// rendered, so a typo fails at claim.New or tasklock.New), its placeholder
// style, its error classifier and its catalog queries, and overrides a step
// only where its protocol differs: MySQL claims by UPDATE ... LIMIT and
// reads the rows back by token (it has no RETURNING); SQLite runs
// multi-statement operations in BEGIN IMMEDIATE transactions. Each engine
// package commits the SQL it renders for every table variant under its
// testdata/golden, so every change to a statement shows in a diff as SQL.
//
// One claim, from the caller to the SQL and back, on PostgreSQL, passes
// through five files:
//
//  1. claim/claim.go: [github.com/claimlock/claimlock/claim.Claimer.Claim] takes a fresh token and a claim
//     slot, calls the store's Claim with a scan function for its row type,
//     and turns the scanned rows into a batch.
//  2. internal/store/claims.go: Claims.Claim checks the params, picks the
//     statement of the strategy (rendered once, when the claimer was
//     built, from the table of statements in claimstmts.go) and runs it,
//     passing each returned row to the scan function.
//  3. internal/store/run.go: Backend.Do runs it under the retrier
//     (deadlocks and serialization failures re-run it, with the jittered
//     backoff of [Retry]); Query binds the call's values to the
//     statement's placeholders, in the order the template named them.
//  4. dialect/postgres/sql.go: the claim statement itself, a WITH ... FOR
//     UPDATE SKIP LOCKED ... UPDATE ... RETURNING (rendered in
//     testdata/golden/claim_*.sql).
//  5. dialect/postgres/conn.go: the pgx pool the statement runs on, and
//     its rows coming back.
//
// On MySQL, step 2 hands the claim to dialect/mysql/claim.go, which marks
// the rows and reads them back by token; SQLite's and MySQL's statements
// run on internal/store/conndb.go's database/sql handle instead of step 5.
// With an Observer set, claim/observe.go reports the claim on the way back.
//
// # Contract
//
// Every engine honours the same semantics, proven by the conformance suite
// each engine package runs:
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
//   - Identifiers are validated when a store is built and quoted by the
//     engine; values only ever travel as placeholders, except status values,
//     which are validated to a safe alphabet and rendered as literals so
//     that partial indexes can match them.
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

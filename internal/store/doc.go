// Package store is claimlock's engine-neutral store: everything about
// running claim and lease operations that is not SQL, and the contract the
// engine packages implement (the dialect package doc says why it is
// internal). It validates parameters, runs statements under the shared
// retry policy, opens and rolls back transactions, turns results into lost
// / requeued / parked keys, checks schemas and indexes against the catalog,
// and wraps errors once.
//
// An engine package (dialect/mysql, dialect/postgres, dialect/sqlite)
// implements a [Driver]: a handle to run statements on ([DB]), its error
// classifier, its placeholder style, what its catalog and column types
// allow, and its statements as text/template sources ([ClaimSQL],
// [LeaseSQL]). [NewBackend] wraps it in the store's retrier; the engine
// package's Dialect carries the [Backend] through a [BackendRef], and the
// orchestration packages open stores on it ([OpenClaims], [OpenLeases]).
//
// A store renders its statements once, when it is built: every statement
// a claim table has is one line of the table in claimstmts.go (a lease
// table's in leasestmts.go, the schedule tables' in schedulestmts.go),
// which names the template it renders, the
// variant it renders it for and the condition under which it exists.
// Rendering itself (placeholders, arguments) is package render's. Only
// where an engine's protocol truly differs does it run a step itself
// (MySQL's claim without RETURNING: [ClaimOverride]; SQLite's immediate
// transactions through its [DB]).
//
// The files hold one concept each:
//
//   - the engine contract: driver.go ([Driver] and its optional
//     interfaces), claimsql.go, leasesql.go and schedulesql.go (the
//     statements an engine writes), claimrunner.go (an engine's own claim), backend.go (a
//     driver with the store's retrier, and how a Dialect carries it),
//     conndb.go and reach.go (running statements on a database/sql pool);
//   - rendering: claimstmts.go, leasestmts.go and schedulestmts.go (the
//     tables of statements), statements.go (a store's rendered statements); the
//     templates themselves are package render's;
//   - claims: contract.go (the operations and their params), claims.go
//     (claim, read, heartbeat, release, reap, stats), ack.go, txops.go (an
//     ack in the caller's transaction), pipeline.go (ack+claim), held.go,
//     ops.go (operator actions), cursor.go (the fair order), check.go
//     (params), notify.go, key.go (keys and tokens);
//   - leases: leases.go; scheduled runs: schedule.go;
//   - schema and catalog: tabledef.go and ddl.go (portable tables and
//     their DDL), catalog.go (columns as the catalog reports them),
//     verify.go, coltypes.go (the values a column holds), timecols.go (time
//     columns' precision and range), indexes.go (the recommended indexes);
//   - run.go: retries, transactions and errors.
//
// This package is not for users: its API changes whenever the engines need
// it to.
package store

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
// table's in leasestmts.go), which names the template it renders, the
// variant it renders it for and the condition under which it exists.
// Rendering itself (placeholders, arguments) is package render's. Only
// where an engine's protocol truly differs does it run a step itself
// (MySQL's claim without RETURNING: [ClaimOverride]; SQLite's immediate
// transactions through its [DB]).
//
// The files hold one concept each: claims.go, ack.go, pipeline.go,
// held.go, ops.go (operator actions) and cursor.go run claim operations;
// leases.go lease operations; catalog.go, verify.go, timecols.go,
// indexes.go and ddl.go the schema; run.go retries, transactions and
// errors; backend.go and driver.go the engine contract.
//
// This package is not for users: its API changes whenever the engines need
// it to.
package store

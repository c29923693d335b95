// Package mysql is claimlock's dialect for MySQL 5.7+, MariaDB 10.x+ and TiDB
// through database/sql and github.com/go-sql-driver/mysql.
//
// # Strategies
//
// Token-update (every server, and what StrategyAuto resolves to): UPDATE t
// FORCE INDEX (claim index) SET status = processing, token = ?, claimed_at =
// UTC_TIMESTAMP(6) WHERE <scope> AND status = pending ORDER BY <scope>,
// status, pk LIMIT ?, then SELECT ... WHERE token = ?. Ordering by the claim
// index's own columns is key order within one scope and lets the server read
// the index in order; with ORDER BY pk alone MariaDB sorts every pending row
// of the scope (and locks them all) whenever the connection's collation
// differs from the status column's. SKIP LOCKED (MySQL 8.0.1+, MariaDB
// 10.6+; never TiDB, which parses the clause and ignores it): a short READ
// COMMITTED transaction selecting the keys ORDER BY pk LIMIT ? FOR UPDATE
// SKIP LOCKED and marking them with UPDATE ... WHERE pk IN (...), then the
// same SELECT by token. [New] detects the engine and version once from
// SELECT VERSION() and @@version_comment. Token-update measured faster than
// SKIP LOCKED on MariaDB 10.11 at 1, 4 and 16 workers; the capabilities also
// bound a claimer to two claims in flight (see the README's performance
// section).
//
// # Isolation
//
// Claims, acks and reaps must run in READ COMMITTED: under the server
// default, REPEATABLE READ, InnoDB takes gap locks on what a claim or reaper
// scans and concurrent workers deadlock or wait for each other. Open the
// database with [Open], which sets the session isolation of every pooled
// connection (transaction_isolation on MySQL and MariaDB 11.1+, tx_isolation
// on older MariaDB; see [ConfigureDSN]). Given a pool in another isolation,
// [New] logs one warning and runs each claim, reap and ack in its own
// transaction started with READ COMMITTED instead, which costs a few extra
// round trips. Acks always run in a READ COMMITTED transaction: with no
// UPDATE ... RETURNING they either update every row in one statement or lock
// the rows the token still holds (SELECT ... FOR UPDATE) to tell which were
// lost. Lease operations, heartbeats and releases are single statements on a
// key or token and run in autocommit.
//
// # Times
//
// Times are stored in DATETIME(6) columns in UTC from UTC_TIMESTAMP(6), the
// database clock, whatever the session time_zone. They are read back as
// integer microseconds computed in SQL, so the DSN's parseTime and loc do not
// matter. TTLs and timeouts travel as INTERVAL ? MICROSECOND.
//
// Existing TIMESTAMP or second-precision DATETIME columns work, at a price.
// Such a column stores a time up to a second early (MariaDB truncates the
// fraction; MySQL rounds it), so an expiry computed from it could come a
// second early and let a second holder in. The stores read each time
// column's precision from the catalog when they verify the table (claimers
// and lockers do that before their first statement) and add its resolution
// to every expiry and staleness test: a lease or claim is never taken over
// before its TTL or timeout, and may be taken over up to one second late.
// Before verification every test adds a second. DATETIME(6) is recommended:
// it costs nothing, and a TIMESTAMP column is also converted through the
// session time_zone, so sessions with different zones disagree about it.
//
// # Affected rows
//
// MySQL reports changed rows, not matched rows, unless the DSN sets
// clientFoundRows=true. Every write whose count this package trusts changes
// the row it matches: acks, releases and reaps clear the token or owner,
// acquisition sets a new owner, LockedAt and fence, and a heartbeat or renewal
// moves its time strictly forward (GREATEST(now, old + 1 microsecond)).
// Heartbeats read back the keys still held and renewals read the lease back by owner, so
// both stay right even on a DATETIME column without microseconds, where the
// write can round to the old value. Keyed leases insert a missing key with a
// plain INSERT and treat a duplicate-key error as "held": INSERT ... ON
// DUPLICATE KEY UPDATE would report an untouched duplicate as one affected row
// under clientFoundRows.
//
// # Errors and retries
//
// Deadlocks (1213) and lock-wait timeouts (1205) are retried with the whole
// statement or transaction; [dialect.IsRetryable] reports them. A broken connection
// (mysql.ErrInvalidConn) is re-run once only by idempotent operations
// (reads, heartbeats, renewals); a write that may have been applied is never
// re-run, and the error surfaces.
//
// # Replication
//
// UPDATE ... LIMIT and SKIP LOCKED are unsafe for statement-based replication:
// a replica may pick other rows. Use binlog_format=ROW or MIXED. New reads
// @@log_bin and @@binlog_format, warns when the log is on and STATEMENT, and
// reports it in [Dialect.Binlog].
//
// # Galera (MariaDB Galera Cluster, Percona XtraDB Cluster)
//
// [New] reads @@wsrep_on and reports a Galera node in [Dialect.Galera].
// What changes there, and why (figures and tests in the README's "Scaling
// out" section and internal/scaleout):
//
//   - Every node accepts writes, and row locks are local to a node: two
//     nodes can mark the same rows at once. Galera certifies each write set
//     at COMMIT and aborts the later of two conflicting ones with error
//     1213 (a deadlock), even though its statements "succeeded" locally.
//     The claim stays token-update, one autocommit UPDATE ... LIMIT: its
//     commit is part of the statement, the server itself re-runs it once
//     after a certification failure (wsrep_retry_autocommit), and a 1213
//     that reaches the client means the claim was rolled back whole, so the
//     dialect re-runs it under the retry policy like any deadlock; it never
//     reads back, or reports, rows whose commit failed. Transactions (SKIP
//     LOCKED claims, acks of rows decided one by one) fail at COMMIT instead
//     and are re-run whole the same way. SKIP LOCKED stays available but
//     gains nothing: it skips rows locked on the local node only, so claims
//     on different nodes still pick the same rows and conflict at
//     certification.
//   - A commit returns once the write set is certified cluster-wide, but the
//     other nodes apply it a moment later. A read or update on another
//     node (a pool spread over the nodes, a load balancer) can miss a claim
//     committed an instant before: the token read-back finds no rows, an ack
//     or heartbeat matches nothing and reports the claim lost, a lease
//     renewal reports the lease lost. [Open] and [OpenCluster] therefore set
//     wsrep_sync_wait = [GaleraSyncWait] (reads and updates wait until the
//     node has applied what the cluster committed before them) on every
//     connection to a Galera node, unless the DSN sets it; New warns about a
//     pool whose sessions lack it ([Galera.Causal]).
//   - Exclusivity does not depend on either: a claim or lease acquisition on
//     a node that has not yet applied another node's claim of the same row
//     conflicts with it at certification and is rolled back.
//   - A node outside the primary component refuses every statement with
//     error 1047 before running it. claimlock treats it as
//     unavailable: nothing ran, so the statement or
//     transaction is re-run under the retry policy like a deadlock.
//     [OpenCluster] dials only nodes that report wsrep_ready, preferring
//     synced ones, and drops a pooled connection at its node's first
//     refusal, so the re-run goes to another node; through [Open] it goes
//     to the same node, and succeeds only if that node rejoins in time.
//
// # Indexes
//
// Create the indexes of ClaimStore.IndexDDL (ExecDDL skips ones that exist):
// the claim index (scope columns..., status, pk), the token index (token) and
// the reaper's (status, claimed_at). Without them InnoDB locks every row it
// scans, SKIP LOCKED workers get empty batches, and reapers deadlock with
// claimers. ClaimStore.MissingIndexes lists the ones absent from
// information_schema.statistics.
//
// # Plans on large tables
//
// Every statement reads only the rows it works on through these indexes
// (large_plan_test.go checks each with ANALYZE on 1,000,000 rows, under
// stale and fresh statistics, with interpolated and server-prepared
// arguments): claims the claim index in order, acks, heartbeats, releases
// and read-backs the token index or the keys, scoped Stats the claim
// index. Reaps take the oldest stale rows first in the order of the reap
// index, ORDER BY status, claimed_at, pk: ordered by pk, MariaDB read every
// stale row and sorted them, locking them all (350 ms per sweep over a
// backlog of 100,000 stale rows, instead of 3 ms). Lease reaps order by
// expires_at. Unscoped Stats count the whole table, by design.
//
// Two costs grow with stale rows rather than with the table. A scoped
// sweep over a backlog in which every processing row of its scope is stale
// reads those rows through the claim index and sorts them (MariaDB 10.11's
// UPDATE optimizer prefers that range to the reap index's, and would prefer
// it to a (scope..., status, claimed_at) index's too, which is why there is
// none here): 20-50 ms for a scope of 10,000 processing rows. Parking
// (MaxAttempts) reads the stale rows until it finds a batch at
// MaxAttempts: 370 ms per statement over a backlog of 100,000.
//
// MariaDB's engine-independent statistics (ANALYZE TABLE ... PERSISTENT
// FOR ...) are never refreshed by the server. Stale ones make it believe
// the table still has the rows it had then: a 1,000,000-row table taken for
// 30,000 was scanned for scoped Stats and for a sweep over a backlog (0.6 to
// 2.6 s). Refresh them when the table has grown, or leave them uncollected
// (the default); InnoDB's own statistics, stale or fresh, did not mislead
// any statement.
package mysql

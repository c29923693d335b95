// Package postgres is claimlock's dialect for PostgreSQL 9.5 and later,
// through pgx v5: [New] takes a *pgxpool.Pool and uses pgx's native protocol
// (the fast path); [NewStdlib] takes a *sql.DB opened with pgx's stdlib
// driver. Both run the same statements through one small internal interface.
//
// # Claims
//
// A claim is one statement and one round trip:
//
//	WITH c AS MATERIALIZED (
//	    SELECT id FROM t WHERE task_id = $1 AND status = 'PENDING'
//	    ORDER BY id + 0 LIMIT $2 FOR UPDATE SKIP LOCKED)
//	UPDATE t SET status = 'PROCESSING', token = $3, claimed_at = now()
//	WHERE id = ANY(ARRAY(SELECT id FROM c)) AND status = 'PENDING'
//	RETURNING id, ...
//
// The materialized CTE fixes the set of candidate rows, so a claim never
// marks more than the limit: the tempting form UPDATE ... WHERE id IN
// (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED) may be re-run by the executor
// and claim more; ARRAY(SELECT id FROM c) reads the materialized rows once.
// The reaper uses the same bounded CTE shape.
//
// Both strategies run this statement: on PostgreSQL a token-update claim
// also locks its candidates with SKIP LOCKED. A claim that waited FOR UPDATE
// instead kept, while it waited, the locks it had taken on rows that another
// claimer marked meanwhile (PostgreSQL keeps a row lock taken before the
// re-check of the row drops it), so the other batch's heartbeats, acks and
// releases queued behind a claim; and the LIMIT, applied before the locks,
// left waiting claimers with empty batches while rows were pending. The
// token is written either way, so the strategy's guarantees are unchanged.
//
// # The partial-index plan trap
//
// With ORDER BY id the planner likes to walk the primary key and filter out
// processed rows, so every claim re-reads them: on a table that is mostly
// done each claim costs tens of milliseconds instead of a fraction of one,
// whatever other indexes or statistics exist. Two things prevent it. The
// claim orders by id + 0 (for text keys: id concatenated with an empty
// string), an order the primary key cannot supply; and the partial index
// from ClaimStore.IndexDDL supplies exactly that order over the pending rows
// only:
//
//	CREATE INDEX ... ON t (task_id, (id + 0)) WHERE status = 'PENDING'
//	CREATE INDEX ... ON t (task_id, (id || '')) WHERE status = 'PENDING'
//
// (the second for text keys). With a RunAt column the index ends with
// (COALESCE(run_at, '-infinity')), and claims test runnability as
// COALESCE(run_at, '-infinity') <= now(): an index condition, so rows
// waiting for a later run-at are skipped inside the index instead of being
// fetched from the table one by one. The pending status is rendered as a literal
// in the statement (it is validated to a safe alphabet), because with
// status = $k a generic plan cannot prove the index predicate.
// ClaimStore.MissingIndexes reports the index when it is absent, so that
// the claimer can warn at start-up: without it a claim sorts every pending
// row.
//
// # Every statement, on any statistics
//
// The same trap waits for every statement that filters or orders a large
// table, and for the same reasons: a generic plan (prepared statements
// after five runs, poolers, plan_cache_mode = force_generic_plan) does not
// see the values, and statistics taken when the table looked different
// mislead custom plans. Measured on PostgreSQL 15 with 1,000,000 rows:
//
//   - Reaps ordered by id walked the primary key through every row, 454 ms
//     for a sweep that found nothing (140-310 ms on the plan test's
//     machine, custom plans included when the statistics had seen many
//     stale rows). They take the oldest stale rows first,
//     ORDER BY claimed_at, which only the (status, claimed_at) index
//     supplies; a sweep that finds nothing reads nothing. Lease reaps
//     likewise order by expires_at.
//   - An UPDATE ... FROM c WHERE t.id = c.id join let a generic plan, which
//     expects a LIMIT $n to return a tenth of the rows it limits, hash every
//     pending (claim) or processing (reap) row to join a hundred: 150-270
//     ms per claim, 940,000 rows read, under statistics taken during the
//     table's first loads. The rows
//     the CTE locked are found by key instead, id = ANY(ARRAY(SELECT id
//     FROM c)): one index lookup each.
//   - The check for pending rows after an empty token-update claim was an
//     EXISTS that a generic plan answered by scanning the table from its
//     start (72 ms); it asks for the first pending key in the claim's order
//     now.
//   - Scoped Stats read the scope's rows through the scope index (scope
//     columns..., status, claimed_at), which scoped sweeps use too: the
//     partial claim index holds pending rows only. Unscoped Stats count the
//     whole table, by design. One case remains: under a forced generic plan
//     with statistics that saw only one to three scopes, the planner
//     believes a scope is a third of the table or more and scans it for
//     scoped Stats (74-124 ms at 1,000,000 rows); custom plans, and
//     plan_cache_mode = auto, which keeps a custom plan when the generic
//     one looks dearer, use the index.
//   - Acks, heartbeats, releases and read-backs find a token's rows through
//     the token index or the keys; lease operations by key.
//
// large_plan_test.go's TestEveryPlanReadsOnlyWhatItNeeds explains every
// statement with ANALYZE on such a table, under stale and fresh statistics
// and custom and generic plans, and counts the rows each read.
//
// # Time
//
// Times are timestamptz columns written from now(), the server clock, inside
// the statement that compares them; durations travel as integer microseconds
// and are turned into intervals in SQL. Heartbeats and renewals move times
// strictly forward (GREATEST(now(), t + 1 microsecond)).
//
// # Poolers
//
// Every operation is a single statement or a short READ COMMITTED
// transaction. The package sets no session state and takes no advisory
// locks, so it works behind PgBouncer in transaction pooling mode and with
// any *sql.DB pool. Behind a pooler that cannot keep prepared statements,
// configure pgx's DefaultQueryExecMode (QueryExecModeExec or
// QueryExecModeSimpleProtocol) as usual.
//
// With PgBouncer in transaction pooling mode, use
// default_query_exec_mode=simple_protocol: pgx's default mode prepares
// named statements on whichever server connection a transaction was lent,
// and fails with "prepared statement \"stmtcache_...\" already exists".
//
// The one exception is [Dialect.Listen], which holds a session for LISTEN.
// It checks that its connection hears what the dialect's pool notifies, and
// through a pooler in transaction mode, where it would hear nothing, it
// warns and retries while claimers poll. Behind such a pooler either give it
// a direct connection (ListenConfig.ConnConfig) or do not call it: that is
// poll-only mode, in which idle claimers find rows by polling
// (claim.WorkerConfig's PollMin and PollMax), and the notifications the
// dialect sends (which work through any pooler) are simply not heard.
//
// # Wake-ups
//
// Idle claimers of other processes are woken with LISTEN/NOTIFY, as River,
// neoq and Oban do. [Dialect.Listen] runs one dedicated connection per
// dialect that listens on the channel of every claimer running
// claim.Claimer.Run on it; the channel is derived on the server from the
// schema-qualified table and its scope columns, the payload from the scope
// values. The dialect notifies, in a statement after the one that changed
// the rows, whenever it returns rows to pending (a release, a retried fail,
// a requeued versioned ack, a reap); applications that insert rows call
// [Notify] (or run [NotifyStatement]) in their transaction, so that the
// notification is delivered at commit. A notification is a hint: polling
// stays as the fallback for a lost connection or a missed notification,
// and after each (re)connection the listener wakes every claimer once, as
// it wakes the claimers of a table it starts listening to while connected.
//
// # Errors
//
// Serialization failures (40001), deadlocks (40P01) and lock_not_available
// (55P03) are retried inside each operation; [dialect.IsRetryable] reports them when
// they surface. Other errors are wrapped, and *pgconn.PgError stays reachable
// with errors.As.
package postgres

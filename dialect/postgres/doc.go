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
//	    SELECT id FROM t WHERE task_id = $2 AND status = 'PENDING'
//	    ORDER BY id + 0 LIMIT $3 FOR UPDATE SKIP LOCKED)
//	UPDATE t SET status = 'PROCESSING', token = $1, claimed_at = now()
//	FROM c WHERE t.id = c.id AND t.status = 'PENDING' RETURNING t.id, ...
//
// The materialized CTE fixes the set of candidate rows, so a claim never
// marks more than the limit: the tempting form UPDATE ... WHERE id IN
// (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED) may be re-run by the executor
// and claim more. The reaper uses the same bounded CTE shape.
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
// (the second for text keys). The pending status is rendered as a literal
// in the statement (it is validated to a safe alphabet), because with
// status = $k a generic plan cannot prove the index predicate. ClaimStore.MissingIndexes reports the index when it is
// absent, so that the claimer can warn at start-up: without it a claim sorts
// every pending row.
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
// # Errors
//
// Serialization failures (40001), deadlocks (40P01) and lock_not_available
// (55P03) are retried inside each operation; [IsRetryable] reports them when
// they surface. Other errors are wrapped, and *pgconn.PgError stays reachable
// with errors.As.
package postgres

// Package claim lets many workers, in many processes, share the rows of one
// SQL table without ever processing the same row at the same time.
//
// A [Config] describes the table once, by embedding [dialect.ClaimTable] (the
// description the reaper and the schema helpers share), and says how to
// claim from it. A [Claimer] marks up to a batch of pending rows as
// processing under a fresh random token, in one statement (or one short
// transaction), and returns them as a [Batch]. Every later write of the
// batch — [Batch.Ack], [Batch.AckAll], [Batch.Fail], [Batch.Heartbeat],
// [Batch.Release] — is conditioned on that token. [Claimer.Run] is the
// ready-made worker loop on top.
//
// # One way to do each thing
//
//   - Complete rows: [Batch.Ack] (some rows) and [Batch.AckAll] (every row
//     still held); with Config.AckDelay acks are deferred and written
//     together, and [Batch.Flush] writes them now. In Run, a nil handler
//     error acks the row.
//   - Fail rows: [Batch.Fail] with the row's error; the error says what
//     the failure is: a plain error retries the row after Config.Backoff
//     (or parks it after Config.MaxAttempts), [RetryAfter] chooses the
//     delay, [SnoozeFor] puts the row back without counting an attempt,
//     [Park] parks it at once. In Run, the handler returns the same errors.
//   - In the caller's transaction: [Batch.AckTx] and [Batch.FailTx], with
//     a [dialect.Tx] ([dialect.SQLTx] of a *sql.Tx, postgres.PgxTx of a
//     pgx.Tx); a Run handler finds its batch with [BatchOf].
//   - Give rows back: [Batch.Release]; keep them: [Batch.KeepAlive]
//     (Config.HeartbeatInterval) or one [Batch.Heartbeat].
//   - Observe: Config.Observer, the [observe.Observer] that tasklock and
//     zombie report to as well ([OpClaim] and the other Ops of this
//     package; the contrib modules implement it for OpenTelemetry and
//     Prometheus); Config.Logger for warnings.
//   - Pipelining (ack a batch and claim the next in one operation) is a
//     Run option, [WorkerConfig.Pipeline]; a hand-written loop uses
//     [Claimer.AckAllAndClaim].
//   - Send what is pending and return (a cron job): [WorkerConfig.Drain].
//     Many tasks from one claimer: [Claimer.Scope] for one task's view,
//     [WorkerConfig.Scopes] to serve many in turn from one pool of
//     workers, each bounded by [WorkerConfig.ScopeInFlight].
//   - Claims that write nothing: [Claimer.Holder] holds rows by a
//     transaction left open ([Held]), whose acks, fails and your own
//     statements commit together, for short handlers whose work is in the
//     same database (not SQLite). [Holder.Run] is its loop, as Run is for
//     durable batches: a nil handler error acks and commits the batch, an
//     error undoes the handler's writes and fails its rows.
//
// # Guarantees
//
// Exclusive claim: at any instant a row is held by at most one token. Two
// concurrent claims never return the same row, whatever the number of
// goroutines, processes or hosts, on every supported engine and strategy.
//
// No lost update by a late worker: if a worker stalls and a reaper returns its
// rows to pending (and another worker claims them), the stalled worker's ack
// changes nothing and returns an error matching [dialect.ErrClaimLost], with the lost
// keys in a [*LostError]. The new owner's state is never overwritten.
//
// Nothing lost: every row ends acked (done), failed (back to pending, or
// parked with the failed status after Config.MaxAttempts), released, or — if
// its worker died — processing until a reaper returns it to pending. Run a
// reaper (the zombie package) with a timeout longer than your processing
// time, and keep long batches alive with [Batch.KeepAlive], which
// [Claimer.Run] does for you, every Config.HeartbeatInterval.
//
// # Loss signal
//
// A batch's context ([Batch.Context], [Batch.Done], [Batch.Err]; the
// handler's context in [Claimer.Run]) is cancelled, with a cause matching
// [dialect.ErrClaimLost], when a heartbeat or an ack finds its rows gone,
// and, when Config.ReapTimeout declares the reapers' timeout, at a local
// deadline (cause also matching [dialect.ErrLocalDeadline]): local start of
// the claim, or of the last heartbeat that found every row held, + ReapTimeout -
// SafetyMargin, on the monotonic clock, before any reaper can return the
// rows. Work on the rows must stop then. The token still protects the
// database when a process frozen past its deadline resumes: its acks change
// nothing.
//
// Ages are measured on the database clock only; application clocks are
// never compared.
//
// # Failures, retries and operators
//
// With a RunAt column in the claim table, [Batch.Fail] retries a row after
// Config.Backoff of its attempts ([Row.Attempts]; default [DefaultBackoff]),
// measured on the database clock: claims skip rows whose run-at is in the
// future. A [RetryAfter] error takes the delay from the failure, a
// [SnoozeFor] error puts a row back for later without counting an attempt,
// and a [Park] error parks the row at once, from [Batch.Fail] or a Run
// handler alike. With an
// Error column the failure's text is stored (cut to the column's width), so
// a parked row says why. [Claimer.List], [Claimer.Unpark] and
// [Claimer.RetryNow] are the operator's view and actions.
//
// # Completion in the caller's transaction
//
// [Batch.AckTx] and [Batch.FailTx] (in a Run handler, on the batch
// [BatchOf] finds) run the ack in a transaction the caller passes, with
// the same token and version conditions, so that the caller's own writes and
// the ack commit or roll back together: no duplicate database row, whatever
// the crash. A lost claim is reported before the caller commits.
//
// # External side effects are at least once
//
// The database cannot make a message send exactly once: a worker that sends
// and then crashes before its ack leaves the row processing, the reaper
// returns it, and it is sent again. Make the send idempotent with a key that
// is unique per row and attempt the receiver (or an outbox table with a
// unique index) deduplicates on, for example
//
//	key := fmt.Sprintf("%s:%v", "task-42", row.ID) // one send per row, ever
//
// or include the Attempts column's value when a retry must be a new message.
// The claimer guarantees that two workers are never sending the same row
// concurrently; the key covers the crash window.
//
// # Strategies
//
// Config.Strategy defaults to [dialect.StrategyAuto], which uses the
// strategy measured fastest on the server's engine:
//
//   - [dialect.StrategySkipLocked] (PostgreSQL 9.5+, MySQL 8.0.1+, MariaDB
//     10.6+; the automatic choice on PostgreSQL): workers skip each other's
//     locked rows and claim in parallel.
//   - [dialect.StrategyTokenUpdate] (every engine; the automatic choice on
//     MySQL, MariaDB, TiDB and SQLite): UPDATE ... SET token ... ORDER BY key
//     LIMIT n, then read the rows back by token. Concurrent claims of one
//     scope queue on the same first rows; on MariaDB the statement is still
//     cheaper than SKIP LOCKED's transaction (see the README's performance
//     section). Correctness is the same.
//
// # Claim concurrency
//
// Workers of one claimer compete for the same first pending rows. Config.
// ClaimConcurrency bounds how many of its claims run their statement at once
// (by default two on MySQL and MariaDB, where claims would otherwise queue
// on each other's row locks; no bound on PostgreSQL and SQLite); the others
// wait in the claimer, not in the database, which keeps throughput from
// falling as workers are added.
// Processing and acks are not bounded.
//
// # Indexes
//
// Create the indexes that [Claimer.IndexDDL] returns: the claim index (scope columns, status, key), the token
// index, the reaper's (status, claimed_at) index and, for a scoped table on
// PostgreSQL and SQLite, the scope index (scope columns, status,
// claimed_at) that scoped [Claimer.Stats] and sweeps read; on PostgreSQL a
// partial index on the pending status keeps claims fast as done rows
// accumulate.
// Without them MySQL locks every row it scans and SKIP LOCKED workers can get
// empty batches. The first [Claimer.Claim] of a claimer configuration (table,
// scope columns and engine) in a process checks for them and logs one
// warning through Config.Logger listing the missing ones, however many
// claimers share that configuration; [Claimer.MissingIndexes] reports them
// on demand.
//
// # Versions
//
// With a Version column in the claim table (an integer your writers
// increment), an ack completes a row only if its version is still the one the
// claim read. A row changed during processing goes back to pending instead of
// done and is claimed again with its new content; [Batch.Requeued] lists such
// rows and the Observer's Event.Requeued counts them. This is not an error.
//
// What writers must do for this to hold: change the row's data and increment
// its version in the same statement, whatever its status, and leave the
// status, token and claimed-at columns alone. A writer must never set a
// processing row back to pending itself: the row would be claimable while
// its current holder still works on it (two holders), and the holder's ack
// would then find it lost. Setting a done row back to pending is fine (it
// is not held); with a version column, bumping the version is enough for a
// row that is processing.
//
// # Rows that cannot be read
//
// A claimed row whose columns the row type cannot hold (a NULL scanned into
// a string field, say) does not stop the batch: the claim fails that row
// alone, as [Batch.Fail] would, and reports it in [Batch.Unreadable]. Use
// pointer or sql.Null* fields for columns that may hold NULL.
//
// # Retries
//
// Deadlocks, lock-wait timeouts and serialization failures are retried
// inside every operation with bounded, jittered backoff
// ([dialect.RetryPolicy]); one that surfaces has exhausted its attempts and
// matches [dialect.IsRetryable]. [dialect.IsRetryable] and [dialect.Retry] accept
// the raw driver errors of the application's own statements too.
//
// A write that lost its connection, or whose context ended while the
// database had it, returns an error matching [dialect.ErrOutcomeUnknown]: it
// may have taken effect. For an ack this means the rows may be done; acking
// them again reports them lost if the first ack happened (their token is
// cleared) and acks them otherwise, and a reaper returns rows whose ack
// never happened. A claim of unknown outcome releases what it may have
// marked, also rows the server marks after the claim returned (MySQL
// finishes a statement whose connection the driver closed): a release
// that finds nothing is tried again over the next few seconds. Every
// operation returns by its context's deadline.
//
// # Wake-ups
//
// While nothing is pending, the loops of [Claimer.Run] do not each poll the
// database: one of them polls, with a jittered backoff from
// WorkerConfig.PollMin to PollMax (100 ms to 5 s by default), and the
// others wait for a wake-up, so an idle claimer costs one claim per poll
// interval however many workers it runs. A row inserted into an idle system
// is therefore picked up after up to PollMax, unless something wakes the
// loops: [Claimer.Wake] for rows made pending in the same process, and on
// PostgreSQL the dialect's LISTEN/NOTIFY listener for rows made pending by
// other processes (see the postgres package: Dialect.Listen and Notify).
// A woken loop that claims a full batch wakes the next one.
//
// # Ack and claim in one operation
//
// [Claimer.AckAllAndClaim] acks a batch and claims the next together (PostgreSQL: one statement; MySQL/MariaDB and SQLite:
// one transaction), atomically: both happen or neither does, and lost rows
// are still reported one by one. It saves a commit and round trips per
// batch; whether that is faster depends on the server (measured slower or
// equal on the reference machine, see the README), so [Claimer.Run] uses
// it only when [WorkerConfig.Pipeline] asks, or the engine's capabilities
// say it measured faster.
//
// # Replication
//
// UPDATE ... LIMIT and SKIP LOCKED are unsafe for statement-based
// replication: on MySQL and MariaDB use binlog_format=ROW (or MIXED). The
// MySQL dialect warns when it finds binlog_format=STATEMENT.
package claim

package claim

import (
	"database/sql/driver"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
)

// Batch size bounds.
const (
	// DefaultBatchSize is the batch size when [Config.BatchSize] is zero.
	DefaultBatchSize = 100
	// MaxBatchSize is the largest accepted [Config.BatchSize]. Larger
	// batches hold locks longer and build ack statements with that many
	// placeholders.
	MaxBatchSize = 10000
)

// Config describes the claim table and how to claim from it. Zero values
// take the documented defaults; [New] validates everything and reports the
// first bad field in an error wrapping [dialect.ErrInvalidConfig].
//
// The table is described once, by the embedded [dialect.ClaimTable] (the
// same description the reaper and the schema helpers use); its fields are
// promoted, so cfg.Table or cfg.Attempts read and set them:
//
//	claim.Config{
//		ClaimTable: dialect.ClaimTable{
//			Table: "xxx_task_target", Token: "cron_token", ClaimedAt: "send_at",
//			Attempts: "attempts", Columns: []string{"openid"},
//			Scope: []string{"task_id"}, Done: dialect.StatusString("SENT"),
//		},
//		ScopeValues: []any{42},
//		MaxAttempts: 5,
//	}
type Config struct {
	// ClaimTable names the table and its columns: Table (required); ID,
	// Status, Token (at least VARCHAR(40)) and ClaimedAt, defaulting to
	// "id", "status", "token" and "claimed_at"; IDKind, integer by default
	// ([Row.ID] then holds an int64, or a string for [dialect.IDText]).
	//
	// Optional columns add features: Attempts (an integer every claim
	// increments) is needed by MaxAttempts; Version (an integer your
	// writers increment when they change a row) makes acks complete a row
	// only if its version is still the one read by the claim, otherwise
	// the row goes back to pending ([Batch.Requeued]); CreatedAt lets
	// [Claimer.Stats] report the age of the oldest pending row. Columns are
	// extra columns read by a claim into each [Row.Value], through the
	// fields function given to [New]. Scope names the columns every claim
	// is restricted to by equality, with ScopeValues.
	//
	// Status values ([dialect.StatusString], [dialect.StatusInt]) are all
	// strings (letters, digits, _ . : -) or all integers. Unset string
	// values default to "PENDING", "PROCESSING", "DONE" and "FAILED"; with
	// integer values Pending, Processing and Done are required and an
	// unset Failed disables parking. [dialect.ClaimTable.WithDefaults]
	// applies these defaults; [Config.Resolve] returns the result.
	dialect.ClaimTable
	// ScopeValues are the values of ClaimTable.Scope, in its order (for
	// example task_id = 42): every claim is restricted to rows matching all
	// of them. They travel as placeholders and must not be nil (NULL never
	// compares equal).
	ScopeValues []any
	// RequireScope makes an empty Scope an error, for tables that must
	// never be claimed across tasks.
	RequireScope bool
	// BatchSize is the most rows one claim takes; default
	// [DefaultBatchSize], at most [MaxBatchSize].
	BatchSize int
	// Strategy is how rows are claimed; [dialect.StrategyAuto] (the zero
	// value) picks the server's preferred one.
	Strategy dialect.Strategy
	// MaxAttempts is how many claims a row may take: a failure
	// ([Batch.Fail], a Run handler's error) parks a row with the failed
	// status instead of retrying it once its attempts reached MaxAttempts,
	// and so does the reaper with a row whose worker keeps dying. With an
	// Attempts column zero means [dialect.DefaultMaxAttempts]; without one
	// claims are not counted, MaxAttempts must be zero, and a failure parks
	// its row at once (a row that is not counted could be retried forever).
	MaxAttempts int
	// Backoff, with a RunAt column, is how long a row retried by
	// [Batch.Fail] waits before it can be claimed again, given how many
	// times it has been claimed (1 after its first claim), measured on the
	// database clock; a negative result counts as zero. nil means
	// [DefaultBackoff]; [ExponentialBackoff] builds others. It needs
	// RunAt: without the column a retried row is claimable again as soon
	// as the claim cursor comes round to it (see
	// "Claim order" in docs/claim.md), which on a short queue is at once,
	// so that MaxAttempts can be spent in milliseconds while the service
	// it calls is down.
	Backoff func(attempts int) time.Duration
	// AckDelay, if positive, defers acks: [Batch.Ack] records the rows and
	// returns at once, and the deferred acks of a batch are written
	// together, in one statement conditioned on the token, within AckDelay
	// of the first (or sooner: see [Batch.Ack]). [Batch.Flush] writes them
	// and reports their outcome. Zero (the default) writes every Ack before
	// it returns. Keep it well below the reaper's timeout (a deferred row is
	// still processing in the database until it is written).
	AckDelay time.Duration
	// AckBuffer, with AckDelay, is how many deferred acks of one batch are
	// written together at most: reaching it starts the write at once. Zero
	// means the batch size, so a caller who acks every row of a batch gets
	// exactly one ack statement per batch. It must not be negative.
	AckBuffer int
	// ClaimConcurrency bounds how many of this claimer's [Claimer.Claim]
	// calls run their claim statement at once; the others wait their turn
	// (their claim latency includes the wait). Zero means the engine's
	// measured default ([dialect.Capabilities.ClaimConcurrency]: 2 on
	// MySQL and MariaDB, no limit on PostgreSQL and SQLite); negative
	// means no limit. It bounds claims only: processing and acks of claimed
	// batches run in parallel as before. It is per claimer (per process),
	// so claimers in other processes still compete in the database.
	ClaimConcurrency int
	// ReapTimeout, if positive, declares the shortest Timeout of the
	// reapers (zombie.Config.Timeout) that sweep this table: it gives
	// every batch a local deadline, (local start of the claim statement, or
	// of the last heartbeat that found every row held) + ReapTimeout -
	// SafetyMargin, measured on the local monotonic clock, at which the
	// batch's context ([Batch.Context]) is cancelled with an error matching
	// [dialect.ErrClaimLost] and [dialect.ErrLocalDeadline], whether or not
	// the database answers: before a reaper can take the rows back and another worker
	// claim them. It must not exceed any reaper's Timeout. Zero means no
	// local deadline: the context then learns of a loss only from
	// heartbeats and acks. At least a millisecond.
	ReapTimeout time.Duration
	// SafetyMargin is subtracted from ReapTimeout to form the local
	// deadline. It absorbs clock-rate differences and the time a cancelled
	// handler needs to notice. Zero means ReapTimeout/10; it must be below
	// ReapTimeout, and is an error without it.
	SafetyMargin time.Duration
	// HeartbeatInterval is how often [Batch.KeepAlive] (and so
	// [Claimer.Run] while it processes a batch) moves the claim time of the
	// rows a batch holds, so that a reaper does not take back rows still
	// being worked on, and so that the local deadline keeps moving while
	// the database answers. Zero means ReapTimeout/3 with a ReapTimeout, and
	// no heartbeats without one. With a ReapTimeout, HeartbeatInterval +
	// SafetyMargin must be below it, or batches would reach their local
	// deadline between two heartbeats. Set it well below every reaper's
	// timeout when processing a batch can take longer than that.
	HeartbeatInterval time.Duration
	// PauseTable, if set, names the pause table ([Pauses], made by
	// [CreatePauseTable]) whose pauses the claimer honours: before each
	// claim (and each [Holder.Hold]) it checks that neither its table nor
	// its scope is paused, and claims nothing if one is ([ErrPaused]).
	// Empty (the default) means pauses are not checked and the pause table
	// is never read. A claimer without Scope columns honours only pauses
	// of the whole table: a pause of one scope applies to the claimers
	// (and scope views) whose ScopeValues are that scope.
	PauseTable string
	// PauseRefresh, with PauseTable, is how long the claimer trusts the
	// pauses it read: a claim that starts PauseRefresh or more after a
	// [Pauses.Pause] (or [Pauses.Resume]) returned sees it. Zero means
	// [DefaultPauseRefresh]; negative reads the pause table before every
	// claim (one more query per claim), so that every claim starting after
	// a Pause returned sees it. The claimer and its scope views read the
	// pause table at most once per PauseRefresh between them.
	PauseRefresh time.Duration
	// Worker, with a Worker column (dialect.ClaimTable.Worker), is the
	// name every claim of this claimer writes there, so that an operator
	// can tell which process holds a stuck row (claimctl stuck, the status
	// page); empty means "host:pid" of this process. At most
	// [MaxWorkerLen] bytes; a name wider than the column is cut to the
	// column's width. Without a Worker column it is not written anywhere.
	Worker string
	// Logger receives warnings (missing indexes, lost claims, failures);
	// nil means slog.Default().
	Logger *slog.Logger
	// Observer, if not nil, is told about every claim, ack, fail, snooze,
	// heartbeat and release of the claimer, and of its held batches: see
	// [OpClaim] and the other Ops of this package.
	Observer observe.Observer
}

// Resolve validates c (everything but the strategy, which needs a server)
// and returns its table description with the defaults filled in
// ([dialect.ClaimTable.WithDefaults]): exactly what [New] builds its
// store from. The reaper and the schema helpers build their
// stores from it, so that they see the claimer's table. Errors wrap
// [dialect.ErrInvalidConfig] and name the field.
func (c Config) Resolve() (dialect.ClaimTable, error) {
	spec := c.ClaimTable.WithDefaults()
	if err := spec.Validate(); err != nil {
		return dialect.ClaimTable{}, fmt.Errorf("claim: %w", err)
	}
	if c.RequireScope && len(spec.Scope) == 0 {
		return dialect.ClaimTable{}, invalid("Scope", "is empty but RequireScope is set")
	}
	if err := checkScopeValues(spec.Scope, c.ScopeValues); err != nil {
		return dialect.ClaimTable{}, err
	}
	if err := c.validateOptions(spec); err != nil {
		return dialect.ClaimTable{}, err
	}
	return spec, nil
}

// Validate reports the first problem of c, as [New] would, in an error
// wrapping [dialect.ErrInvalidConfig] that names the field. (It replaces the
// embedded [dialect.ClaimTable.Validate], which needs the defaults applied
// first.)
func (c Config) Validate() error {
	_, err := c.Resolve()
	return err
}

func (c Config) validateOptions(spec dialect.ClaimTable) error {
	if c.BatchSize < 0 || c.BatchSize > MaxBatchSize {
		return invalid("BatchSize", "%d is outside 1..%d (0 means %d)", c.BatchSize, MaxBatchSize, DefaultBatchSize)
	}
	switch c.Strategy {
	case dialect.StrategyAuto, dialect.StrategyTokenUpdate, dialect.StrategySkipLocked:
	default:
		return invalid("Strategy", "unknown strategy %d", int(c.Strategy))
	}
	if c.ClaimConcurrency > maxClaimConcurrency {
		return invalid("ClaimConcurrency", "%d exceeds %d", c.ClaimConcurrency, maxClaimConcurrency)
	}
	if c.AckBuffer < 0 {
		return invalid("AckBuffer", "%d is negative", c.AckBuffer)
	}
	if err := c.validateLoss(); err != nil {
		return err
	}
	if _, err := spec.MaxAttempts(c.MaxAttempts); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if c.Backoff != nil && spec.RunAt == "" {
		return invalid("Backoff", "needs a RunAt column")
	}
	if c.AckDelay < 0 {
		return invalid("AckDelay", "%v is negative", c.AckDelay)
	}
	if len(c.Worker) > MaxWorkerLen {
		return invalid("Worker", "is %d bytes; at most %d", len(c.Worker), MaxWorkerLen)
	}
	return c.validatePauses(spec)
}

// validatePauses checks PauseTable and PauseRefresh.
func (c Config) validatePauses(spec dialect.ClaimTable) error {
	if c.PauseTable == "" {
		if c.PauseRefresh != 0 {
			return invalid("PauseRefresh", "is set without a PauseTable")
		}
		return nil
	}
	if err := store.ValidateIdent("PauseTable", c.PauseTable); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if strings.EqualFold(c.PauseTable, spec.Table) {
		return invalid("PauseTable", "%q is the claim table", c.PauseTable)
	}
	if len(spec.Table) > store.MaxPauseTableLen {
		return invalid("PauseTable", "the claim table's name %q is longer than a pause can name (%d bytes)", spec.Table, store.MaxPauseTableLen)
	}
	return nil
}

// MaxWorkerLen is the longest [Config.Worker] in bytes.
const MaxWorkerLen = 255

// worker returns Config.Worker, or "host:pid" of this process when it is
// empty.
func (c Config) worker() string {
	if c.Worker != "" {
		return c.Worker
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

func (c Config) batchSize() int {
	if c.BatchSize == 0 {
		return DefaultBatchSize
	}
	return c.BatchSize
}

// maxClaimConcurrency bounds [Config.ClaimConcurrency]; a larger bound
// would be no bound in practice (a negative value means none).
const maxClaimConcurrency = 1 << 16

// claimGate returns the semaphore bounding concurrent claims, or nil for no
// bound.
func (c Config) claimGate(caps dialect.Capabilities) chan struct{} {
	n := c.ClaimConcurrency
	if n == 0 {
		n = caps.ClaimConcurrency
	}
	if n <= 0 {
		return nil
	}
	return make(chan struct{}, n)
}

func (c Config) ackBuffer() int {
	if c.AckBuffer == 0 {
		return c.batchSize()
	}
	return c.AckBuffer
}

// checkScopeValues checks values against the Scope columns cols: one
// value per column, none nil (NULL never compares equal), each one that
// database/sql can send as a parameter.
func checkScopeValues(cols []string, values []any) error {
	if len(values) != len(cols) {
		return invalid("ScopeValues", "%d value(s) for %d Scope column(s) %v", len(values), len(cols), cols)
	}
	for i, v := range values {
		field := fmt.Sprintf("ScopeValues[%d]", i)
		if v == nil {
			return invalid(field, "value of %q is nil (NULL never compares equal)", cols[i])
		}
		if _, err := driver.DefaultParameterConverter.ConvertValue(v); err != nil {
			return invalid(field, "value of %q, of type %T, cannot be a query parameter: %v", cols[i], v, err)
		}
	}
	return nil
}

package claim

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// Batch size bounds.
const (
	// DefaultBatchSize is the batch size when [Config.BatchSize] is zero.
	DefaultBatchSize = 100
	// MaxBatchSize is the largest accepted [Config.BatchSize]. Larger
	// batches hold locks longer and build ack statements with that many
	// placeholders.
	MaxBatchSize = 10000
	// DefaultAckDelay is the longest a deferred ack ([Batch.AckLater])
	// waits before it is written when [Config.AckDelay] is zero.
	DefaultAckDelay = 100 * time.Millisecond
)

// Default status values, used when the corresponding [Config] field is nil
// and the configured values are strings (or none is configured).
const (
	DefaultPending    = "PENDING"
	DefaultProcessing = "PROCESSING"
	DefaultDone       = "DONE"
	DefaultFailed     = "FAILED"
)

// Cond is one equality condition of a claimer's scope: Column = Value.
type Cond struct {
	// Column is the column name.
	Column string
	// Value is compared for equality; it travels as a placeholder and must
	// not be nil (NULL never compares equal).
	Value any
}

// FailMode says what [Batch.Fail] does to a row.
type FailMode int

const (
	// FailRetry returns a failed row to pending so that it is claimed again,
	// or parks it with the failed status once its attempts reach
	// [Config.MaxAttempts] (when that is set).
	FailRetry FailMode = iota
	// FailPark sets a failed row to the failed status at once.
	FailPark
)

// Config describes the claim table and how to claim from it. Zero values
// take the documented defaults; [New] validates everything and reports the
// first bad field in an error wrapping [ErrInvalidConfig].
type Config struct {
	// Table is the table name, optionally schema-qualified (required).
	Table string
	// IDColumn is the primary key column; default "id". Claims order by it.
	IDColumn string
	// IDKind is the key's type: integer (the default) or text. [Row.ID]
	// holds an int64 or a string accordingly.
	IDKind dialect.IDKind
	// StatusColumn is the status column; default "status".
	StatusColumn string
	// TokenColumn holds the claim token, at least VARCHAR(40); default
	// "token".
	TokenColumn string
	// ClaimedAtColumn holds the claim or last heartbeat time; default
	// "claimed_at".
	ClaimedAtColumn string
	// AttemptsColumn, if set, is an integer incremented by every claim. It
	// is needed by MaxAttempts.
	AttemptsColumn string
	// VersionColumn, if set, is an integer your writers increment when they
	// change a row. Acks then complete a row only if its version is still
	// the one read by the claim; otherwise the row goes back to pending
	// ([Batch.Requeued]).
	VersionColumn string
	// CreatedAtColumn, if set, lets [Claimer.Stats] report the age of the
	// oldest pending row.
	CreatedAtColumn string
	// Columns are extra columns read by a claim into each [Row.Value],
	// through the fields function given to [New].
	Columns []string
	// Scope restricts every claim to rows matching all its conditions (for
	// example task_id = 42).
	Scope []Cond
	// RequireScope makes an empty Scope an error, for tables that must
	// never be claimed across tasks.
	RequireScope bool
	// Pending, Processing, Done and Failed are the status values: strings
	// (letters, digits, _ . : -) or integers, all of one kind. Nil means
	// "PENDING", "PROCESSING", "DONE" and "FAILED" when the values are
	// strings; with integer values Pending, Processing and Done are
	// required and a nil Failed disables parking.
	Pending, Processing, Done, Failed any
	// BatchSize is the most rows one claim takes; default
	// [DefaultBatchSize], at most [MaxBatchSize].
	BatchSize int
	// Strategy is how rows are claimed; [dialect.StrategyAuto] (the zero
	// value) picks the server's preferred one.
	Strategy dialect.Strategy
	// MaxAttempts, if positive, parks a row with the failed status when
	// [Batch.Fail] fails it after this many claims. It needs
	// AttemptsColumn and a Failed status.
	MaxAttempts int
	// FailMode says what [Batch.Fail] does; default [FailRetry].
	FailMode FailMode
	// AckDelay bounds how long a row acked with [Batch.AckLater] waits
	// before it is written: the first deferred ack of a batch starts a timer
	// and, when it fires, every deferred ack of the batch is written in one
	// background statement. Zero means [DefaultAckDelay]; it must not be
	// negative. Keep it well below the reaper's timeout (a deferred row is
	// still processing in the database until it is written). It has no
	// effect on [Batch.Ack], which writes before it returns.
	AckDelay time.Duration
	// AckBuffer is how many deferred acks ([Batch.AckLater]) of one batch
	// are written together at most: reaching it starts the background write
	// at once. Zero means the batch size, so a caller who defers the ack of
	// every row of a batch gets exactly one ack statement per batch. It must
	// not be negative.
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
	// Logger receives warnings (missing indexes, lost claims, failures);
	// nil discards them.
	Logger *slog.Logger
	// Hooks are optional metric callbacks.
	Hooks Hooks
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// statuses resolves the four status values with their defaults.
func (c Config) statuses() (p, pr, d, f dialect.Status, err error) {
	numeric := false
	for _, v := range []any{c.Pending, c.Processing, c.Done, c.Failed} {
		if st, err := dialect.StatusOf("", v); err == nil && st.IsNumeric() {
			numeric = true
		}
	}
	get := func(field string, v any, def string, optional bool) (dialect.Status, error) {
		if v == nil {
			if numeric {
				if optional {
					return dialect.Status{}, nil
				}
				return dialect.Status{}, invalid(field, "status value is required when status values are integers")
			}
			v = def
		}
		return dialect.StatusOf(field, v)
	}
	if p, err = get("Pending", c.Pending, DefaultPending, false); err != nil {
		return
	}
	if pr, err = get("Processing", c.Processing, DefaultProcessing, false); err != nil {
		return
	}
	if d, err = get("Done", c.Done, DefaultDone, false); err != nil {
		return
	}
	f, err = get("Failed", c.Failed, DefaultFailed, true)
	return
}

// ClaimTable validates c (everything but the strategy, which needs a
// server) and returns the table description for [dialect.Dialect.ClaimStore]
// with the scope values in order. The reaper and the schema helpers build
// their stores from it, so that they see exactly the claimer's table.
// Errors wrap [ErrInvalidConfig] and name the field.
func (c Config) ClaimTable() (dialect.ClaimTable, []any, error) {
	spec := dialect.ClaimTable{
		Table:     c.Table,
		ID:        or(c.IDColumn, "id"),
		IDKind:    c.IDKind,
		Status:    or(c.StatusColumn, "status"),
		Token:     or(c.TokenColumn, "token"),
		ClaimedAt: or(c.ClaimedAtColumn, "claimed_at"),
		Attempts:  c.AttemptsColumn,
		Version:   c.VersionColumn,
		CreatedAt: c.CreatedAtColumn,
		Columns:   append([]string(nil), c.Columns...),
	}
	var err error
	if spec.Pending, spec.Processing, spec.Done, spec.Failed, err = c.statuses(); err != nil {
		return dialect.ClaimTable{}, nil, err
	}
	if c.RequireScope && len(c.Scope) == 0 {
		return dialect.ClaimTable{}, nil, invalid("Scope", "is empty but RequireScope is set")
	}
	var values []any
	seen := map[string]bool{}
	for i, s := range c.Scope {
		if s.Value == nil {
			return dialect.ClaimTable{}, nil, invalid(fmt.Sprintf("Scope[%d]", i), "value of %q is nil", s.Column)
		}
		if seen[s.Column] {
			return dialect.ClaimTable{}, nil, invalid(fmt.Sprintf("Scope[%d]", i), "column %q appears twice", s.Column)
		}
		seen[s.Column] = true
		spec.Scope = append(spec.Scope, s.Column)
		values = append(values, s.Value)
	}
	if err := spec.Validate(); err != nil {
		return dialect.ClaimTable{}, nil, fmt.Errorf("claim: %w", err)
	}
	if err := c.validateOptions(spec); err != nil {
		return dialect.ClaimTable{}, nil, err
	}
	return spec, values, nil
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
	if c.AckDelay < 0 {
		return invalid("AckDelay", "%v is negative", c.AckDelay)
	}
	if c.ClaimConcurrency > maxClaimConcurrency {
		return invalid("ClaimConcurrency", "%d exceeds %d", c.ClaimConcurrency, maxClaimConcurrency)
	}
	if c.AckBuffer < 0 {
		return invalid("AckBuffer", "%d is negative", c.AckBuffer)
	}
	if c.MaxAttempts < 0 {
		return invalid("MaxAttempts", "%d is negative", c.MaxAttempts)
	}
	if c.MaxAttempts > 0 && spec.Attempts == "" {
		return invalid("MaxAttempts", "needs AttemptsColumn")
	}
	if c.MaxAttempts > 0 && !spec.Failed.IsSet() {
		return invalid("MaxAttempts", "needs a Failed status value")
	}
	switch c.FailMode {
	case FailRetry:
	case FailPark:
		if !spec.Failed.IsSet() {
			return invalid("FailMode", "FailPark needs a Failed status value")
		}
	default:
		return invalid("FailMode", "unknown mode %d", int(c.FailMode))
	}
	seen := map[string]string{}
	cols := []struct{ field, name string }{
		{"IDColumn", spec.ID}, {"StatusColumn", spec.Status}, {"TokenColumn", spec.Token},
		{"ClaimedAtColumn", spec.ClaimedAt}, {"AttemptsColumn", spec.Attempts},
		{"VersionColumn", spec.Version}, {"CreatedAtColumn", spec.CreatedAt},
	}
	for _, col := range cols {
		if col.name == "" {
			continue
		}
		if prev, ok := seen[col.name]; ok {
			return invalid(col.field, "column %q is also %s", col.name, prev)
		}
		seen[col.name] = col.field
	}
	return nil
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

func (c Config) ackDelay() time.Duration {
	if c.AckDelay == 0 {
		return DefaultAckDelay
	}
	return c.AckDelay
}

func (c Config) ackBuffer() int {
	if c.AckBuffer == 0 {
		return c.batchSize()
	}
	return c.AckBuffer
}

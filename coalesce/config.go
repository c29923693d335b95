package coalesce

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
)

// Default table names.
const (
	DefaultChangesTable = "coalesce_changes"
	DefaultKeysTable    = "coalesce_keys"
	DefaultSourcesTable = "coalesce_sources"
)

// Limits of the values a change carries. Keys, event ids and sources are
// stored in VARCHAR(191) columns (191 four-byte characters fit MySQL's
// index limit of 767 bytes); they are checked in bytes, so that every
// engine stores them whole.
const (
	MaxKeyLen     = 191
	MaxEventIDLen = 191
	MaxSourceLen  = 191
)

// Config describes a coalescer's tables and its limits. Zero values take
// the documented defaults; [New] validates everything and reports the first
// bad field in an error wrapping [dialect.ErrInvalidConfig].
type Config struct {
	// ChangesTable holds one row per accepted change; default
	// [DefaultChangesTable]. KeysTable holds one row per key, claimed by
	// the flushers; default [DefaultKeysTable]. SourcesTable holds the last
	// accepted sequence of each (key, source); default
	// [DefaultSourcesTable]. Each may be schema-qualified (schema.table).
	ChangesTable, KeysTable, SourcesTable string

	// MaxBacklog, if positive, is how many dirty keys (pending or being
	// flushed) the coalescer tolerates: above it [Coalescer.Accept]
	// refuses with an [*OverloadError].
	MaxBacklog int64
	// MaxAge, if positive, is how old the oldest unfolded change may be,
	// on the database clock: above it Accept refuses with an
	// [*OverloadError]. Changes of parked keys do not count.
	MaxAge time.Duration
	// PressureInterval is how long a measure of the backlog and of the
	// oldest change is reused by Accept before it is read again; default
	// 250 ms. Accept never reads them without MaxBacklog or MaxAge.
	PressureInterval time.Duration
	// RetryAfter is the delay an [*OverloadError] suggests; default 1 s.
	RetryAfter time.Duration

	// Notify makes the dirty mark that makes a key dirty also tell the
	// idle flushers of other processes, so that one of them folds the
	// key at once rather than at its next poll (FlusherConfig.PollMax):
	// on PostgreSQL, a notification sent after the mark committed, heard
	// by the processes whose dialect runs Listen (postgres.Dialect.Listen;
	// their [Flusher.Run] subscribes by itself). It costs a statement
	// per mark that writes, which under a hot key is rare (the key stays
	// dirty) and under uniform keys is nearly every Accept, and
	// PostgreSQL serialises the commits of notifying statements. The
	// flushers of this process are woken without it. AcceptTx does not
	// notify: call postgres.Notify with [Flusher.ClaimConfig]'s table in
	// its transaction. Other engines have no notifications: [New]
	// refuses Notify there.
	Notify bool

	// Group, if positive, makes concurrent [Coalescer.Accept] calls share
	// transactions: an Accept that arrives while GroupInFlight grouped
	// transactions are being written waits, and is then recorded together
	// with the other Accepts that arrived meanwhile, at most Group changes
	// a transaction, with [Coalescer.AcceptBatch]'s fixed number of
	// statements. An Accept that arrives while fewer are in flight starts
	// one at once, so a lone writer waits for nothing. Each Accept still
	// gets its own outcome, Accept's (an event id sent twice in one group
	// is recorded by the first and a duplicate for the second, in a
	// transaction after it); a database error or backpressure fails every
	// Accept of its group. At most [MaxBatch]; zero records each Accept in
	// a transaction of its own. AcceptTx is never grouped.
	Group int
	// GroupInFlight bounds the grouped transactions written at once;
	// default 2. Each takes a connection of the pool while it runs. On
	// the 2-core test machine, under one hot key and 32 writers, 2 took
	// the most changes per second on PostgreSQL and MariaDB; 4 and 8
	// took a half to a third fewer (docs/performance.md).
	GroupInFlight int

	// Retry bounds the retries of the coalescer's own transactions on
	// deadlocks and serialization failures; the zero value means
	// [dialect.RetryPolicy]'s defaults.
	Retry dialect.RetryPolicy

	// Logger receives warnings; nil means slog.Default().
	Logger *slog.Logger
	// Observer receives the events of the flushers' claims and acks
	// (package claim's operations, on the keys table).
	Observer observe.Observer
}

// Default limits.
const (
	DefaultPressureInterval = 250 * time.Millisecond
	DefaultRetryAfter       = time.Second
	// DefaultGroupInFlight is Config.GroupInFlight's default.
	DefaultGroupInFlight = 2
)

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("coalesce: %w: %s: %s", dialect.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// withDefaults returns cfg with its zero values replaced by the defaults,
// or the first invalid field.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.ChangesTable == "" {
		cfg.ChangesTable = DefaultChangesTable
	}
	if cfg.KeysTable == "" {
		cfg.KeysTable = DefaultKeysTable
	}
	if cfg.SourcesTable == "" {
		cfg.SourcesTable = DefaultSourcesTable
	}
	for _, f := range []struct{ field, name string }{
		{"ChangesTable", cfg.ChangesTable}, {"KeysTable", cfg.KeysTable}, {"SourcesTable", cfg.SourcesTable},
	} {
		if err := checkTableName(f.name); err != nil {
			return cfg, invalid(f.field, "%v", err)
		}
	}
	if cfg.ChangesTable == cfg.KeysTable || cfg.ChangesTable == cfg.SourcesTable || cfg.KeysTable == cfg.SourcesTable {
		return cfg, invalid("KeysTable", "the three tables need three names (%q, %q, %q)", cfg.ChangesTable, cfg.KeysTable, cfg.SourcesTable)
	}
	switch {
	case cfg.MaxBacklog < 0:
		return cfg, invalid("MaxBacklog", "must not be negative")
	case cfg.MaxAge < 0:
		return cfg, invalid("MaxAge", "must not be negative")
	case cfg.PressureInterval < 0:
		return cfg, invalid("PressureInterval", "must not be negative")
	case cfg.RetryAfter < 0:
		return cfg, invalid("RetryAfter", "must not be negative")
	case cfg.Group < 0 || cfg.Group > MaxBatch:
		return cfg, invalid("Group", "must be between 0 and %d", MaxBatch)
	case cfg.GroupInFlight < 0 || cfg.GroupInFlight > maxGroupInFlight:
		return cfg, invalid("GroupInFlight", "must be between 0 and %d", maxGroupInFlight)
	}
	if cfg.GroupInFlight == 0 {
		cfg.GroupInFlight = DefaultGroupInFlight
	}
	if err := cfg.Retry.Validate(); err != nil {
		return cfg, fmt.Errorf("coalesce: Retry: %w", err)
	}
	if cfg.PressureInterval == 0 {
		cfg.PressureInterval = DefaultPressureInterval
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// checkTableName accepts one or two dot-separated parts, each
// [A-Za-z_][A-Za-z0-9_]* and at most 63 bytes (a name every engine takes
// unquoted, quoted by the coalescer anyway).
func checkTableName(name string) error {
	if name == "" {
		return fmt.Errorf("empty name")
	}
	parts := 1
	start := 0
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '.' {
			c := name[i]
			ok := c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' && i > start
			if !ok {
				return fmt.Errorf("%q: byte %q at %d is not allowed (want [A-Za-z_][A-Za-z0-9_]*, optionally schema.table)", name, c, i)
			}
			continue
		}
		if i == start {
			return fmt.Errorf("%q: empty part", name)
		}
		if i-start > 63 {
			return fmt.Errorf("%q: part longer than 63 bytes", name)
		}
		if i < len(name) {
			parts++
			start = i + 1
		}
	}
	if parts > 2 {
		return fmt.Errorf("%q has more than two dot-separated parts", name)
	}
	return nil
}

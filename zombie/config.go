package zombie

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
)

// DefaultBatchLimit is the number of rows one reaper statement touches when
// [Config.BatchLimit] or [LeaseConfig.BatchLimit] is zero.
const DefaultBatchLimit = 500

// Config configures a [Reaper]. Timeout is required; every other zero value
// means the documented default. [New] validates it and reports the first bad
// field in an error wrapping [dialect.ErrInvalidConfig].
type Config struct {
	// Timeout is how long a row may stay processing since its claim or its
	// last heartbeat, measured on the database clock, before the reaper
	// treats its worker as dead. Required, positive. It must exceed the
	// heartbeat interval of every worker by a wide margin (several
	// intervals plus the longest pause a worker may suffer), and, for
	// workers that do not heartbeat, the longest time a batch may take: a
	// reaped row is claimed again, so a worker that was merely slow does
	// its work twice (its late ack then fails with [dialect.ErrClaimLost]).
	Timeout time.Duration

	// BatchLimit is the most rows one statement touches; zero means
	// [DefaultBatchLimit]. A sweep repeats statements until one touches
	// fewer rows, so locks are held only for BatchLimit rows at a time.
	BatchLimit int

	// AllScopes makes sweeps cover the whole table even when the claim
	// config is scoped. By default a reaper sweeps what its claim config
	// claims: the rows matching its Scope and ScopeValues (for example one
	// task's rows), or the whole table when it has no Scope. Set it for one
	// reaper that serves every task of a table.
	AllScopes bool

	// Logger receives a record per sweep that returned or parked rows, and
	// warnings for failures. Nil means slog.Default().
	Logger *slog.Logger

	// Observer, if not nil, is told about every sweep and every change of
	// leadership: see [OpSweep] and [OpLeader].
	Observer observe.Observer

	// Locker, if set, makes [Reaper.Run] sweep only while it holds the lease
	// on LockKey, so that one reaper of a fleet sweeps at a time. Optional:
	// concurrent sweeps are safe, just wasted work.
	Locker *tasklock.Locker

	// LockKey is the lease key; required with Locker, for example
	// "zombie:jobs".
	LockKey any
}

// LeaseConfig configures a [LeaseReaper]. The zero value is ready to use.
type LeaseConfig struct {
	// BatchLimit is the most leases one statement clears; zero means
	// [DefaultBatchLimit].
	BatchLimit int
	// Logger receives a record per sweep that cleared leases and warnings
	// for failures. Nil means slog.Default().
	Logger *slog.Logger
	// Observer, if not nil, is told about every sweep: see
	// [OpLeaseSweep].
	Observer observe.Observer
}

// invalid reports a bad field of a configuration, in the same shape as the
// dialect's validation errors wrapped by this package:
// "zombie: invalid configuration: Field: problem".
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("zombie: %w: %s: %s", dialect.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

func batchLimit(field string, n int) (int, error) {
	if n < 0 {
		return 0, invalid(field, "%d is negative (0 means %d)", n, DefaultBatchLimit)
	}
	if n == 0 {
		return DefaultBatchLimit, nil
	}
	return n, nil
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

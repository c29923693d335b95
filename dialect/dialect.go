package dialect

import (
	"fmt"
	"log/slog"
)

// Engine names a database engine family.
type Engine string

// The engines claimlock knows. TiDB is detected so that SKIP LOCKED, which it
// parses and silently ignores, is never chosen there.
const (
	EngineMySQL      Engine = "mysql"
	EngineMariaDB    Engine = "mariadb"
	EngineTiDB       Engine = "tidb"
	EnginePostgreSQL Engine = "postgresql"
	EngineSQLite     Engine = "sqlite"
)

// Strategy is how a claim marks rows.
type Strategy int

const (
	// StrategyAuto picks [Capabilities.PreferredStrategy].
	StrategyAuto Strategy = iota
	// StrategyTokenUpdate is UPDATE ... SET token=? ... ORDER BY pk LIMIT n,
	// then SELECT ... WHERE token=?. Works on MySQL 5.7, MariaDB and TiDB;
	// SQLite emulates the LIMIT with a primary-key subquery, and PostgreSQL
	// runs its SKIP LOCKED claim (a claim that waits for locks there blocks
	// other batches' heartbeats: see dialect/postgres).
	StrategyTokenUpdate
	// StrategySkipLocked selects candidate rows FOR UPDATE SKIP LOCKED and
	// marks them in the same statement (PostgreSQL) or transaction
	// (MySQL 8.0.1+, MariaDB 10.6+).
	StrategySkipLocked
)

// String returns "auto", "token-update" or "skip-locked".
func (s Strategy) String() string {
	switch s {
	case StrategyAuto:
		return "auto"
	case StrategyTokenUpdate:
		return "token-update"
	case StrategySkipLocked:
		return "skip-locked"
	}
	return "strategy(invalid)"
}

// Capabilities describe what the connected server can do. They are read once
// when the dialect is constructed.
type Capabilities struct {
	// Engine is the detected engine family.
	Engine Engine
	// Version is the server's version string as it reported it.
	Version string
	// SkipLocked is true where FOR UPDATE SKIP LOCKED really skips locked
	// rows (PostgreSQL 9.5+, MySQL 8.0.1+, MariaDB 10.6+; never TiDB).
	SkipLocked bool
	// Returning is true where UPDATE ... RETURNING exists (PostgreSQL,
	// SQLite 3.35+), so a claim and a batch ack take one round trip.
	Returning bool
	// PreferredStrategy is what [StrategyAuto] resolves to on this server,
	// chosen by measurement (see the README's performance section).
	PreferredStrategy Strategy
	// ClaimConcurrency is how many claim statements one claimer runs at
	// once by default (0: no limit), chosen by measurement. Concurrent
	// claims of one scope compete for the same first pending rows; where
	// the engine makes them queue on each other's row locks, queueing in the
	// claimer instead keeps throughput from collapsing as workers are added
	// (see the README's performance section).
	ClaimConcurrency int
	// PipelineAckClaim is true where claim loops should ack a batch and
	// claim the next in one operation (claim.WorkerConfig.Pipeline) by default, chosen by
	// measurement (see the README's performance section).
	PipelineAckClaim bool
}

// Supports reports whether s can run on this server.
func (c Capabilities) Supports(s Strategy) bool {
	switch s {
	case StrategyAuto, StrategyTokenUpdate:
		return true
	case StrategySkipLocked:
		return c.SkipLocked
	}
	return false
}

// Strategies lists the concrete strategies this server supports,
// token-update first.
func (c Capabilities) Strategies() []Strategy {
	out := []Strategy{StrategyTokenUpdate}
	if c.SkipLocked {
		out = append(out, StrategySkipLocked)
	}
	return out
}

// Resolve turns [StrategyAuto] into the preferred strategy and checks that s
// is supported, returning an error wrapping [ErrNotSupported] otherwise.
func (c Capabilities) Resolve(s Strategy) (Strategy, error) {
	if s == StrategyAuto {
		return c.PreferredStrategy, nil
	}
	if !c.Supports(s) {
		return 0, fmt.Errorf("%w: %s on %s %s", ErrNotSupported, s, c.Engine, c.Version)
	}
	return s, nil
}

// Options are the settings every engine package accepts. The zero value is
// ready to use.
type Options struct {
	// Retry bounds the internal retries of deadlocks and serialization
	// failures.
	Retry RetryPolicy
	// Logger receives warnings (a missing recommended index, a
	// statement-based binlog) and retry notices. Nil means slog.Default().
	Logger *slog.Logger
}

// Dialect is a connection to one database engine, made by an engine
// package from a handle the caller already has: [github.com/claimlock/claimlock/dialect/mysql].New,
// [github.com/claimlock/claimlock/dialect/postgres].New or NewStdlib,
// [github.com/claimlock/claimlock/dialect/sqlite].New. Claimers, lockers
// and reapers take it and build their statements on it; it is safe for
// concurrent use.
//
// Only this module's engine packages make Dialects: a value of another
// type passed where a Dialect is expected is refused with an error
// wrapping [ErrInvalidConfig]. Nothing of a Dialect but its capabilities
// is visible, so no caller can change the statements or capabilities the
// library relies on.
type Dialect interface {
	// Capabilities returns what the server can do, detected when the
	// Dialect was made.
	Capabilities() Capabilities
}

package tasklock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
)

// MinTTL is the shortest TTL accepted. A lease on a table whose time
// columns hold whole seconds (DATETIME, timestamptz(0)) cannot expire more
// precisely than its column: such a lease is taken over up to one second
// after its TTL, never before (see the dialect package, "Times").
const MinTTL = time.Millisecond

// Config configures a [Locker]. Only Table and TTL are required; every other
// zero value means the documented default. [New] validates it and reports the
// first bad field in an error wrapping [dialect.ErrInvalidConfig].
type Config struct {
	// Table describes where leases live: the caller's task table (Keyed
	// false; see [TaskTable]) or a library-managed key table (see
	// [KeyTable] and [CreateTable]). Required.
	Table dialect.LeaseTable

	// TTL is how long an acquisition or renewal holds the lease on the
	// database clock. Required, at least [MinTTL]. Without an ExpiresAt
	// column every holder of a key must use the same TTL (the expiry is
	// computed as LockedAt + the TTL of whoever looks).
	TTL time.Duration

	// RenewInterval is how often [Lease.KeepAlive] renews, measured from the
	// start of the last successful renewal. Zero means TTL/3. It must be
	// positive and, with SafetyMargin, fit inside the TTL:
	// RenewInterval + SafetyMargin < TTL.
	RenewInterval time.Duration

	// SafetyMargin is subtracted from the TTL to form the local deadline:
	// a lease's context is cancelled at (local start of the last successful
	// acquire or renew statement) + TTL - SafetyMargin, so the holder stops
	// before the database lets anyone else in. It absorbs clock-rate
	// differences and the time a cancelled task needs to notice. Zero means
	// TTL/10. It must be less than the slack TTL - RenewInterval.
	SafetyMargin time.Duration

	// MinHold, if positive, is the shortest time a key stays taken after an
	// acquisition, even when its lease is released earlier: ShedLock's
	// lockAtLeastFor. A lease released (or finished) before acquisition +
	// MinHold, on the database clock, stays held in the database, with its
	// expiry moved to that time, so that every other acquisition of the key
	// is refused until then; a release after it frees the key at once. A
	// job that runs on many hosts on the same schedule, and takes much less
	// than its period, thus runs once per window even when the hosts' clocks
	// disagree by minutes: set MinHold somewhat below the period, above the
	// largest disagreement between the hosts' schedules. It needs a table
	// with Owner and ExpiresAt columns ([KeyTable] has them). Renewals do
	// not move it, and it may exceed the TTL. [Locker.ForceRelease] ends a
	// hold. Zero means none.
	MinHold time.Duration

	// PollInterval is the first delay between tries of [Locker.AcquireWait];
	// later delays double up to MaxPollInterval, with jitter. Zero means
	// TTL/10, at most one second.
	PollInterval time.Duration

	// MaxPollInterval caps the delay between tries of AcquireWait. Zero
	// means 8 × PollInterval. It must not be below PollInterval.
	MaxPollInterval time.Duration

	// Logger receives debug records for acquisitions and renewals and
	// warnings for failed renewals and lost leases. Nil means slog.Default().
	Logger *slog.Logger

	// Observer, if not nil, is told about every acquire, renew, release,
	// finish, force-release and loss: see [OpAcquire] and the other Ops
	// of this package.
	Observer observe.Observer

	// Now is the local clock used only for local deadlines: durations are
	// always differences of two Now readings, so a constant offset (a
	// skewed host clock) changes nothing. It must advance at the rate of
	// real time; nil means time.Now (monotonic). The database clock decides
	// every expiry.
	Now func() time.Time
}

func configError(field, format string, args ...any) error {
	return fmt.Errorf("%w: tasklock: Config.%s: %s", dialect.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// withDefaults validates c and fills in its zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.TTL <= 0 {
		return c, configError("TTL", "must be positive, got %v", c.TTL)
	}
	if c.TTL < MinTTL {
		return c, configError("TTL", "must be at least %v, got %v", MinTTL, c.TTL)
	}
	if c.RenewInterval < 0 {
		return c, configError("RenewInterval", "must not be negative, got %v", c.RenewInterval)
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.TTL / 3
	}
	if c.RenewInterval >= c.TTL {
		return c, configError("RenewInterval", "%v must be shorter than TTL %v", c.RenewInterval, c.TTL)
	}
	if c.SafetyMargin < 0 {
		return c, configError("SafetyMargin", "must not be negative, got %v", c.SafetyMargin)
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = c.TTL / 10
	}
	if slack := c.TTL - c.RenewInterval; c.SafetyMargin >= slack {
		return c, configError("SafetyMargin", "%v must be less than TTL - RenewInterval = %v, or the lease ends before it is renewed", c.SafetyMargin, slack)
	}
	if c.MinHold < 0 {
		return c, configError("MinHold", "must not be negative, got %v", c.MinHold)
	}
	if c.MinHold > 0 && (c.Table.Owner == "" || c.Table.ExpiresAt == "") {
		return c, configError("MinHold", "needs a lease table with Owner and ExpiresAt columns (the hold is an expiry; KeyTable has both)")
	}
	if c.PollInterval < 0 {
		return c, configError("PollInterval", "must not be negative, got %v", c.PollInterval)
	}
	if c.PollInterval == 0 {
		c.PollInterval = min(c.TTL/10, time.Second)
	}
	if c.MaxPollInterval < 0 {
		return c, configError("MaxPollInterval", "must not be negative, got %v", c.MaxPollInterval)
	}
	if c.MaxPollInterval == 0 {
		c.MaxPollInterval = 8 * c.PollInterval
	}
	if c.MaxPollInterval < c.PollInterval {
		return c, configError("MaxPollInterval", "%v is below PollInterval %v", c.MaxPollInterval, c.PollInterval)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// TaskTable describes a lease on rows of an existing task table (the cron
// story's xxx_task(id, status, lock_at)): integer key "id", lock time
// "lock_at" and an owner column "lock_owner" that the caller adds (see
// [AlterTaskTableDDL]). Change the fields to match your column names, and
// set ExpiresAt and Fence if the table has those columns.
func TaskTable(table string) dialect.LeaseTable {
	return dialect.LeaseTable{
		Table: table, Key: "id", KeyKind: dialect.IDInt,
		Owner: "lock_owner", LockedAt: "lock_at",
	}
}

// TaskTableNoOwner describes a lease on rows of the cron story's task table
// exactly as it is, xxx_task(id, status, lock_at), with no owner column:
// integer key "id", lock time "lock_at" and status "status" (for
// [Lease.Finish]). A lease is then held by its stamp, the lock_at value it
// wrote, read back from the database: it is exclusive like an owned lease,
// because a new acquisition writes lock_at at least a TTL (plus the
// column's resolution) after the last one. One limit: on a lock_at column
// without sub-second precision, a force-release followed by a new
// acquisition within the same second gives the new holder the old holder's
// stamp, so force-release only leases whose holder is gone (or add an owner
// column, [AlterTaskTableDDL]). Change the fields to match your columns.
func TaskTableNoOwner(table string) dialect.LeaseTable {
	return dialect.LeaseTable{Table: table, Key: "id", KeyKind: dialect.IDInt, LockedAt: "lock_at", Status: "status"}
}

// KeyTable describes the library-managed key table [CreateTable] creates:
// text keys of up to 255 bytes, with owner, lock_at, expires_at and fence.
func KeyTable(table string) dialect.LeaseTable {
	return store.KeyedLeaseTable(table, 0)
}

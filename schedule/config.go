package schedule

import (
	"fmt"
	"github.com/claimlock/claimlock/observe"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// The tables' names when Config leaves them empty.
const (
	DefaultJobsTable = "claimlock_jobs"
	DefaultRunsTable = "claimlock_runs"
)

// Missed says what happens to fire times that no process started within
// their grace ([Config.Grace]): every process was down, the job was still
// running its previous fire time, or the database could not be reached.
type Missed int

const (
	// MissedDefault, in a [Job], means the scheduler's [Config.Missed].
	MissedDefault Missed = iota
	// SkipMissed records missed fire times as skipped and waits for the
	// next one. The default.
	SkipMissed
	// CatchUp runs a job once, late, for its missed fire times: the
	// latest missed fire time runs as soon as a process sees it (the
	// older ones are recorded as skipped), unless a newer fire time is due
	// by then, whose run catches up instead. Quartz's "fire once now".
	CatchUp
)

// String returns "default", "skip" or "catch-up".
func (m Missed) String() string {
	switch m {
	case MissedDefault:
		return "default"
	case SkipMissed:
		return "skip"
	case CatchUp:
		return "catch-up"
	}
	return "missed(" + strconv.Itoa(int(m)) + ")"
}

// Config configures a [Scheduler]. Every zero value means the documented
// default; [New] validates it and names the first bad field in an error
// wrapping [dialect.ErrInvalidConfig]. Every process that runs a job must
// use the same tables, TTL, Grace and missed policy for it.
type Config struct {
	// Jobs and Runs are the tables (see [CreateTables]); empty means
	// [DefaultJobsTable] and [DefaultRunsTable]. The jobs table holds one
	// row per job (its lease, its paused flag and the latest fire time
	// handled); the runs table one row per fire time run and one per range
	// of fire times skipped, keyed by (job, fire time).
	Jobs, Runs string

	// TTL is how long the lease that covers a run holds without a renewal,
	// on the database clock: how soon another process may run the job
	// after this one died mid-run (ShedLock's lockAtMostFor). The lease is
	// kept alive while the run goes on, so a run may last longer than
	// the TTL. Zero means 30 seconds; at least tasklock.MinTTL.
	TTL time.Duration

	// RenewInterval and SafetyMargin are the lease's (see
	// tasklock.Config): zero means TTL/3 and TTL/10.
	RenewInterval, SafetyMargin time.Duration

	// MinHold, if positive, keeps a job's lease taken for at least this
	// long after each run starts, even when the run ends sooner: no other
	// run of the job starts before (ShedLock's lockAtLeastFor). Runs are
	// once per fire time without it; it is a rate limit on top.
	MinHold time.Duration

	// Grace is how late a fire time may still start, on the database
	// clock: a fire time that no process started within Grace of it (and
	// before the next fire time) is missed, and handled by the missed
	// policy. Zero means one minute.
	Grace time.Duration

	// Missed is the policy for missed fire times; zero means SkipMissed.
	Missed Missed

	// MaxSkew is how far ahead of a fire time a tick may come (a host
	// whose clock runs ahead of the database's, a scheduler that wakes
	// early) and still stand for it: such a tick waits until the fire time
	// on the database clock and then runs it, so that a fire time whose
	// ticks all came early is not lost. A tick is never taken for a fire
	// time more than half the gap to the one before away. Zero means one
	// second.
	MaxSkew time.Duration

	// PollInterval is how often a due fire time whose lease is held (the
	// previous run is still going) tries again, until its grace ends.
	// Zero means TTL/10, at most 250 ms.
	PollInterval time.Duration

	// Worker names this process in the runs table (who ran or skipped).
	// Empty means hostname:pid.
	Worker string

	// History is how many rows of each job the runs table keeps: older
	// ones are deleted after each run. Zero means 1000; negative keeps
	// everything.
	History int

	// Logger receives warnings (a run found lost, a failed record) and
	// debug records of each claim. Nil means slog.Default().
	Logger *slog.Logger

	// Observer, if set, receives an event after each operation of the
	// scheduler (Source observe.SourceSchedule: OpClaim, OpSkip, OpFinish,
	// OpPause), synchronously, so it must be cheap and safe for concurrent
	// use. The job's lease reports its own operations through the
	// tasklock events of the lease table's Locker (Config.Leases).
	Observer observe.Observer

	// Now is the local clock, used only for durations (how long to sleep
	// until a fire time, the lease's local deadline): a constant offset, a
	// host whose clock is wrong, changes nothing, since every fire time is
	// decided on the database clock. Nil means time.Now.
	Now func() time.Time
}

func configError(field, format string, args ...any) error {
	return fmt.Errorf("%w: schedule: Config.%s: %s", dialect.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// withDefaults validates c and fills in its zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.Jobs == "" {
		c.Jobs = DefaultJobsTable
	}
	if c.Runs == "" {
		c.Runs = DefaultRunsTable
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"TTL", c.TTL}, {"RenewInterval", c.RenewInterval}, {"SafetyMargin", c.SafetyMargin}, {"MinHold", c.MinHold},
		{"Grace", c.Grace}, {"MaxSkew", c.MaxSkew}, {"PollInterval", c.PollInterval}} {
		if d.v < 0 {
			return c, configError(d.field, "must not be negative, got %v", d.v)
		}
	}
	if c.TTL == 0 {
		c.TTL = 30 * time.Second
	}
	if c.Grace == 0 {
		c.Grace = time.Minute
	}
	if c.MaxSkew == 0 {
		c.MaxSkew = time.Second
	}
	if c.PollInterval == 0 {
		c.PollInterval = min(c.TTL/10, 250*time.Millisecond)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Millisecond
	}
	switch c.Missed {
	case MissedDefault:
		c.Missed = SkipMissed
	case SkipMissed, CatchUp:
	default:
		return c, configError("Missed", "unknown policy %d", int(c.Missed))
	}
	if c.Worker == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown"
		}
		c.Worker = host + ":" + strconv.Itoa(os.Getpid())
	}
	if len(c.Worker) > 255 {
		return c, configError("Worker", "is %d bytes; the runs table holds 255", len(c.Worker))
	}
	if c.History == 0 {
		c.History = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

package observe

import (
	"strings"
	"time"
)

// Source names the package that reported an [Event].
type Source string

// The packages that report events.
const (
	// SourceClaim is package claim: claims and the writes of claimed
	// batches, held batches included (the Ops claim.OpClaim,
	// claim.OpAck, ...).
	SourceClaim Source = "claim"
	// SourceTasklock is package tasklock: lease operations (the Ops
	// tasklock.OpAcquire, tasklock.OpRenew, ...).
	SourceTasklock Source = "tasklock"
	// SourceZombie is package zombie: sweeps of reapers and changes of
	// leadership (the Ops zombie.OpSweep, zombie.OpLeaseSweep,
	// zombie.OpLeader).
	SourceZombie Source = "zombie"
	// SourceSchedule is package schedule: fire times claimed, skipped and
	// finished, jobs paused (the Ops schedule.OpClaim, schedule.OpSkip,
	// schedule.OpFinish, schedule.OpPause).
	SourceSchedule Source = "schedule"
	// SourceCoalesce is package coalesce: changes accepted and keys folded
	// (the Ops coalesce.OpAccept, coalesce.OpFold); its flushers' claims
	// and acks are package claim's events on the keys table.
	SourceCoalesce Source = "coalesce"
)

// Op names an operation. Its value is its [Source], a dot and its name:
// "claim.ack", "tasklock.acquire", "zombie.sweep". Each package declares its
// own Ops as constants (claim.OpAck) and documents there what they report.
type Op string

// Name returns the operation's name without its source: "ack" for
// "claim.ack".
func (o Op) Name() string {
	_, name, ok := strings.Cut(string(o), ".")
	if !ok {
		return string(o)
	}
	return name
}

// Event describes one finished operation. Fields that do not apply to its
// Op are zero; each field says which operations set it. The Ops are
// documented with their constants in the package that reports them.
type Event struct {
	// Source is the package that reported the event.
	Source Source
	// Op is the operation.
	Op Op

	// Table is the table the operation ran on, as configured: the claim
	// table (claim; zombie.OpSweep), the lease table (tasklock;
	// zombie.OpLeaseSweep) or the runs table (schedule).
	Table string
	// Scope names the claim table's scope columns (nil for an unscoped
	// table), and ScopeValues are the values the operation was restricted
	// to, in the order of Scope: the claimer's (claim), the sweep's
	// (zombie.OpSweep; nil when it swept every scope).
	Scope       []string
	ScopeValues []any
	// Key is the leased key (tasklock), or the job's name (schedule).
	Key any
	// Token names who held what the operation concerned: the batch's claim
	// token (claim; "" for a claim that failed before it was written, and
	// for a held batch, which writes no token, a name of the batch), or
	// the lease's owner token (tasklock; "" for a failed acquisition).
	Token string

	// Start is when the operation started, on the local clock; Duration
	// is how long it took (for claim.OpClaim including any wait for a
	// claim slot; zero for tasklock.OpLost and zombie.OpLeader, which are
	// moments, not operations).
	Start    time.Time
	Duration time.Duration
	// Err is the operation's error, nil on success. Rows found lost are
	// not an error here: they are counted in Lost. For tasklock.OpAcquire
	// it matches dialect.ErrLeaseHeld when another owner holds the lease;
	// for an OpLost (claim.OpLost of a held batch, tasklock.OpLost) it is
	// why the batch or lease ended; a sweep stopped because its context
	// ended reports none.
	Err error
	// Background is set when the operation ran on a goroutine of the
	// library rather than in a caller's call: a deferred ack's write, a
	// keep-alive heartbeat or renewal, a loss found by a batch or lease on
	// its own. The observer's ctx then carries the values, not the
	// cancellation, of the context that started that work.
	Background bool

	// Claimed is the number of rows a claim.OpClaim took (zero when
	// nothing was pending).
	Claimed int
	// Acked and Requeued count the rows of a claim.OpAck set to done and
	// sent back to pending because their version moved since the claim.
	Acked, Requeued int
	// Failed counts the rows of a claim.OpFail that were failed. Parked
	// counts the rows parked with the failed status: those of Failed
	// (claim.OpFail; the others went back to pending, claimable again
	// after RetryIn), or those a zombie.OpSweep parked because their
	// attempts reached the maximum.
	Failed, Parked int
	// RetryIn is the delay a claim.OpFail gave the rows it retried (zero
	// without a RunAt column, or when it parked them all).
	RetryIn time.Duration
	// Lost counts rows that the batch's token no longer held (reaped,
	// released or reset by an operator, maybe re-claimed): the rows of a
	// claim.OpAck, claim.OpFail or claim.OpSnooze it left untouched, or
	// the rows a heartbeat found lost (claim.OpLost of a batch of
	// Claimer.Claim).
	Lost int
	// LostIDs are the keys of the Lost rows of a claim.OpAck, claim.OpFail
	// or claim.OpLost (nil for a claim.OpSnooze, whose statement counts
	// them only).
	LostIDs []any
	// Rows counts the rows of a claim.OpSnooze (snoozed), claim.OpRelease
	// (released), claim.OpHeartbeat (still held by the token), and of a
	// held batch's claim.OpCommit, claim.OpRollback and claim.OpLost (the
	// rows the batch held); for package schedule, what its Op recorded
	// (see schedule.OpClaim and the others).
	Rows int
	// Tx is set for an ack or fail written in the caller's transaction
	// (claim.OpAck, claim.OpFail of Batch.AckTx, Batch.FailTx): it counts
	// only if the caller commits.
	Tx bool
	// Held is set for the operations of a held batch (Claimer.Holder): its
	// claim.OpClaim, its claim.OpAck and claim.OpFail (which, like Tx,
	// count only if the batch commits), claim.OpCommit, claim.OpRollback
	// and claim.OpLost.
	Held bool

	// Fence is the lease's fencing token (tasklock; 0 without a fence
	// column or for a failed acquisition).
	Fence int64
	// OK is the outcome of a lease operation: the lease taken
	// (tasklock.OpAcquire), renewed (tasklock.OpRenew), the row freed
	// (tasklock.OpRelease, tasklock.OpFinish), the lease found held
	// (tasklock.OpForceRelease).
	OK bool
	// TTL is the locker's lease duration (tasklock).
	TTL time.Duration

	// Returned counts the rows a zombie.OpSweep returned to pending, or
	// the expired leases a zombie.OpLeaseSweep cleared. They are counted
	// also when the sweep then failed: they were committed.
	Returned int
	// Statements is the number of bounded statements a zombie.OpSweep or
	// zombie.OpLeaseSweep ran.
	Statements int
	// Leading is, for zombie.OpLeader, whether the reaper now holds its
	// lease.
	Leading bool
}

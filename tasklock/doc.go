// Package tasklock provides leases: at most one holder at a time for a row
// of your own task table or for any string key, on MySQL/MariaDB,
// PostgreSQL or SQLite, through a [dialect.Dialect].
//
// # Two modes, one API
//
// A task-table lease locks a row that already exists, such as the cron
// story's xxx_task(id, status, lock_at): describe the table with
// [TaskTable] (or a [dialect.LeaseTable] naming your columns) and add the
// owner column, plus the optional ones you want; [AlterTaskTableDDL]
// prints the ALTER TABLE statements. A missing row is [dialect.ErrKeyNotFound].
//
// A keyed lease locks any string key in a library-managed table: create it
// with [CreateTable] (or print [CreateTableDDL]) and describe it with
// [KeyTable]. Acquire inserts a missing key's row.
//
// Both go through [New] and [Locker.Acquire], [Locker.AcquireWait] or
// [Locker.Do]:
//
//	lk, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: 30 * time.Second})
//	if err != nil {
//		return err
//	}
//	return lk.Do(ctx, "nightly-report", func(ctx context.Context, l *tasklock.Lease) error {
//		return sendReport(ctx, l.Fence())
//	})
//
// # Columns and what they buy
//
//   - Key, Owner and LockedAt are required. The owner column (at least
//     VARCHAR(40)) holds a fresh random token per acquisition, so renew and
//     release are conditioned on the holder: a late holder can never free or
//     extend a lease someone else took over.
//   - ExpiresAt (optional) stores each lease's own expiry. Without it the
//     expiry is LockedAt + the TTL of whoever looks, so every process that
//     locks a key must be configured with the same TTL; with it holders may
//     differ, and expired keyed leases can be reaped.
//   - Fence (optional) is incremented by every acquisition: [Lease.Fence]
//     strictly increases per key. Without it leases report fence 0.
//
// # Time
//
// Every expiry is decided on the database clock, inside the statement that
// compares it; application clocks are never compared across hosts, so a
// skewed host clock cannot cause a double run. The holder's side is local
// and monotonic: a lease's context is cancelled at (start of the last
// successful acquire or renew statement) + TTL - SafetyMargin on the local
// clock, by a timer that fires whether or not the database answers, so the
// holder stops before the database would let anyone else in.
//
// # Keeping a lease
//
// A lease lasts one TTL. Work that may run longer must keep it alive
// ([Lease.KeepAlive], which [Locker.Do] does) and must watch
// [Lease.Done] or the context from [Lease.Context]: with a TTL shorter
// than the work and no keep-alive, the lease expires mid-work and a second
// holder runs the same work at the same time. A keep-alive is not a
// guarantee either: a process paused longer than the margin (GC, swapping,
// a stopped VM) can still act after its deadline. That is what the fence is
// for: attach [Lease.Fence] to every write the lease protects and have the
// target reject a write whose fence is lower than one it has seen.
//
// # Releasing
//
// [Lease.Release] is owner-verified: it returns (false, nil) when the lease
// had already expired and been taken or freed (a reported no-op, never an
// error and never a write to someone else's lease). [Locker.ForceRelease]
// frees a key whoever holds it, for operators.
//
// # Minimum hold
//
// Config.MinHold keeps a key taken for at least that long after each
// acquisition, even when its lease is released early (ShedLock's
// lockAtLeastFor): an early release leaves the row held until acquisition +
// MinHold on the database clock, so a job scheduled on many hosts, whose
// clocks and schedulers disagree by less than MinHold, runs once per window.
// It needs Owner and ExpiresAt columns ([KeyTable] has them).
//
// # No advisory locks
//
// Leases are ordinary rows changed by short autocommit statements. There is
// no session state (no pg_advisory_lock, no GET_LOCK), so they work behind
// PgBouncer in transaction pooling mode and through any *sql.DB or pgx
// pool, and a lease survives the loss of the connection that took it.
package tasklock

// Package zombie is claimlock's reaper: it gives the rows of dead workers
// back, parks poison rows, and clears expired leases.
//
// # What a reaper does
//
// A worker that claims rows with [claim.Claimer] and dies before acking them
// (a crash, a SIGKILL, a lost host) leaves them processing under its token.
// A [Reaper] finds rows that have been processing longer than
// [Config.Timeout] since their claim or last heartbeat, measured on the
// database clock inside the statement (app clocks are never compared), and
// returns them to pending with their token cleared, so another worker claims
// them. Because every ack is conditioned on the token, a worker that was only
// slow, not dead, cannot overwrite the new owner's work: its late ack gets
// [dialect.ErrClaimLost].
//
//	r, err := zombie.New(d, claimCfg, zombie.Config{Timeout: 5 * time.Minute})
//	go r.Run(ctx, 30*time.Second)
//
// A reaper sweeps the rows its claim config claims: with a scoped config
// (Scope and ScopeValues, say one task's rows) only those, so that the
// reaper of one task never takes another task's rows with its timeout. Set
// [Config.AllScopes] for one reaper serving every scope of the table.
//
// # What it never does
//
// It never touches a row whose worker heartbeats ([claim.Batch.KeepAlive],
// every claim.Config.HeartbeatInterval; [claim.Claimer.Run] does it) more
// often than the timeout:
// a heartbeat moves the claim time forward, and the reaper's statement only
// matches rows whose claim time is older than the timeout. The timeout must
// therefore exceed the heartbeat interval by a wide margin (several
// intervals, plus the longest pause a worker may suffer: a garbage
// collection, a slow database); for workers that do not heartbeat it must
// exceed the longest batch. The reaper cannot check this, since it does not
// know your workers: a timeout that is too short does not break the
// exclusive claim, but a slow row is then processed twice.
//
// Side effects outside the database are at least once: a worker killed
// after sending a row's message but before acking it sends it again after
// the row is reaped and re-claimed. Make such sends idempotent with a key
// per row (and attempt, if the receiver must see retries).
//
// # Poison rows
//
// A row whose handler crashes its worker every time would be reaped and
// re-claimed forever. With the claim table's Attempts column (incremented by
// every claim) and a Failed status, a stale row whose attempts reached the
// claim config's MaxAttempts ([claim.Config.MaxAttempts]: the table's
// parking rule is described once, for claimers and reapers) is parked with
// the failed status instead, keeping its attempts count for the operator.
//
// # Bounded sweeps and the index they need
//
// [Reaper.Sweep] runs bounded statements: each touches at most
// [Config.BatchLimit] stale rows, oldest claim first, and a sweep repeats
// them until one touches fewer. A sweep over a large table therefore never
// holds locks on many rows at once, and claimers and ackers wait at most one
// short statement for it.
//
// Each statement finds stale rows by status and claim time, in the order of
// an index on (status, claimed_at): [claim.Claimer.IndexDDL] creates it
// with the claim and token indexes
// (and, for a scoped reaper on PostgreSQL and SQLite, the scope index), and
// claimers warn at start-up when it is missing. With it a sweep that finds
// nothing reads nothing, whatever the table's size, statistics or plan
// cache; without it each sweep scans the table, and on MySQL and MariaDB the
// scan locks the rows it reads: reapers and claimers then deadlock with each
// other (the dialect retries, but a busy table can exhaust the retries).
// With MaxAttempts, parking reads the stale rows until it finds BatchLimit
// at MaxAttempts, so a backlog of stale rows costs each statement a read of
// the backlog (not of the table).
//
// # One reaper per fleet
//
// Reapers may run in every process: concurrent sweeps are safe (a row is
// returned once; the others find it pending). To avoid the wasted work, give
// [Config.Locker] a [tasklock.Locker] and a LockKey: [Reaper.Run] then tries
// the lease once per tick without waiting, sweeps only while it holds it,
// keeps it alive between ticks, runs each sweep under the lease's context so
// a lost lease stops it, and releases it on exit.
//
// # Leases
//
// A [LeaseReaper] clears expired leases of a lease table with an ExpiresAt
// column (the owner is cleared, the row and its fence stay, so fences keep
// increasing). Expired leases can be acquired without it; it only keeps
// dead holders' tokens out of the table.
package zombie

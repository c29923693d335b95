// Package claimotel reports claimlock's operations to OpenTelemetry: spans
// and metrics for claims, acks, fails, snoozes, heartbeats and releases of
// [claim.Claimer], sweeps of [zombie.Reaper] and [zombie.LeaseReaper], and
// acquisitions, renewals, releases and losses of [tasklock] leases, the
// runs of [schedule] jobs, and the accepts and folds of a [coalesce]
// coalescer.
//
// One [Observer] (an [observe.Observer]) serves all five packages; install
// it as the Observer of their configs, beside others with [observe.Join]:
//
//	obs, err := claimotel.New() // the global tracer and meter providers
//	...
//	claim.Config{..., Observer: obs}
//	tasklock.Config{..., Observer: obs}
//	zombie.Config{..., Observer: obs}
//	schedule.Config{..., Observer: obs}
//
// # Spans
//
// Each operation becomes one span named "claimlock.<op>" (claimlock.claim,
// claimlock.ack, claimlock.fail, claimlock.snooze, claimlock.heartbeat,
// claimlock.release, claimlock.reap, claimlock.lease_reap,
// claimlock.lease.acquire, .renew, .release, .finish, .force_release and
// .lost), a child of the span in the operation's context, with its start set
// to when the operation started. claimlock reports an operation once it has
// finished, so spans of a database driver's own instrumentation are its
// siblings, not its children. Work the library does on its own goroutines (a
// deferred ack's write, keep-alive heartbeats and renewals, a lease's loss)
// starts a new trace linked to the span that started it, so that a lease held
// for hours does not grow one trace without end.
//
// A claim that found nothing pending makes no span: an idle service polls
// all the time, and a span per empty poll would bury the traces that matter.
// It is counted in claimlock.claims.empty instead, and its latency recorded
// in claimlock.claim.duration. A claim that fails makes a span with its
// error, as every failed operation does.
//
// Attributes an operator filters on: claimlock.table, claimlock.scope
// ("task_id=42"), claimlock.token, the row counts (claimlock.rows.claimed,
// .acked, .requeued, .failed, .parked, .lost, .held, .released),
// claimlock.lease.key, .owner, .fence and .ttl_ms. Failed operations record
// the error and set the span's status to Error; a contended acquisition
// ([dialect.ErrLeaseHeld]) is not an error, it sets
// claimlock.lease.acquired to false.
//
// # Metrics
//
// Instruments (meter "github.com/claimlock/claimlock/contrib/otel"):
//
//   - claimlock.claim.duration (histogram, seconds): claim latency,
//     including the wait for a claim slot (empty claims too).
//   - claimlock.claims.empty (counter): claims that found nothing pending.
//   - claimlock.rows.claimed, .acked, .failed, .requeued, .lost, .reaped,
//     .parked (counters, rows): parked counts rows parked by a fail and by
//     the reaper; reaped counts stale rows the reaper returned to pending.
//   - claimlock.leases.acquired, claimlock.leases.lost (counters).
//   - claimlock.errors (counter): failed operations, by claimlock.op.
//   - claimlock.schedule.runs.started, claimlock.schedule.runs.finished
//     (by claimlock.schedule.result: succeeded, failed or lost) and
//     claimlock.schedule.skips (counters), by claimlock.schedule.runs_table
//     and claimlock.schedule.job.
//
// A scheduler's claims, ends of runs, skips and pauses make spans named
// claimlock.schedule.claim, .finish, .skip and .pause, carrying the job
// and, for .finish, the result; a fire time claimed by another process (or
// none due) makes no span, as an empty claim of rows makes none.
//
// A coalescer's accepts are counted, never spans (an accept is one
// request of a hot path, whose span is the caller's):
// claimlock.coalesce.accepts by claimlock.coalesce.result (recorded,
// duplicate, stale, overloaded, error). Each fold is a span,
// claimlock.coalesce.fold, with the key, the changes folded and whether the
// key was requeued; claimlock.coalesce.folds, .changes_folded (their ratio
// is the coalescing ratio) and .requeued count them, by claimlock.table.
//
// Row metrics carry claimlock.table, lease metrics claimlock.lease.table.
// Scope values and lease keys are left out of metrics by default: they are
// unbounded for many schemas (a task id per task), and every distinct value
// is a time series. [WithScopeMetrics] adds claimlock.scope to row metrics
// for schemas whose scopes are few.
package claimotel

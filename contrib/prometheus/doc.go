// Package claimprom exports claimlock's state and activity as Prometheus
// metrics.
//
// A [Metrics] is a prometheus.Collector. At each scrape it reads
// [claim.Claimer.Stats] (or [claim.Claimer.TableStats] for a whole table)
// for every table (and scope) it watches and
// reports row counts by status and the ages of the oldest pending and
// processing rows, on the database clock; and, installed as the Observer of
// claim, tasklock, zombie and schedule configs, it counts what the
// processes did:
//
//	m := claimprom.New()
//	err := errors.Join(
//		m.Watch(d, cfg),             // cfg's scope: task_id=42
//		m.WatchTable(d, cfg),        // the whole table
//		m.InitLeases(lockCfg.Table), // a lease table
//	)
//	prometheus.MustRegister(m)
//	cfg.Observer = m // and tasklock.Config / zombie.Config Observer
//
// # Metrics
//
// From Stats, per table and scope (scope "" for a whole table):
//
//	claimlock_rows{table,scope,status}                  pending, processing, done, failed, other
//	claimlock_oldest_pending_age_seconds{table,scope}   only for a table with a CreatedAt column
//	claimlock_oldest_processing_age_seconds{table,scope}
//	claimlock_stats_up{table,scope}                     0 when the last read failed
//
// From events, per table (lease table for leases):
//
//	claimlock_claim_duration_seconds{table}             histogram
//	claimlock_rows_claimed_total, _acked_total, _failed_total, _requeued_total,
//	_lost_total, _reaped_total, _parked_total{table}
//	claimlock_leases_acquired_total, claimlock_leases_lost_total{lease_table}
//	claimlock_errors_total{table,op}
//
// From a scheduler (package schedule), per runs table and job:
//
//	claimlock_schedule_runs_started_total{runs_table,job}        fire times this process ran
//	claimlock_schedule_runs_finished_total{runs_table,job,result} succeeded, failed or lost
//	claimlock_schedule_skips_total{runs_table,job}                ranges of skipped fire times
//	claimlock_schedule_paused{runs_table,job}                     1 paused, 0 resumed (by this process)
//
// A failed schedule statement counts in claimlock_errors_total with op
// schedule.claim, schedule.skip or schedule.pause; a job's own error is a
// failed run, not an error of the library. Job names are labels: a
// scheduler's jobs are few and fixed.
//
// From a coalescer (package coalesce), per table (keys are never labels):
//
//	claimlock_coalesce_accepts_total{changes_table,result}  recorded, duplicate, stale, overloaded, error
//	claimlock_coalesce_folds_total{keys_table}              state writes
//	claimlock_coalesce_changes_folded_total{keys_table}     changes in them (÷ folds: the coalescing ratio)
//	claimlock_coalesce_requeued_total{keys_table}           keys changed during their flush
//
// A failed fold counts in claimlock_errors_total with op coalesce.fold (a
// key lost to a reaper is claim's lost row, not an error); the flushers'
// claims, acks and fails are claim's events of the keys table.
//
// A table without a CreatedAt column has no
// claimlock_oldest_pending_age_seconds series: the age cannot be known
// there, and a 0 would read as an empty, healthy queue. Prometheus's
// instrumentation guide offers NaN for a value that 0 would misrepresent,
// but that suits a value unknown for the moment; this one is never known,
// and leaving out what a system cannot provide is what exporters do. An
// alert on the age (which is 0 when nothing is pending) therefore needs the
// column; absent() tells a table without it.
//
// # Series before their first event
//
// Every event series of a table exists from the moment the table is known,
// at zero: rate() and increase() then see the first claim or the first
// error, and an alert on a series' absence means that nothing reports, not
// that nothing happened yet. Watch and WatchTable create the series of
// their claim table; [Metrics.InitClaims] does it for a claim table a
// process observes without watching its Stats, and [Metrics.InitLeases]
// for a lease table, which Metrics cannot otherwise know before its first
// event.
//
// Stats counts rows (see [claim.Claimer.Stats]): scoped, it reads the
// scope's rows through an index; for a whole table it reads the table. Watch
// the scopes an operator needs, and mind the scrape interval on large
// tables. Scope values are never labels of the event counters (a task id per
// task would make a time series per task).
package claimprom

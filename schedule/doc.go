// Package schedule runs named jobs on schedules, each fire time at most
// once across every process that runs them, on MySQL/MariaDB, PostgreSQL
// or SQLite, through a [dialect.Dialect].
//
// A cron job deployed on several replicas must run once per fire time, not
// once per replica; a lock held during the run is not enough, because
// replicas whose ticks are offset (or whose clocks disagree) take it one
// after another. This package keys each run by (job, fire time), decides
// the fire time on the database clock, and covers the run with a lease
// (package tasklock) that carries a loss signal and a fencing token.
//
//	s, err := schedule.New(d, schedule.Config{TTL: time.Minute})
//	...
//	err = s.Add(schedule.Job{
//		Name:     "nightly-report",
//		Schedule: cronSchedule, // anything with Next(time.Time) time.Time, e.g. robfig/cron's
//		Func: func(ctx context.Context, r *schedule.Run) error {
//			return sendReport(ctx, r.FireTime(), r.Fence())
//		},
//	})
//	...
//	err = s.Run(ctx) // every process of the fleet runs the same
//
// # Once per fire time
//
// Each job has a row in the jobs table with a cursor: the latest fire time
// handled. A tick reads the cursor and the database's now, and computes
// from the schedule which fire time is due: the latest one at or before
// the database's now, if no process has handled it and its grace
// ([Config.Grace]) has not passed. It takes the job's lease, then claims
// the fire time in one transaction: the cursor moves from the value read
// to the fire time only if it still holds that value and the database's
// now is inside the fire time's window, and the run is inserted into the
// runs table, whose primary key (job, fire time) is the second line. Of
// all the processes that tick for a fire time, exactly one claims it.
//
// Nothing is compared with a host's clock. A tick that comes early (a host
// whose clock runs ahead) waits until the fire time on the database clock,
// up to [Config.MaxSkew]; one that comes late finds the fire time claimed
// already, or claims it if no one did. So skewed clocks and offset ticks
// neither run a fire time twice nor lose one.
//
// # Every fire time accounted for
//
// A fire time that no process started within its grace (all were down,
// the previous run held the lease, the database was unreachable) is
// missed: [SkipMissed] records it as skipped, [CatchUp] runs the job once,
// late. Either way it is in the runs table, so a job's history has a row
// for each fire time since the job was first seen: a run (running,
// succeeded, failed, lost) or a range of skipped fire times. Runs of a
// paused job ([Scheduler.Pause]) are recorded as skipped too.
//
// # The lease
//
// The run holds the job's lease, kept alive in the background: its
// context ([Run.Context]) is cancelled if the lease is lost or passes its
// local deadline, and [Run.Fence] is a fencing token that strictly
// increases from run to run. [Config.TTL] bounds how long a run whose
// process died keeps the job (ShedLock's lockAtMostFor); [Config.MinHold]
// keeps it at least that long after each start (lockAtLeastFor). A run
// whose process was killed stays "running" until the next claim of the
// job finds its lease expired and records it as lost.
//
// # Other schedulers
//
// [Scheduler.Run] sleeps until each fire time on the database clock. A
// program that already has a scheduler (gocron, robfig/cron) calls
// [Scheduler.Claim] or [Scheduler.Tick] from its jobs instead; the
// modules contrib/gocron and contrib/robfigcron do that, as a gocron
// Locker and a robfig/cron JobWrapper.
//
// # Tables
//
// [CreateTables] makes the two tables; [CreateTablesDDL] prints them.
// Every process of a job must use the same tables, TTL, grace and missed
// policy for it, and the same [Job.Location].
package schedule

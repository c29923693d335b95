// Package claimgocron runs gocron v2 jobs once per fire time across every
// process that schedules them, through claimlock's package schedule, and
// elects a gocron leader through package leader.
//
// # Locker: once per fire time
//
// gocron's distributed Locker is asked for a lock named after the job at
// each tick, and holds it while the job runs. A lock alone does not stop a
// fire time from running twice: replicas whose ticks are offset (or whose
// clocks disagree) take it one after the other. A [Locker] instead claims
// the fire time the tick stands for, decided on the database clock (see
// schedule.Scheduler.Claim): only the process that claims it gets the
// lock, the job's lease covers the run, and the run is recorded in the
// job's history when gocron unlocks.
//
//	s, err := schedule.New(d, schedule.Config{TTL: time.Minute})
//	...
//	locker := claimgocron.NewLocker(s)
//	sched, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
//	...
//	def, opts, err := locker.CronJob("report", "0 30 2 * * *", true, time.Local)
//	...
//	_, err = sched.NewJob(def, gocron.NewTask(sendReport), opts...)
//
// Each job the Locker locks must be known to the scheduler, with the same
// schedule gocron runs it on: [Locker.CronJob] and [Locker.DurationJob]
// register it and return gocron's definition; [Locker.Add] registers any
// schedule. gocron keys locks by job name, so every job needs a name
// (gocron.WithName), the same on every replica. The Locker also serves
// one job alone (gocron.WithDistributedJobLocker).
//
// gocron does not tell a Locker how the job ended, so runs are recorded
// as succeeded unless their lease was lost. A job that wants the run's
// context and fence, and its error recorded, runs through [Task] instead
// of a Locker.
//
// # Elector: one leader
//
// A leader.Elector is a gocron Elector as it is: pass it to
// gocron.WithDistributedElector and run its Campaign; only the leader
// runs jobs. A handover between two ticks can run a fire time on both
// leaders or on neither; use the Locker for once per fire time.
//
// This module is separate from claimlock's, so that gocron is a
// dependency of the programs that use it only.
package claimgocron

// Package claimcron runs robfig/cron v3 jobs once per fire time across
// every process that schedules them, through claimlock's package
// schedule: a [cron.JobWrapper] claims each tick's fire time on the
// database clock, and only the process that claims it runs the job, under
// the job's lease.
//
//	s, err := schedule.New(d, schedule.Config{TTL: time.Minute})
//	...
//	c := cron.New(cron.WithSeconds())
//	_, err = claimcron.Add(c, s, "report", "0 30 2 * * *", claimcron.Func(func(ctx context.Context, r *schedule.Run) error {
//		return sendReport(ctx, r.FireTime(), r.Fence())
//	}))
//	...
//	c.Start()
//
// Every replica runs the same program. Their crons tick on their own
// clocks; the tick that stands for a fire time (see schedule.Scheduler.Claim)
// is decided on the database clock, so skewed clocks and offset ticks never
// run a fire time twice nor lose one: fire times no process started within
// their grace are recorded as skipped (or caught up), and the job's
// history (schedule.Scheduler.History) has a row for each.
//
// A job that implements [RunJob] (a [Func] does) gets the run: its
// context is cancelled when the run's lease is lost, its error is
// recorded, and [schedule.Run.Fence] fences its writes. A plain cron.Job
// runs as it is and is recorded as succeeded unless it panics.
//
// This module is separate from claimlock's, so that robfig/cron is a
// dependency of the programs that use it only.
package claimcron

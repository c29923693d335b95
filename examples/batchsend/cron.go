package main

import (
	"context"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/schedule"
)

// The scheduled job: its name in the scheduler's tables, and the TTL of
// the job's lease (how soon another process runs the job after the one
// running it died; the lease is renewed while a run goes on).
const (
	cronJob = "batchsend"
	cronTTL = 4 * time.Second
)

// newScheduler returns a scheduler on the default tables (which setup
// creates), naming this process worker in the job's history.
func (a *app) newScheduler(worker string) (*schedule.Scheduler, error) {
	return schedule.New(a.db.Dialect, schedule.Config{TTL: cronTTL, Worker: worker, Logger: a.log})
}

// cron is a cron process driven by package schedule (-schedule D): the
// job "batchsend" fires at every multiple of D, and each fire time runs
// once across every process that runs this, whoever ticks first, on the
// database clock. A run works on every open task (xxx_task.status 0) in
// turns of the story's algorithm ([app.pass]) for at most four fifths of
// the period, as the story's job sent for 50 s of each minute, so a run
// ends before the next fire time. A run killed mid-way keeps the job until
// its lease expires (cronTTL); its claimed rows go back to pending after
// -reap-after. It runs until ctx ends.
func (a *app) cron(ctx context.Context, name string) error {
	s, err := a.newScheduler(name)
	if err != nil {
		return err
	}
	err = s.Add(schedule.Job{
		Name:     cronJob,
		Schedule: schedule.Every(a.o.schedule),
		Func: func(ctx context.Context, _ *schedule.Run) error {
			// ctx ends if the run loses the job's lease: the run stops,
			// and the row claims keep its rows from being sent twice by
			// the run after it.
			return a.cronRun(ctx, name)
		},
	})
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// cronRun is one run of the scheduled job.
func (a *app) cronRun(ctx context.Context, name string) error {
	end := time.Now().Add(a.o.schedule * 4 / 5)
	for polls := 0; ctx.Err() == nil && time.Now().Before(end); polls++ {
		ids, err := a.openTasks(ctx)
		if err != nil || len(ids) == 0 {
			return err
		}
		progress := false
		for _, id := range ids {
			tp, err := a.task(id.(int64))
			if err != nil {
				return err
			}
			_, found, done, err := a.pass(ctx, tp, name)
			if err != nil {
				return err
			}
			progress = progress || found || done
		}
		if progress {
			polls = -1
			continue
		}
		// Every open task's lease was held (a manual send or a worker
		// sends it) or its rows are still being sent elsewhere.
		sleep(ctx, min(backoff(polls, 20*time.Millisecond, 500*time.Millisecond), time.Until(end)))
	}
	return nil
}

// openTasks returns the ids of the tasks not done yet, in id order.
func (a *app) openTasks(ctx context.Context) ([]any, error) {
	db := a.db
	return queryIDs(ctx, db.SQL, fmt.Sprintf("SELECT %[1]s FROM %[2]s WHERE %[3]s <> %[4]d ORDER BY %[1]s",
		db.Q("id"), db.Q(taskTable), db.Q("status"), taskDone))
}

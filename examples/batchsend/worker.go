package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

func (a *app) worker(ctx context.Context, name string) error {
	if a.o.schedule > 0 {
		return a.cron(ctx, name)
	}
	tp, err := a.task(a.o.task)
	if err != nil {
		return err
	}
	if a.o.mode == "naive" {
		return a.naiveWorker(ctx, tp, name)
	}
	return a.claimWorker(ctx, tp, name)
}

// claimWorker is one cron process in claim mode that works on one task
// until it is done: a turn ([app.pass]) whenever the task lease is free,
// with a growing pause after turns that found nothing to send. It ends
// once the task is closed (xxx_task.status = 2), by one of its turns or
// another worker's.
func (a *app) claimWorker(ctx context.Context, tp *taskParts, name string) error {
	for polls := 0; ctx.Err() == nil; polls++ {
		took, found, done, err := a.pass(ctx, tp, name)
		switch {
		case err != nil || done:
			return err
		case found:
			polls = -1
			continue
		}
		// The lease was held, or the turn found nothing pending while
		// rows are still being sent (or were left by a dead worker). A
		// task with nothing left may still be open: the turn that held
		// the lease looked before the last rows were acked, and this
		// worker's next turn closes it.
		if closed, err := a.taskClosed(ctx, tp); err != nil || closed {
			return err
		}
		if took {
			sleep(ctx, backoff(polls, 20*time.Millisecond, 500*time.Millisecond))
		} else {
			sleep(ctx, backoff(polls, 5*time.Millisecond, 200*time.Millisecond))
		}
	}
	return nil
}

// sendNow is -role send: a manual run of one task (-task-id), now, next to
// any cron processes. It takes no task lease: an operator's "send task 7
// now" must not wait for a cron run, and needs no lease to be safe, since
// every row is claimed under a token before it is sent. A cron run on the
// same task at the same time claims other rows; neither sends a row the
// other holds. It returns once the task has nothing pending and nothing
// processing (rows of a dead worker are taken back by its sweeps after
// -reap-after), and marks the task done if its lease is free then.
func (a *app) sendNow(ctx context.Context, name string) error {
	tp, err := a.task(a.o.task)
	if err != nil {
		return err
	}
	for polls := 0; ctx.Err() == nil; polls++ {
		found, _, err := a.claimRun(ctx, tp, nil, name)
		if err != nil {
			return err
		}
		if found {
			polls = -1
			continue
		}
		if _, err := tp.reaper.Sweep(ctx); err != nil {
			return err
		}
		finished, err := a.finished(ctx, tp)
		if err != nil {
			return err
		}
		if finished {
			// Close the task as a cron turn would, if no cron run holds
			// it now; otherwise that run closes it.
			lease, err := a.locker.Acquire(ctx, tp.id)
			if errors.Is(err, dialect.ErrLeaseHeld) {
				return nil
			}
			if err != nil {
				return err
			}
			_, err = lease.Finish(ctx, taskDone)
			return err
		}
		sleep(ctx, backoff(polls, 20*time.Millisecond, 500*time.Millisecond))
	}
	return ctx.Err()
}

// taskClosed reports whether the task's status is done.
func (a *app) taskClosed(ctx context.Context, tp *taskParts) (bool, error) {
	db := a.db
	var status int64
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", db.Q("status"), db.Q(taskTable), db.Q("id"), db.Ph(1))
	if err := db.SQL.QueryRowContext(ctx, q, tp.id).Scan(&status); err != nil {
		return false, err
	}
	return status == taskDone, nil
}

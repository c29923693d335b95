package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/hold"
	"github.com/claimlock/claimlock/tasklock"
)

// send is the side effect: a short sleep (the remote call) and a row in the
// sends log, so duplicates can be counted afterwards. A call interrupted by
// ctx did not happen; one that happened is logged even if ctx ends
// meanwhile (a process stopping), so that the log tells what was sent.
func (a *app) send(ctx context.Context, tp *taskParts, worker string, id any) error {
	if a.o.sendDelay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.o.sendDelay):
		}
	}
	db := a.db
	_, err := db.SQL.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s, %s, %s)",
		db.Q(sendsTable), db.Q("task_id"), db.Q("target_id"), db.Q("worker"), db.Ph(1), db.Ph(2), db.Ph(3)), tp.id, id, worker)
	return err
}

// sendTx is a send with -ack tx: the remote call (a short sleep, logged in
// the calls table at once, as a remote service's own log would be), then
// the sends log row and the row's ack in one transaction. It reports
// whether the row was acked; a lost claim rolls the log row back (the
// row's new owner sends it).
func (a *app) sendTx(ctx context.Context, tp *taskParts, b *claim.Batch[target], worker string, id any) (bool, error) {
	db := a.db
	if a.o.sendDelay > 0 {
		sleep(ctx, a.o.sendDelay)
	}
	if _, err := db.SQL.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s, %s, %s)",
		db.Q(callsTable), db.Q("task_id"), db.Q("target_id"), db.Q("worker"), db.Ph(1), db.Ph(2), db.Ph(3)), tp.id, id, worker); err != nil {
		return false, err
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s, %s, %s)",
		db.Q(sendsTable), db.Q("task_id"), db.Q("target_id"), db.Q("worker"), db.Ph(1), db.Ph(2), db.Ph(3)), tp.id, id, worker); err != nil {
		return false, err
	}
	if err := b.AckTx(ctx, dialect.SQLTx(tx), id); err != nil {
		if errors.Is(err, dialect.ErrClaimLost) {
			return false, nil
		}
		return false, err
	}
	return true, tx.Commit()
}

// finished reports whether the task has nothing pending and nothing
// processing.
func (a *app) finished(ctx context.Context, tp *taskParts) (bool, error) {
	st, err := tp.claimer.Stats(ctx)
	if err != nil {
		return false, err
	}
	return st.Pending == 0 && st.Processing == 0, nil
}

// pass is one turn of the story's cron on a task in claim mode: take the
// task lease, claim and send batches until the budget runs out, release
// the lease early (as the story did) and go on sending the claimed batch.
// Overlapping turns are harmless because every row is claimed under a
// token first. A turn that finds nothing pending returns the task's stale
// claims (a crashed run's rows) and, once the task has nothing pending and
// nothing processing, marks it done (xxx_task.status = 2) as it frees the
// lease. It reports whether the lease was free, whether a claim found rows,
// and whether the task is done.
func (a *app) pass(ctx context.Context, tp *taskParts, name string) (took, found, done bool, err error) {
	lease, err := a.locker.Acquire(ctx, tp.id)
	if errors.Is(err, dialect.ErrLeaseHeld) {
		return false, false, false, nil
	}
	if err != nil {
		return false, false, false, err
	}
	found, released, err := a.claimRun(ctx, tp, lease, name)
	if err == nil && !found {
		// Nothing pending: like the story's cron, return this task's
		// stale claims, then close the task if everything is sent.
		if _, err = tp.reaper.Sweep(ctx); err == nil {
			var finished bool
			if finished, err = a.finished(ctx, tp); err == nil && finished {
				// Finish ends the lease whatever it reports: false when
				// the lease had expired meanwhile (the next turn closes
				// the task then).
				released = true
				done, err = lease.Finish(ctx, taskDone)
			}
		}
	}
	if !released {
		if _, rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}
	return true, found, done, err
}

// claimRun claims and sends batches of the task. Under a task lease it
// releases the lease once the budget has run out and returns after the
// batch it is sending; without one (a manual send) it goes on until a
// claim finds nothing. It returns whether a claim found rows and whether
// it released the lease.
func (a *app) claimRun(ctx context.Context, tp *taskParts, lease *tasklock.Lease, name string) (found, released bool, err error) {
	start := time.Now()
	for {
		b, err := tp.claimer.Claim(ctx)
		if err != nil {
			return found, released, err
		}
		if b.Len() == 0 {
			return found, released, nil
		}
		found = true
		stop := b.KeepAlive(ctx)
		// sent are the rows this batch sent (-ack batch); the others (a
		// row whose claim ended before its call) go back to pending.
		var sent []any
		// giveUp ends the batch on an error or a stop (ctx ended): the
		// rows sent are acked, so that a stopping process leaves nothing
		// it sent to be sent again, and the others are released.
		giveUp := func() {
			stop()
			_ = a.settle(context.WithoutCancel(ctx), b, sent)
		}
		for _, r := range b.Rows() {
			if lease != nil && !released && time.Since(start) > a.o.budget {
				// The story's early release: the next cron run may start
				// now, while this batch is still being sent.
				released = true
				if _, err := lease.Release(ctx); err != nil {
					giveUp()
					return found, released, err
				}
			}
			if a.o.ack == "tx" {
				if _, err := a.sendTx(ctx, tp, b, name, r.ID); err != nil {
					giveUp()
					return found, released, err
				}
				continue
			}
			// The last check before the side effect, from the clock: a row
			// lost (reaped, taken by another worker) or past the batch's
			// local deadline is not sent, and not acked.
			rctx, rcancel := b.RowContext(ctx, r.ID)
			if hold.Check(rctx) != nil {
				rcancel()
				continue
			}
			err := a.send(rctx, tp, name, r.ID)
			rowEnded := err != nil && rctx.Err() != nil && ctx.Err() == nil
			rcancel()
			switch {
			case rowEnded:
				// The row's claim ended during the call, which was
				// abandoned: not sent.
				continue
			case err != nil:
				giveUp()
				return found, released, err
			}
			sent = append(sent, r.ID)
		}
		// -ack tx acked each row with its send (sent is empty); release
		// what was not sent or a rolled-back transaction left held.
		err = a.settle(ctx, b, sent)
		stop()
		if err != nil && !errors.Is(err, dialect.ErrClaimLost) {
			return found, released, err
		}
		if released {
			return found, released, nil
		}
	}
}

// settle ends a batch: it acks the rows sent (done) in one statement and
// releases the batch's other rows back to pending. Rows found lost (reaped
// or taken meanwhile) are reported by an error matching
// dialect.ErrClaimLost; their new holder sends them.
func (a *app) settle(ctx context.Context, b *claim.Batch[target], sent []any) error {
	var err error
	if len(sent) > 0 {
		err = b.Ack(ctx, sent...)
	}
	if _, rerr := b.Release(ctx); rerr != nil && (err == nil || errors.Is(err, dialect.ErrClaimLost)) {
		err = rerr
	}
	return err
}

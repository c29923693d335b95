package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// naiveWorker is the old algorithm from the story, kept to show the bug:
// take the task lock, SELECT a batch of pending rows, send them, and release
// the lock early once the time budget runs out so that the next cron run
// can start, while this one is still sending the rows it selected. The next
// run's SELECT sees the same rows still pending and sends them again.
func (a *app) naiveWorker(ctx context.Context, tp *taskParts, name string) error {
	db := a.db
	sel := fmt.Sprintf("SELECT %[1]s FROM %[2]s WHERE %[3]s = %[4]s AND %[5]s = %[6]d ORDER BY %[1]s LIMIT %[7]d",
		db.Q("id"), db.Q(targetTable), db.Q("task_id"), db.Ph(1), db.Q("status"), statusPending, a.o.batch)
	for polls := 0; ctx.Err() == nil; polls++ {
		lease, err := a.locker.Acquire(ctx, tp.id)
		if errors.Is(err, dialect.ErrLeaseHeld) {
			if done, err := a.finished(ctx, tp); err != nil || done {
				return err
			}
			sleep(ctx, backoff(polls, 2*time.Millisecond, 50*time.Millisecond))
			continue
		}
		if err != nil {
			return err
		}
		polls = -1
		ids, err := queryIDs(ctx, db.SQL, sel, tp.id)
		if err != nil || len(ids) == 0 {
			_, _ = lease.Release(context.WithoutCancel(ctx))
			return err
		}
		start := time.Now()
		released := false
		for _, id := range ids {
			if !released && time.Since(start) > a.o.budget {
				if _, err := lease.Release(ctx); err != nil {
					return err
				}
				released = true
			}
			if err := a.send(ctx, tp, name, id); err != nil {
				return err
			}
		}
		upd := fmt.Sprintf("UPDATE %s SET %s = %d WHERE %s IN %s", db.Q(targetTable), db.Q("status"), statusSent, db.Q("id"), db.In(len(ids), 1))
		if _, err := db.SQL.ExecContext(ctx, upd, ids...); err != nil {
			return err
		}
		if !released {
			if _, err := lease.Release(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func queryIDs(ctx context.Context, db *sql.DB, q string, args ...any) ([]any, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

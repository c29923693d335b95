package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// flusher claims dirty users and folds each one's unapplied events into one
// state write, until writersDone is closed and no user is dirty any more.
//
// The claim makes the flusher the single writer of those users' state rows;
// the ack carries the version each row had at claim time, so a user who got
// new events during the flush is requeued (Batch.Requeued lists them, an
// Observer's Event.Requeued counts them) and flushed again.
func (a *app) flusher(ctx context.Context, writersDone <-chan struct{}) error {
	for idle := 0; ; {
		b, err := a.claimer.Claim(ctx)
		if err != nil {
			return err
		}
		if b.Len() == 0 {
			select {
			case <-writersDone:
				// No writer can dirty a user any more: stop once nothing is
				// pending or held by another flusher (whose ack may still
				// requeue a user).
				st, err := a.claimer.Stats(ctx)
				if err != nil {
					return err
				}
				if st.Pending == 0 && st.Processing == 0 {
					return nil
				}
			default:
			}
			sleep(ctx, backoff(idle, time.Millisecond, 50*time.Millisecond))
			idle++
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		idle = 0
		// Record the version each claimed row starts from, committed before
		// any event is marked: writers skip their dirty mark when a bump
		// since then already guarantees a requeue (see markDirty).
		if err := a.withRetry(ctx, func() error {
			_, err := a.db.SQL.ExecContext(ctx, a.sq.startFlush, b.Token())
			return err
		}); err != nil {
			_, _ = b.Release(context.WithoutCancel(ctx))
			return err
		}
		users := make([]any, 0, b.Len())
		for _, r := range b.Rows() {
			users = append(users, r.ID)
		}
		if err := a.fold(ctx, users); err != nil {
			// Give the users back; their events stay unapplied and the next
			// flush of each folds them.
			_, _ = b.Release(context.WithoutCancel(ctx))
			return fmt.Errorf("flush users %v: %w", users, err)
		}
		sleep(ctx, a.o.foldDelay)
		if err := b.AckAll(ctx); err != nil && !errors.Is(err, dialect.ErrClaimLost) {
			// A lost claim is harmless here: the fold committed on its own,
			// so whoever holds the user now folds whatever is left.
			_, _ = b.Release(context.WithoutCancel(ctx))
			return err
		}
		if b.Len() < a.o.batch {
			// A short batch: let events accumulate. After a full one more
			// users are dirty already, and waiting only ages them.
			sleep(ctx, a.o.linger)
		}
	}
}

// fold applies every unapplied event of the claimed users to their state
// rows in one transaction: mark them with a fresh flush token (one
// statement, so the set is exactly the rows committed before it; events
// arriving meanwhile stay unmarked for the next flush), sum the marked rows
// per user, and add each sum to its user's state row. The marks and the
// state writes commit together, so each event is folded exactly once even
// if a flush is repeated or two flushes of one user ever overlapped.
//
// One transaction for the whole batch, not one per user: with many users
// of a few events each (uniform traffic) a flush folds about one event per
// user, and a commit per user made the flushers, not the database, the
// bottleneck.
func (a *app) fold(ctx context.Context, users []any) error {
	var empty int64
	var ids []int64 // the events folded
	err := a.inTx(ctx, func(tx *sql.Tx) error {
		empty, ids = 0, ids[:0]
		token := newToken()
		res, err := tx.ExecContext(ctx, a.markEvents(len(users)), append([]any{token}, users...)...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			// Requeued for events a previous flush had already folded.
			empty = int64(len(users))
			return nil
		}
		type sum struct{ user, delta, maxSeq int64 }
		var sums, each []sum // per user; per event (mode queued)
		rows, err := tx.QueryContext(ctx, a.sq.foldEvents, token)
		if err != nil {
			return err
		}
		var total int64
		ids = ids[:0]
		for rows.Next() {
			var user, id, delta, seq int64
			if err := rows.Scan(&user, &id, &delta, &seq); err != nil {
				rows.Close()
				return err
			}
			if len(sums) == 0 || sums[len(sums)-1].user != user {
				sums = append(sums, sum{user: user})
			}
			s := &sums[len(sums)-1]
			s.delta += delta
			s.maxSeq = max(s.maxSeq, seq)
			ids = append(ids, id)
			each = append(each, sum{user, delta, seq})
			total++
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if total != n {
			return fmt.Errorf("marked %d events of users %v but read back %d", n, users, total)
		}
		empty = int64(len(users) - len(sums))
		if a.o.mode == "queued" {
			// No coalescing: one state write per event, as a queue of
			// events whose consumer applies each would do.
			sums = each
		}
		for _, s := range sums {
			if _, err := tx.ExecContext(ctx, a.sq.writeState, s.delta, s.maxSeq, s.user); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		a.emptyFlushes.Add(empty)
		a.markPersisted(ids)
	}
	return err
}

// markEvents marks the unapplied events of n users ($2...) with a flush
// token ($1).
func (a *app) markEvents(n int) string {
	q := a.db.Q
	return fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s IN %s AND %s IS NULL",
		q(eventsTable), q("flush"), a.db.Ph(1), q("user_id"), a.db.In(n, 2), q("flush"))
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
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
			sleep(ctx, store.Backoff(idle, time.Millisecond, 50*time.Millisecond))
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
		for _, r := range b.Rows() {
			if err := a.fold(ctx, r.ID.(int64)); err != nil {
				// Give the unflushed users back; their events stay unapplied
				// and the next flush of each folds them.
				_, _ = b.Release(context.WithoutCancel(ctx))
				return fmt.Errorf("flush user %v: %w", r.ID, err)
			}
			sleep(ctx, a.o.foldDelay)
			if err := b.Ack(ctx, r.ID); err != nil && !errors.Is(err, dialect.ErrClaimLost) {
				// A lost claim is harmless here: the fold is its own
				// transaction, so whoever holds the user now folds
				// whatever is left.
				_, _ = b.Release(context.WithoutCancel(ctx))
				return err
			}
		}
		sleep(ctx, a.o.linger)
	}
}

// fold applies every unapplied event of user to its state row in one
// transaction: mark them with a fresh flush token (one statement, so the
// set is exactly the rows committed before it; events arriving meanwhile
// stay unmarked for the next flush), sum the marked rows, and add the sum to
// the state row. The marks and the state write commit together, so each
// event is folded exactly once even if a flush is repeated or two flushes of
// one user ever overlapped.
func (a *app) fold(ctx context.Context, user int64) error {
	return a.inTx(ctx, func(tx *sql.Tx) error {
		token := store.NewToken()
		res, err := tx.ExecContext(ctx, a.sq.markEvents, token, user)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			// Requeued for events a previous flush had already folded.
			a.emptyFlushes.Add(1)
			return nil
		}
		var count, sum, maxSeq int64
		if err := tx.QueryRowContext(ctx, a.sq.foldEvents, token).Scan(&count, &sum, &maxSeq); err != nil {
			return err
		}
		if count != n {
			return fmt.Errorf("marked %d events of user %d but read back %d", n, user, count)
		}
		_, err = tx.ExecContext(ctx, a.sq.writeState, sum, maxSeq, user)
		return err
	})
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

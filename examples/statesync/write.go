package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// hotUser receives the -hot fraction of the events.
const hotUser = 1

// event is one state change reported by a client. Seq numbers a user's
// events in the order the client produced them; they are not committed in
// that order.
type event struct {
	ID, User, Seq, Delta int64
	// Resend makes the writer send the event a second time, as a client
	// does when it retries after a timeout.
	Resend bool
}

// generate returns the workload, deterministic for a seed.
func generate(o options) []event {
	r := rand.New(rand.NewPCG(o.seed, 0x5eed))
	seq := make([]int64, o.users+1)
	evs := make([]event, o.events)
	for i := range evs {
		u := int64(hotUser)
		if o.users > 1 && r.Float64() >= o.hot {
			u = 2 + r.Int64N(int64(o.users-1))
		}
		seq[u]++
		evs[i] = event{ID: int64(i + 1), User: u, Seq: seq[u], Delta: r.Int64N(201) - 100, Resend: r.Float64() < o.dup}
	}
	return evs
}

// Retry bounds for the program's own transactions.
const (
	maxAttempts = 10
	retryBase   = 2 * time.Millisecond
	retryMax    = 250 * time.Millisecond
)

// retryable reports a deadlock, lock-wait timeout, serialization failure or
// busy database: the whole transaction may run again.
func retryable(err error) bool {
	return dialect.IsRetryable(err)
}

// withRetry runs fn up to maxAttempts times while it fails with a retryable
// error, sleeping a capped, jittered, doubling backoff in between.
func (a *app) withRetry(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || !retryable(err) || attempt+1 >= maxAttempts {
			return err
		}
		a.retries.Add(1)
		t := time.NewTimer(backoff(attempt, retryBase, retryMax))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// inTx runs fn in a transaction, committing when it returns nil, and retries
// the whole transaction on retryable errors.
func (a *app) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return a.withRetry(ctx, func() error {
		tx, err := a.db.SQL.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
}

// writeNaive is the naive write: record the event and add its delta to the
// user's state row in one transaction. Correct and idempotent (a duplicate
// event id skips the update), but every transaction of the hot user queues
// for the same row lock and the state row is written once per event.
func (a *app) writeNaive(ctx context.Context, e event) (accepted bool, err error) {
	err = a.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, a.sq.insertEvent, e.ID, e.User, e.Seq, e.Delta, directFlush)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		accepted = n == 1
		if !accepted {
			return nil
		}
		_, err = tx.ExecContext(ctx, a.sq.addToState, e.Delta, e.Seq, e.User)
		return err
	})
	return accepted, err
}

// writeCoalesce accepts an event: insert it into the intake (ignoring a
// duplicate id), then make sure a flush will fold it.
func (a *app) writeCoalesce(ctx context.Context, e event) (accepted bool, err error) {
	err = a.withRetry(ctx, func() error {
		res, err := a.db.SQL.ExecContext(ctx, a.sq.insertEvent, e.ID, e.User, e.Seq, e.Delta, nil)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		accepted = n == 1
		return err
	})
	if err != nil {
		return false, err
	}
	// A duplicate marks the user dirty too: the first attempt may have died
	// between its insert and this step. Marking is idempotent.
	return accepted, a.withRetry(ctx, func() error { return a.markDirty(ctx, e.User) })
}

// markDirty makes sure that a flush starting after this call returns folds
// every event of user committed before the call began.
//
// The naive way is one UPDATE per event (status = PENDING, version =
// version + 1): that only moves the hot row from the state table to the
// dirty table, and the hot user's writers queue on its lock again. Instead
// it reads the row without locking and writes only when needed, with a
// compare-and-set on the (status, version) it read:
//
//   - PENDING: nothing to write. The row is claimed later and the claim
//     commits before the flush marks events, so the flush sees ours (it
//     committed before this read).
//   - CLEAN: set PENDING and bump the version.
//   - PROCESSING, version > flush_version: nothing to write. The flusher set
//     flush_version to the row's version and committed that before marking
//     any event. If we read after that commit, a writer bumped the version
//     since the claim, so the flusher's version-conditioned ack will put the
//     row back to pending, and that ack comes after our read. If we read
//     before it (a flush_version left by an earlier flush), the flusher
//     marks events after our read, so it folds ours.
//   - PROCESSING otherwise: bump the version only, not the status (the row
//     stays with its one flusher), so that the ack requeues the row.
//
// If the compare-and-set matches no row, the row changed after our read.
// If its version moved, another writer bumped it after our event committed,
// which forces a later flush just the same: done. Otherwise a claim or an
// ack moved the status: decide again.
//
// So the hot user's dirty row is written about twice per flush (its first
// event after a clean ack, its first event after the flush started), not
// once per event.
func (a *app) markDirty(ctx context.Context, user int64) error {
	var (
		st           string
		ver, flushed int64
	)
	read := func() error {
		if err := a.db.SQL.QueryRowContext(ctx, a.sq.readDirty, user).Scan(&st, &ver, &flushed); err != nil {
			return fmt.Errorf("read dirty row of user %d: %w", user, err)
		}
		return nil
	}
	if err := read(); err != nil {
		return err
	}
	for range 1000 {
		var res sql.Result
		var err error
		switch {
		case st == statusPending:
			return nil
		case st == statusClean:
			res, err = a.db.SQL.ExecContext(ctx, a.sq.bumpClean, statusPending, user, statusClean, ver)
		case st == statusProcessing && ver > flushed:
			return nil
		case st == statusProcessing:
			res, err = a.db.SQL.ExecContext(ctx, a.sq.bumpProcessing, user, statusProcessing, ver)
		default:
			return fmt.Errorf("user %d: unexpected dirty status %q", user, st)
		}
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 {
			a.dirtyWrites.Add(1)
			return nil
		}
		a.dirtyConflicts.Add(1)
		old := ver
		if err := read(); err != nil {
			return err
		}
		if ver != old {
			return nil
		}
	}
	return errors.New("markDirty: the dirty row kept changing")
}

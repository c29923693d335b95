package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/claimlock/claimlock/coalesce"
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

// writeNaive is the naive write: record the event and add its delta to the
// user's state row in one transaction. Correct and idempotent (a duplicate
// event id skips the update), but every transaction of the hot user queues
// for the same row lock and the state row is written once per event.
// Deadlocks and busy errors run the transaction again (bounded).
func (a *app) writeNaive(ctx context.Context, e event) (accepted bool, err error) {
	attempts := 0
	err = dialect.Retry(ctx, dialect.RetryPolicy{}, "statesync naive write", func() error {
		if attempts++; attempts > 1 {
			a.retries.Add(1)
		}
		tx, err := a.db.SQL.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		res, err := tx.ExecContext(ctx, a.sq.insertEvent, eventID(e.ID), userKey(e.User), e.Seq, e.Delta)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		accepted = n == 1
		if accepted {
			if _, err := tx.ExecContext(ctx, a.sq.addToState, e.Delta, userKey(e.User)); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	return accepted, err
}

// writeCoalesce accepts an event: the coalescer records it (a resend
// returns the first receipt) and marks its user dirty for the flushers.
// The events of one user are sent by several writers at once, so out of
// sequence order: they carry no Source, and their Seq is not checked.
func (a *app) writeCoalesce(ctx context.Context, e event) (accepted bool, err error) {
	r, err := a.co.Accept(ctx, coalesce.Change{
		Key: userKey(e.User), EventID: eventID(e.ID), Seq: e.Seq,
		Payload: strconv.AppendInt(nil, e.Delta, 10),
	})
	return err == nil && !r.Duplicate, err
}

// writeBatch accepts events in one batch (-accept-batch): the coalescer
// records them in one transaction, each with Accept's outcome, and marks
// their users dirty.
func (a *app) writeBatch(ctx context.Context, evs []event) ([]bool, error) {
	chs := make([]coalesce.Change, len(evs))
	for k, e := range evs {
		chs[k] = coalesce.Change{Key: userKey(e.User), EventID: eventID(e.ID), Seq: e.Seq, Payload: strconv.AppendInt(nil, e.Delta, 10)}
	}
	res, err := a.co.AcceptBatch(ctx, chs)
	if err != nil {
		return nil, err
	}
	ok := make([]bool, len(evs))
	for k, r := range res {
		if r.Err != nil {
			return nil, fmt.Errorf("event %s: %w", chs[k].EventID, r.Err)
		}
		ok[k] = !r.Receipt.Duplicate
	}
	return ok, nil
}

// fold is the flushers' [coalesce.FoldFunc]: it sums the deltas of a key's
// changes and adds the sum to the key's state row in the fold's
// transaction, one state write for all of them (-mode queued: one state
// write per change, a queue without coalescing). The coalescer marks the
// changes folded and acks the key in the same transaction.
func (a *app) fold(ctx context.Context, tx *sql.Tx, key string, changes []coalesce.Record) error {
	deltas := make([]int64, 0, len(changes))
	ids := make([]int64, 0, len(changes))
	var sum int64
	for _, ch := range changes {
		d, err := strconv.ParseInt(string(ch.Payload), 10, 64)
		if err != nil {
			// Not retryable: the key is retried after a backoff, then
			// parked for an operator.
			return fmt.Errorf("change %s: payload %q is not a delta: %w", ch.EventID, ch.Payload, err)
		}
		deltas = append(deltas, d)
		ids = append(ids, eventNum(ch.EventID))
		sum += d
	}
	if a.o.mode != "queued" {
		deltas = []int64{sum}
	}
	for _, d := range deltas {
		res, err := tx.ExecContext(ctx, a.sq.addToState, d, key)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			// A key first seen (over HTTP): its flusher is its only writer.
			if _, err := tx.ExecContext(ctx, a.sq.insertState, key, d, 1); err != nil {
				return err
			}
		}
	}
	a.persistedMu.Lock()
	a.folding[key] = ids // reported when the fold's event says it committed
	a.persistedMu.Unlock()
	return nil
}

package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/claim"
)

// Advisory-lock claims (PostgreSQL only): a prototype to compare with held
// claims, not a library feature. A worker keeps one connection for its
// life and, per batch, the way Que locks jobs:
//
//  1. selects up to a batch of pending candidates (above a key cursor
//     shared by the workers, as Holder's) and tries a session advisory
//     lock on each (pg_try_advisory_lock(id)), in one autocommitted
//     statement that writes nothing;
//  2. re-reads the rows it won in a new statement, keeping those still
//     pending: the first statement's snapshot was taken before its locks,
//     so a row another worker acked and unlocked in between may look
//     pending there (the ack commits before its unlock, so the second
//     statement's snapshot sees it);
//  3. acks them (UPDATE to done, or DELETE), autocommitted, conditioned on
//     the pending status;
//  4. unlocks every lock of the session (pg_advisory_unlock_all()) after
//     the ack's commit.
//
// Nothing is written to claim, and no transaction stays open while the
// batch is handled; the locks live as long as the session (a crashed
// worker's connection ends and the server drops them), so it needs one
// connection per worker for the batch's life and cannot work behind a
// transaction-mode pooler. The lock key is the row's id in the single
// bigint key space, shared with every other advisory-lock user of the
// database.
const (
	measureAdvisory    = "advisory"        // session advisory locks, ack UPDATE, unlock
	measureAdvisoryDel = "advisory+delete" // the same, the ack deletes
)

// advisoryRun claims and acks every row with advisory-lock workers.
func (b *bench) advisoryRun(ctx context.Context, measure string, workers, rows int) (result, error) {
	first, err := b.fixture(ctx, rows, allTask)
	if err != nil {
		return result{}, err
	}
	r := b.base(measure, workers, rows)
	r.Strategy = "session"
	q := b.db.Q
	tbl, id, status, task := q(benchTable), q("id"), q("status"), q("task_id")
	a := advisorySQL{
		// The candidates' subquery is planned on the claim index (its
		// partial index on (task_id, (id + 0)), hence id + 0, as the
		// library's claims); the lock is tried on each candidate it
		// returns, in key order.
		claim: fmt.Sprintf(`SELECT c.id, pg_try_advisory_lock(c.id) FROM (
  SELECT %[1]s AS id FROM %[2]s WHERE %[3]s = 'PENDING' AND %[4]s = $1 AND %[1]s + 0 > $2 ORDER BY %[1]s + 0 LIMIT $3) c`, id, tbl, status, task),
		recheck: fmt.Sprintf(`SELECT %[1]s FROM %[2]s WHERE %[1]s = ANY($1) AND %[3]s = 'PENDING' ORDER BY %[1]s`, id, tbl, status),
		ack:     fmt.Sprintf(`UPDATE %[2]s SET %[3]s = 'DONE' WHERE %[1]s = ANY($1) AND %[3]s = 'PENDING'`, id, tbl, status),
	}
	if measure == measureAdvisoryDel {
		a.ack = fmt.Sprintf(`DELETE FROM %[2]s WHERE %[1]s = ANY($1) AND %[3]s = 'PENDING'`, id, tbl, status)
	}
	t := newTracker(first, rows)
	var cursor atomic.Int64
	lat := make([][]time.Duration, workers)
	errs := make(chan error, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if err := b.advisoryWorker(ctx, a, t, &cursor, &lat[w]); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return r, err
	}
	r.RowsPerS = float64(rows) / r.Seconds
	r.Overlaps = t.overlaps.Load()
	r.Missing, r.Duplicates = t.check()
	all := slices.Concat(lat...)
	r.P50ms, r.P99ms = quantile(all, 0.50), quantile(all, 0.99)
	var pending, done, other int64
	err = b.sql.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) FILTER (WHERE %[1]s = 'PENDING'), COUNT(*) FILTER (WHERE %[1]s = 'DONE'),
  COUNT(*) FILTER (WHERE %[1]s NOT IN ('PENDING', 'DONE')) FROM %[2]s`, status, tbl)).Scan(&pending, &done, &other)
	if err != nil {
		return r, err
	}
	want := int64(rows)
	if measure == measureAdvisoryDel {
		want = 0
	}
	if pending != 0 || other != 0 || done != want {
		return r, fmt.Errorf("rows in the database: %d pending, %d done, %d other; want %d done", pending, done, other, want)
	}
	return r, nil
}

// advisorySQL are the advisory-lock measure's statements.
type advisorySQL struct{ claim, recheck, ack string }

// advisoryWorker claims batches until no row is pending, on one connection
// of its own. Its latencies are those of steps 1 and 2.
func (b *bench) advisoryWorker(ctx context.Context, a advisorySQL, t *tracker, cursor *atomic.Int64, lat *[]time.Duration) error {
	conn, err := b.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		t0 := time.Now()
		from := cursor.Load()
		cands, won, err := advisoryCandidates(ctx, conn, a.claim, from, b.o.batch)
		if err != nil {
			return err
		}
		switch {
		case len(cands) == 0 && from == 0:
			return nil // nothing pending: rows locked by others get acked by them
		case len(cands) == 0:
			cursor.CompareAndSwap(from, 0) // nothing above the cursor: from the start
			continue
		case len(cands) < b.o.batch:
			cursor.CompareAndSwap(from, 0)
		default:
			last := cands[len(cands)-1]
			for cur := cursor.Load(); last > cur && !cursor.CompareAndSwap(cur, last); cur = cursor.Load() {
			}
		}
		if len(won) == 0 {
			continue // every candidate locked by another worker
		}
		ids, err := advisoryRecheck(ctx, conn, a.recheck, won)
		if err != nil {
			return err
		}
		*lat = append(*lat, time.Since(t0))
		held := make([]claim.Row[struct{}], len(ids))
		for i, id := range ids {
			held[i].ID = id
		}
		if err := t.hold(held); err != nil {
			return err
		}
		for _, id := range ids {
			t.drop(id)
		}
		if len(ids) > 0 {
			res, err := conn.ExecContext(ctx, a.ack, ids)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != int64(len(ids)) {
				return fmt.Errorf("advisory ack wrote %d of %d locked pending rows", n, len(ids))
			}
		}
		// After the ack's commit, never before: a worker that locks a row
		// must find it acked.
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
			return err
		}
	}
}

// advisoryCandidates runs step 1: the candidates' keys and those locked.
func advisoryCandidates(ctx context.Context, conn *sql.Conn, q string, from int64, limit int) (cands, won []int64, err error) {
	rows, err := conn.QueryContext(ctx, q, benchTask, from, limit)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var ok bool
		if err := rows.Scan(&id, &ok); err != nil {
			return nil, nil, err
		}
		cands = append(cands, id)
		if ok {
			won = append(won, id)
		}
	}
	return cands, won, rows.Err()
}

// advisoryRecheck runs step 2: the locked rows still pending.
func advisoryRecheck(ctx context.Context, conn *sql.Conn, q string, won []int64) ([]int64, error) {
	rows, err := conn.QueryContext(ctx, q, won)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

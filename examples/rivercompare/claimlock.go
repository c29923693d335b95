package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/observe"
)

// The claimlock measures.
const (
	measureRun       = "run"         // Claimer.Run, a nil handler error acks the row (status done)
	measureRunDelete = "run+delete"  // measureRun on a DeleteDone table: the ack deletes the row
	measureHeld      = "held"        // held-transaction claims: Holder.Hold, Held.AckAll, Held.Commit
	measureHeldDel   = "held+delete" // measureHeld on a DeleteDone table
	claimTable       = "rivercompare_jobs"
	claimInsertChunk = 1000
)

// allMeasures are the claimlock measures in the order they run.
var allMeasures = []string{measureRun, measureRunDelete, measureHeld, measureHeldDel}

// job is what a claim reads of a row: its arguments, JSON as River's.
type job struct{ Args []byte }

func jobFields(j *job) []any { return []any{&j.Args} }

// claimConfig is the claimer configuration of the claimlock table.
func (c *compare) claimConfig(measure string) claim.Config {
	return claim.Config{
		ClaimTable: dialect.ClaimTable{Table: claimTable, Attempts: "attempts", Columns: []string{"args"},
			DeleteDone: measure == measureRunDelete || measure == measureHeldDel},
		BatchSize: c.o.batch,
		Logger:    c.log,
	}
}

// claimlock loads the jobs into a fresh table (not timed), then drains it
// with measure's loop and times until every job is acked.
func (c *compare) claimlock(ctx context.Context, measure string, workers int) (result, error) {
	r := c.base("claimlock", measure, workers)
	pool, err := c.pool(ctx, workers+4)
	if err != nil {
		return r, err
	}
	defer pool.Close()
	d, err := postgres.New(ctx, pool, dialect.Options{})
	if err != nil {
		return r, err
	}
	var acked atomic.Int64
	allAcked := make(chan struct{})
	var once sync.Once
	cfg := c.claimConfig(measure)
	cfg.Observer = observe.Func(func(_ context.Context, e observe.Event) {
		if e.Op == claim.OpAck && e.Err == nil && !e.Tx && acked.Add(int64(e.Acked)) >= int64(c.o.jobs) {
			once.Do(func() { close(allAcked) })
		}
	})
	cl, err := claim.New(d, cfg, jobFields)
	if err != nil {
		return r, err
	}
	r.Config = fmt.Sprintf("batch=%d strategy=%s delete_done=%t", c.o.batch, cl.Strategy(), cfg.DeleteDone)
	if err := c.loadClaimTable(ctx, pool, cl); err != nil {
		return r, err
	}

	t := newTracker(c.o.jobs)
	handle := func(row claim.Row[job]) error {
		var a noopArgs
		if err := json.Unmarshal(row.Value.Args, &a); err != nil {
			return claim.Park(err)
		}
		t.start(a.Seq)
		t.end(a.Seq)
		return nil
	}
	var elapsed time.Duration
	switch measure {
	case measureRun, measureRunDelete:
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		start := time.Now()
		runErr := make(chan error, 1)
		go func() {
			runErr <- cl.Run(runCtx, claim.WorkerConfig[job]{Workers: workers,
				Handler: func(_ context.Context, row claim.Row[job]) error { return handle(row) }})
		}()
		select {
		case <-allAcked:
			elapsed = time.Since(start)
			stop()
			if err := <-runErr; err != nil {
				return r, err
			}
		case err := <-runErr:
			return r, fmt.Errorf("claimer.Run returned before every job was acked (%d of %d): %v", acked.Load(), c.o.jobs, err)
		}
	case measureHeld, measureHeldDel:
		holder, err := cl.Holder(claim.HoldConfig{MaxInFlight: workers})
		if err != nil {
			return r, err
		}
		start := time.Now()
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				if err := heldWorker(ctx, holder, t, handle); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		elapsed = time.Since(start)
		close(errs)
		if err := <-errs; err != nil {
			return r, err
		}
	default:
		return r, fmt.Errorf("unknown measure %q", measure)
	}
	if err := c.finish(&r, elapsed, t); err != nil {
		return r, err
	}
	// The database must agree: every row done (or deleted), none in another
	// state.
	st, err := cl.Stats(ctx)
	if err != nil {
		return r, err
	}
	want := claim.Stats{Done: int64(c.o.jobs)}
	if cfg.DeleteDone {
		want = claim.Stats{}
	}
	if got := (claim.Stats{Pending: st.Pending, Processing: st.Processing, Done: st.Done, Failed: st.Failed, Other: st.Other}); got != want {
		return r, fmt.Errorf("rows in the table after the run: %+v, want %+v", got, want)
	}
	return r, nil
}

// heldWorker holds batches until one comes back empty, runs handle on each
// row, acks the batch whole in its transaction and commits. A batch the
// server rolled back (a deadlock: the error matches dialect.ErrClaimLost)
// left no trace: its executions are forgotten and its rows, pending again,
// are held by a later batch.
func heldWorker(ctx context.Context, h *claim.Holder[job], t *tracker, handle func(claim.Row[job]) error) error {
	for {
		batch, err := h.Hold(ctx)
		if err != nil {
			return err
		}
		if batch.Len() == 0 {
			return nil
		}
		var seqs []int64
		for _, row := range batch.Rows() {
			if err := handle(row); err != nil {
				_ = batch.Rollback(ctx)
				return err
			}
			var a noopArgs
			_ = json.Unmarshal(row.Value.Args, &a)
			seqs = append(seqs, a.Seq)
		}
		err = batch.AckAll(ctx)
		if err == nil {
			err = batch.Commit(ctx)
		}
		if errors.Is(err, dialect.ErrClaimLost) {
			_ = batch.Rollback(ctx)
			for _, s := range seqs {
				t.undo(s)
			}
			continue
		}
		if err != nil {
			return err
		}
	}
}

// loadClaimTable drops and creates the claim table as a user's migration
// would, with the claimer's recommended indexes, and loads the jobs: row i
// (from 0) has the arguments {"seq":i}, as River's job i.
func (c *compare) loadClaimTable(ctx context.Context, pool *pgxpool.Pool, cl *claim.Claimer[job]) error {
	q := ident(claimTable)
	stmts := []string{
		"DROP TABLE IF EXISTS " + q,
		"CREATE TABLE " + q + ` (id BIGSERIAL PRIMARY KEY, status VARCHAR(16) NOT NULL DEFAULT 'PENDING',
			token VARCHAR(40), claimed_at TIMESTAMPTZ, attempts INTEGER NOT NULL DEFAULT 0, args JSONB NOT NULL)`,
	}
	stmts = append(stmts, cl.IndexDDL(false)...)
	for _, s := range stmts {
		if _, err := pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	for start := 0; start < c.o.jobs; start += claimInsertChunk {
		n := min(claimInsertChunk, c.o.jobs-start)
		vals := make([]string, n)
		args := make([]any, n)
		for i := range n {
			vals[i] = fmt.Sprintf("($%d::jsonb)", i+1)
			args[i] = fmt.Sprintf(`{"seq":%d}`, start+i)
		}
		if _, err := pool.Exec(ctx, "INSERT INTO "+q+" (args) VALUES "+strings.Join(vals, ", "), args...); err != nil {
			return err
		}
	}
	_, err := pool.Exec(ctx, "ANALYZE "+q)
	return err
}

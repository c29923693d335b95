package claim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
)

// heldEvents groups a recorder's held events by batch.
type heldBatch struct {
	claimed                       int
	acked, failed, parked         int
	commits, rollbacks, lost, err int
	retryable                     int      // errors that were deadlocks between batches
	errs                          []string // the other errors, by operation
}

func heldBatches(t *testing.T, evs []observe.Event) map[string]*heldBatch {
	t.Helper()
	m := map[string]*heldBatch{}
	for _, e := range evs {
		require.True(t, e.Held, "a holder's claimer reports only held events here: %+v", e)
		require.NotEmpty(t, e.Token, "a held event names its batch")
		b := m[e.Token]
		if b == nil {
			b = &heldBatch{}
			m[e.Token] = b
		}
		if e.Op == claim.OpClaim && errors.Is(e.Err, context.Canceled) {
			continue // a claim cut short by the run's shutdown: it holds nothing
		}
		if e.Err != nil && e.Op != claim.OpLost {
			if dialect.IsRetryable(e.Err) {
				b.retryable++
			} else {
				b.err++
				b.errs = append(b.errs, fmt.Sprintf("%s: %v", e.Op, e.Err))
			}
			continue
		}
		switch e.Op {
		case claim.OpClaim:
			b.claimed += e.Claimed
		case claim.OpAck:
			b.acked += e.Acked
		case claim.OpFail:
			b.failed += e.Failed
			b.parked += e.Parked
		case claim.OpCommit:
			b.commits++
		case claim.OpRollback:
			b.rollbacks++
		case claim.OpLost:
			b.lost++
		}
	}
	return m
}

// waitDrained waits until the claimer's table has nothing pending or
// processing, failing when no row reached a final state for drainStall.
func waitDrained(t *testing.T, c *claim.Claimer[job]) {
	t.Helper()
	awaitStats(t, "the table to drain (nothing pending or processing)", c.Stats,
		func(st claim.Stats) bool { return st.Pending == 0 && st.Processing == 0 }, nil)
}

// TestHeldRun drains a table with two holders (two claimers, three
// batches in flight each) running Holder.Run. Each batch writes one log row
// per row through Held.Exec; a batch holding a row on its first try of a
// multiple of 13 returns an error after its writes, one of a multiple of 31
// panics, and multiples of 17 are failed by the handler (Held.Fail) until
// parked. Every other row ends done with exactly one log row, the failed
// batches' writes are gone, every counted attempt is a failure the loop or
// the handler recorded, and the observer's events count exactly that.
func TestHeldRun(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		const n, maxAttempts = 240, 6
		rec := &recorder{}
		c1, cfg := jobSetup(t, e, dialect.StrategySkipLocked, n, func(cfg *claim.Config) {
			cfg.BatchSize = 7
			cfg.MaxAttempts = maxAttempts
			cfg.Observer = rec
		})
		c2, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)
		log := cfg.Table + "_log"
		e.exec(t, fmt.Sprintf("CREATE TABLE %s (id BIGINT NOT NULL)", log))
		insert := e.rebind(fmt.Sprintf("INSERT INTO %s (id) VALUES (?)", log))

		var inflight sync.Map
		var overlaps, batchErrs, panics, handled atomic.Int64
		handle := func(ctx context.Context, b *claim.Held[job]) error {
			handled.Add(int64(b.Len()))
			for _, r := range b.Rows() {
				if _, dup := inflight.LoadOrStore(r.ID, true); dup {
					overlaps.Add(1)
				}
			}
			defer func() {
				for _, r := range b.Rows() {
					inflight.Delete(r.ID)
				}
			}()
			var fail, boom bool
			for _, r := range b.Rows() {
				id := r.ID.(int64)
				fail = fail || id%13 == 0 && r.Attempts == 0
				boom = boom || id%31 == 0 && r.Attempts == 0
			}
			if fail || boom {
				for _, r := range b.Rows() {
					if _, err := b.Exec(ctx, insert, r.ID); err != nil {
						return err
					}
				}
				if boom {
					panics.Add(1)
					panic("handler bug")
				}
				batchErrs.Add(1)
				return errors.New("first try fails")
			}
			for _, r := range b.Rows() {
				if r.ID.(int64)%17 == 0 {
					if err := b.Fail(ctx, r.ID, errors.New("poison")); err != nil {
						return err
					}
					continue
				}
				if _, err := b.Exec(ctx, insert, r.ID); err != nil {
					return err
				}
			}
			return nil // the rows not failed are acked
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, c := range []*claim.Claimer[job]{c1, c2} {
			h, err := c.Holder(claim.HoldConfig{MaxInFlight: 3, Limit: 10 * time.Second})
			require.NoError(t, err)
			wg.Go(func() { errs <- h.Run(ctx, handle) })
		}
		waitDrained(t, c1)
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		poison := int64(n / 17)
		requireStats(t, c1, 0, 0, n-poison, poison)
		require.Zero(t, overlaps.Load(), "a row in two batches at once")
		require.NotZero(t, batchErrs.Load())
		require.NotZero(t, panics.Load())

		var logged, distinct int64
		require.NoError(t, e.raw.QueryRowContext(context.Background(), fmt.Sprintf("SELECT COUNT(*), COUNT(DISTINCT id) FROM %s", log)).Scan(&logged, &distinct))
		require.Equal(t, n-poison, logged, "one log row per done row: failed batches' writes rolled back")
		require.Equal(t, logged, distinct)
		var attempts, parkedAttempts int64
		require.NoError(t, e.raw.QueryRowContext(context.Background(), e.rebind(fmt.Sprintf(
			"SELECT COALESCE(SUM(attempts), 0), COALESCE(SUM(CASE WHEN status = 'FAILED' THEN attempts ELSE 0 END), 0) FROM %s WHERE task_id = 42", cfg.Table))).Scan(&attempts, &parkedAttempts))
		require.Equal(t, poison*maxAttempts, parkedAttempts, "parked rows end at MaxAttempts")

		evs, _ := rec.take()
		var claimed, acked, failed, parked, commits, deadlocked int
		for tok, b := range heldBatches(t, evs) {
			require.Zero(t, b.err, "batch %s: an operation failed: %s", tok, strings.Join(b.errs, "; "))
			if b.retryable > 0 {
				// A deadlock between two batches' statements (MariaDB)
				// rolled this one back whole: nothing of it counts.
				require.Zero(t, b.commits, "batch %s: committed after a deadlock", tok)
				deadlocked++
				continue
			}
			require.Zero(t, b.lost, "batch %s lost", tok)
			require.Zero(t, b.rollbacks, "batch %s rolled back: nothing was retryable", tok)
			if b.claimed == 0 {
				require.Zero(t, b.commits, "an empty batch reports only its claim")
				continue
			}
			require.Equal(t, 1, b.commits, "batch %s: one commit", tok)
			claimed += b.claimed
			acked += b.acked
			failed += b.failed
			parked += b.parked
			commits++
		}
		require.LessOrEqual(t, int64(claimed), handled.Load(), "the rows of committed batches were handed to handlers")
		require.EqualValues(t, n-poison, acked, "acks reported in committed batches")
		require.EqualValues(t, attempts, failed, "every counted attempt is a reported failure")
		require.EqualValues(t, poison, parked, "parked rows reported")
		t.Logf("batches=%d failed-batches=%d panics=%d deadlocked=%d attempts=%d", commits, batchErrs.Load(), panics.Load(), deadlocked, attempts)
	})
}

// TestHeldRunStatementFailure: a statement of the handler that fails (a
// missing table) fails the batch, even when the handler ignores the error
// and returns nil: its earlier writes are undone, every row's attempt is
// counted with the statement's error stored, and the rows park at
// MaxAttempts.
func TestHeldRunStatementFailure(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		c, cfg := jobSetup(t, e, dialect.StrategySkipLocked, 5, func(cfg *claim.Config) {
			cfg.Error = "last_error"
			cfg.MaxAttempts = 2
		})
		log := cfg.Table + "_log"
		e.exec(t, fmt.Sprintf("CREATE TABLE %s (id BIGINT NOT NULL)", log))
		insert := e.rebind(fmt.Sprintf("INSERT INTO %s (id) VALUES (?)", log))
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 1})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var refused atomic.Int64
		done := make(chan error, 1)
		go func() {
			// assert, not require: the handler runs on Run's goroutine.
			done <- h.Run(ctx, func(ctx context.Context, b *claim.Held[job]) error {
				if _, err := b.Exec(ctx, insert, b.Rows()[0].ID); !assert.NoError(t, err) {
					cancel()
					return err
				}
				_, err := b.Exec(ctx, "UPDATE no_such_table SET x = 1")
				if !assert.Error(t, err) {
					cancel()
					return nil
				}
				assert.NotErrorIs(t, err, dialect.ErrClaimLost, "the rows are still held")
				if _, err := b.Exec(ctx, insert, b.Rows()[1].ID); err != nil {
					refused.Add(1) // the batch takes no more statements
				}
				return nil
			})
		}()
		awaitStats(t, "the five rows to be parked", c.Stats, func(st claim.Stats) bool { return st.Failed == 5 }, nil)
		cancel()
		require.NoError(t, <-done)
		require.EqualValues(t, 2, refused.Load())
		requireStats(t, c, 0, 0, 0, 5)
		var logged int
		require.NoError(t, e.raw.QueryRowContext(context.Background(), fmt.Sprintf("SELECT COUNT(*) FROM %s", log)).Scan(&logged))
		require.Zero(t, logged)
		res, err := e.raw.QueryContext(context.Background(), fmt.Sprintf("SELECT attempts, last_error FROM %s WHERE task_id = 42", cfg.Table))
		require.NoError(t, err)
		defer res.Close()
		for res.Next() {
			var att int
			var msg string
			require.NoError(t, res.Scan(&att, &msg))
			require.Equal(t, 2, att)
			require.Contains(t, strings.ToLower(msg), "no_such_table")
		}
		require.NoError(t, res.Err())
	})
}

// TestHeldRunLoss: a batch whose connection is killed while its handler
// runs is lost: its context ends, the observer sees OpLost once, no attempt
// is counted, and Run holds its rows again and finishes them.
func TestHeldRunLoss(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		rec := &recorder{}
		c, cfg := jobSetup(t, e, dialect.StrategySkipLocked, 3, func(cfg *claim.Config) { cfg.Observer = rec })
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 1, Limit: 3 * time.Second})
		require.NoError(t, err)
		q, kill := "SELECT CONNECTION_ID()", "KILL %d"
		if e.d.Capabilities().Engine == dialect.EnginePostgreSQL {
			q, kill = "SELECT pg_backend_pid()::bigint", "SELECT pg_terminate_backend(%d)"
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var calls atomic.Int64
		done := make(chan error, 1)
		go func() {
			done <- h.Run(ctx, func(ctx context.Context, b *claim.Held[job]) error {
				if calls.Add(1) > 1 {
					return nil
				}
				var id int64
				if err := b.Query(ctx, q, nil, func(scan func(...any) error) error { return scan(&id) }); err != nil {
					return err
				}
				if _, err := e.raw.ExecContext(context.Background(), fmt.Sprintf(kill, id)); err != nil {
					return err
				}
				<-ctx.Done() // the keep-alive finds the batch lost
				return context.Cause(ctx)
			})
		}()
		waitDrained(t, c)
		cancel()
		require.NoError(t, <-done)
		require.EqualValues(t, 2, calls.Load())
		requireStats(t, c, 0, 0, 3, 0)
		var attempts int
		require.NoError(t, e.raw.QueryRowContext(context.Background(), "SELECT COALESCE(SUM(attempts), 0) FROM "+cfg.Table).Scan(&attempts))
		require.Zero(t, attempts, "a lost batch counts no attempt")
		evs, _ := rec.take()
		var lost, commits int
		for _, ev := range evs {
			switch ev.Op {
			case claim.OpLost:
				lost++
				require.True(t, ev.Background, "found by the keep-alive")
				require.ErrorIs(t, ev.Err, dialect.ErrClaimLost)
				require.EqualValues(t, 3, ev.Rows)
			case claim.OpCommit:
				commits++
			}
		}
		require.Equal(t, 1, lost)
		require.Equal(t, 1, commits)
	})
}

// TestHeldRunShutdown: cancelling Run while a batch's handler runs lets
// that batch finish and commit (its handler's context is not cancelled),
// holds no new batch, and returns nil once it has.
func TestHeldRunShutdown(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		rec := &recorder{}
		c, cfg := jobSetup(t, e, dialect.StrategySkipLocked, 20, func(cfg *claim.Config) { cfg.Observer = rec })
		log := cfg.Table + "_log"
		e.exec(t, fmt.Sprintf("CREATE TABLE %s (id BIGINT NOT NULL)", log))
		insert := e.rebind(fmt.Sprintf("INSERT INTO %s (id) VALUES (?)", log))
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 2})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		entered := make(chan struct{}, 2)
		resume := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- h.Run(ctx, func(hctx context.Context, b *claim.Held[job]) error {
				for _, r := range b.Rows()[:5] {
					if _, err := b.Exec(hctx, insert, r.ID); err != nil {
						return err
					}
				}
				entered <- struct{}{}
				<-resume
				for _, r := range b.Rows()[5:] {
					if _, err := b.Exec(hctx, insert, r.ID); err != nil {
						return err
					}
				}
				return hctx.Err()
			})
		}()
		<-entered
		<-entered // both batches (10 rows each) are in their handlers
		cancel()
		select {
		case err := <-done:
			t.Fatalf("Run returned %v before its batches finished", err)
		default:
		}
		close(resume)
		require.NoError(t, <-done)
		requireStats(t, c, 0, 0, 20, 0)
		var logged int
		require.NoError(t, e.raw.QueryRowContext(context.Background(), fmt.Sprintf("SELECT COUNT(*) FROM %s", log)).Scan(&logged))
		require.Equal(t, 20, logged)
		evs, _ := rec.take()
		var claims, commits int
		for _, ev := range evs {
			switch ev.Op {
			case claim.OpClaim:
				claims++
			case claim.OpCommit:
				commits++
			}
		}
		require.Equal(t, 2, claims, "no hold after the shutdown")
		require.Equal(t, 2, commits)
	})
}

// TestHeldRunPermanent: a misconfigured table (a column that does not
// exist) stops Run with an error that retrying cannot cure; a nil handler
// is refused at once.
func TestHeldRunPermanent(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		_, cfg := jobSetup(t, e, dialect.StrategySkipLocked, 3, nil)
		cfg.Columns = []string{"no_such_column"}
		c, err := claim.New(e.d, cfg, func(j *job) []any { return []any{&j.Payload} })
		require.NoError(t, err)
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 1})
		require.NoError(t, err)
		require.ErrorIs(t, h.Run(context.Background(), nil), dialect.ErrInvalidConfig)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = h.Run(ctx, func(context.Context, *claim.Held[job]) error { t.Error("a batch was handed out"); return nil })
		require.Error(t, err)
		require.True(t, dialect.IsPermanent(err), "%v", err)
		require.NoError(t, ctx.Err(), "Run stopped on its own")
	})
}

// Job is the row type of docs/claim.md's held-run snippet.
type Job = job

// TestSnippetHeldRun runs docs/claim.md's Holder.Run snippet on every
// engine that holds claims: every row ends done with one result row,
// written in the same transaction as its ack.
func TestSnippetHeldRun(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		const n = 25
		claimer, cfg := jobSetup(t, e, dialect.StrategySkipLocked, n, nil)
		results := cfg.Table + "_results"
		e.exec(t, fmt.Sprintf("CREATE TABLE %s (id BIGINT NOT NULL PRIMARY KEY)", results))
		insertResult := e.rebind(fmt.Sprintf("INSERT INTO %s (id) VALUES (?)", results))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- func() error {
				// snippet: held-run
				holder, err := claimer.Holder(claim.HoldConfig{Limit: 10 * time.Second, MaxInFlight: 4})
				if err != nil {
					return err // dialect.ErrNotSupported on SQLite
				}
				return holder.Run(ctx, func(ctx context.Context, b *claim.Held[Job]) error {
					for _, r := range b.Rows() {
						if _, err := b.Exec(ctx, insertResult, r.ID); err != nil {
							return err // every row fails; the results written so far are undone
						}
					}
					return nil // the rows are acked and commit with their results
				})
				// end snippet
			}()
		}()
		waitDrained(t, claimer)
		cancel()
		require.NoError(t, <-done)
		requireStats(t, claimer, 0, 0, n, 0)
		var k int
		require.NoError(t, e.raw.QueryRowContext(context.Background(), fmt.Sprintf("SELECT COUNT(*) FROM %s", results)).Scan(&k))
		require.Equal(t, n, k)
	})
}

package claim_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// holdable runs fn on every engine that holds claims, and checks on the
// others that Holder refuses with ErrNotSupported.
func holdable(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e := open(t, en)
			c, _ := jobSetup(t, e, e.d.Capabilities().PreferredStrategy, 1, nil)
			if _, err := c.Holder(claim.HoldConfig{MaxInFlight: 1}); errors.Is(err, dialect.ErrNotSupported) {
				require.False(t, e.d.Capabilities().SkipLocked && e.d.Capabilities().Engine != dialect.EngineSQLite,
					"only engines without SKIP LOCKED, and SQLite, refuse held claims: %v", err)
				return
			} else {
				require.NoError(t, err)
			}
			fn(t, e)
		})
	}
}

// TestHolderConfig checks the holder's refusals, the pool bound among them.
func TestHolderConfig(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		c, _ := jobSetup(t, e, dialect.StrategySkipLocked, 1, nil)
		for _, bad := range []claim.HoldConfig{
			{Limit: -time.Second}, {Limit: time.Microsecond}, {Limit: time.Second, SafetyMargin: time.Second},
			{SafetyMargin: -1}, {MaxInFlight: -1}, {MaxInFlight: 24}, {MaxInFlight: 1000},
		} {
			_, err := c.Holder(bad)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%+v", bad)
		}
		h, err := c.Holder(claim.HoldConfig{})
		require.NoError(t, err)
		require.Equal(t, 23, h.MaxInFlight(), "the pool's 24 connections less one")
	})
}

// TestHeldConcurrent runs holders in parallel goroutines that log each
// row in the batch's transaction, fail some rows once, roll some batches
// back, and commit: no row is ever held by two batches at once, and every
// row ends done with exactly one log row.
func TestHeldConcurrent(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		const n = 300
		c, cfg := jobSetup(t, e, dialect.StrategySkipLocked, n, func(cfg *claim.Config) { cfg.BatchSize = 7; cfg.MaxAttempts = 3 })
		log := cfg.Table + "_log"
		e.exec(t, fmt.Sprintf("CREATE TABLE %s (id BIGINT NOT NULL PRIMARY KEY)", log))
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 4, Limit: 10 * time.Second})
		require.NoError(t, err)
		ctx := context.Background()
		var inflight sync.Map
		var overlaps, rollbacks atomic.Int64
		failed := sync.Map{}
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for w := range 6 {
			wg.Go(func() {
				for round := 0; ; round++ {
					b, err := h.Hold(ctx)
					if err != nil {
						errs <- err
						return
					}
					if b.Len() == 0 {
						return
					}
					for _, r := range b.Rows() {
						if _, dup := inflight.LoadOrStore(r.ID, true); dup {
							overlaps.Add(1)
						}
					}
					err = func() error {
						for _, r := range b.Rows() {
							id := r.ID.(int64)
							if _, seen := failed.LoadOrStore(id, true); !seen && id%5 == 0 {
								if err := b.Fail(ctx, id, errors.New("once")); err != nil {
									return err
								}
								continue
							}
							if _, err := b.Exec(ctx, e.rebind(fmt.Sprintf("INSERT INTO %s (id) VALUES (?)", log)), id); err != nil {
								return err
							}
							if err := b.Ack(ctx, id); err != nil {
								return err
							}
						}
						return nil
					}()
					for _, r := range b.Rows() {
						inflight.Delete(r.ID)
					}
					if err != nil {
						errs <- err
						return
					}
					if (w+round)%4 == 3 {
						rollbacks.Add(1)
						require.NoError(t, b.Rollback(ctx))
						continue
					}
					if err := b.Commit(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		require.NoError(t, <-errs)
		require.Zero(t, overlaps.Load())
		require.NotZero(t, rollbacks.Load())
		requireStats(t, c, 0, 0, n, 0)
		var logged, distinct int64
		require.NoError(t, e.raw.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*), COUNT(DISTINCT id) FROM %s", log)).Scan(&logged, &distinct))
		require.EqualValues(t, n, logged, "one log row per row, written with its ack: rolled-back batches left none")
		require.EqualValues(t, n, distinct)
	})
}

// TestHeldLoss: a held batch whose connection is killed learns of it from
// its keep-alive, within a third of the hold limit: its context ends with
// ErrClaimLost, its commit is refused, and another batch holds its rows at
// once. Its rows were never written.
func TestHeldLoss(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		c, cfg := jobSetup(t, e, dialect.StrategySkipLocked, 3, nil)
		h, err := c.Holder(claim.HoldConfig{Limit: 3 * time.Second, MaxInFlight: 2})
		require.NoError(t, err)
		ctx := context.Background()
		b, err := h.Hold(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, b.Len())
		q, kill := "SELECT CONNECTION_ID()", "KILL %d"
		if e.d.Capabilities().Engine == dialect.EnginePostgreSQL {
			q, kill = "SELECT pg_backend_pid()::bigint", "SELECT pg_terminate_backend(%d)"
		}
		var id int64
		require.NoError(t, b.Query(ctx, q, nil, func(scan func(...any) error) error { return scan(&id) }))
		require.NoError(t, b.Ack(ctx, b.Rows()[0].ID))
		_, err = e.raw.ExecContext(ctx, fmt.Sprintf(kill, id))
		require.NoError(t, err)
		select {
		case <-b.Context().Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the batch's context outlived its killed connection")
		}
		require.ErrorIs(t, context.Cause(b.Context()), dialect.ErrClaimLost)
		require.ErrorIs(t, b.Commit(ctx), dialect.ErrClaimLost)
		require.NoError(t, b.Rollback(ctx), "a rollback of an ended batch is a no-op")
		b2, err := h.Hold(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, b2.Len(), "the server released every row, the acked one too")
		require.NoError(t, b2.AckAll(ctx))
		require.NoError(t, b2.Commit(ctx))
		require.ErrorIs(t, context.Cause(b2.Context()), claim.ErrBatchDone)
		requireStats(t, c, 0, 0, 3, 0)

		// A failed statement of the batch rolls it back: the rows are
		// pending again, the handler's writes undone.
		e.exec(t, fmt.Sprintf("UPDATE %s SET status = 'PENDING' WHERE task_id = 42", cfg.Table))
		b3, err := h.Hold(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, b3.Len())
		require.NoError(t, b3.Ack(ctx, b3.Rows()[0].ID))
		require.ErrorIs(t, b3.Ack(ctx, b3.Rows()[0].ID), dialect.ErrClaimLost, "acked already")
		require.NoError(t, b3.Ack(ctx, b3.Rows()[1].ID), "a key not held ends nothing")
		_, err = b3.Exec(ctx, "UPDATE no_such_table SET x = 1")
		require.ErrorIs(t, err, dialect.ErrClaimLost)
		require.ErrorIs(t, context.Cause(b3.Context()), dialect.ErrClaimLost)
		require.ErrorIs(t, b3.Commit(ctx), dialect.ErrClaimLost)
		requireStats(t, c, 3, 0, 0, 0)
	})
}

// TestHeldPingsKeepIdleBatch: a held batch that runs no statement for
// twice its hold limit stays held: the keep-alive's pings (every Limit/3
// while no statement runs) keep the server from ending the idle
// transaction and move the local deadline, so the batch's context stays
// live and its acks commit.
func TestHeldPingsKeepIdleBatch(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		const limit = 3 * time.Second
		ctx := ctxT(t)
		c, _ := jobSetup(t, e, dialect.StrategySkipLocked, 3, nil)
		h, err := c.Holder(claim.HoldConfig{Limit: limit, MaxInFlight: 1})
		require.NoError(t, err)
		b, err := h.Hold(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, b.Len())
		select {
		case <-b.Context().Done():
			t.Fatalf("the idle held batch ended within twice its hold limit: %v", context.Cause(b.Context()))
		case <-time.After(2 * limit):
		}
		require.NoError(t, b.AckAll(ctx))
		require.NoError(t, b.Commit(ctx))
		requireStats(t, c, 0, 0, 3, 0)
	})
}

// TestSnippetHeldLoop runs docs/claim.md's held loop on every engine that
// holds claims: every row ends done with one result row, written in the
// same transaction as its ack.
func TestSnippetHeldLoop(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		const n = 25
		claimer, cfg := jobSetup(t, e, dialect.StrategySkipLocked, n, nil)
		results := cfg.Table + "_results"
		e.exec(t, fmt.Sprintf("CREATE TABLE %s (id BIGINT NOT NULL PRIMARY KEY)", results))
		insertResult := e.rebind(fmt.Sprintf("INSERT INTO %s (id) VALUES (?)", results))
		ctx := context.Background()
		run := func() error {
			// snippet: held-loop
			holder, err := claimer.Holder(claim.HoldConfig{Limit: 10 * time.Second})
			if err != nil {
				return err // dialect.ErrNotSupported on SQLite
			}
			for {
				b, err := holder.Hold(ctx)
				if err != nil {
					return err
				}
				if b.Len() == 0 {
					break // nothing pending; the empty batch has ended
				}
				for _, r := range b.Rows() {
					if _, err := b.Exec(b.Context(), insertResult, r.ID); err != nil {
						_ = b.Rollback(ctx)
						return err
					}
				}
				if err := b.AckAll(ctx); err != nil {
					_ = b.Rollback(ctx)
					return err
				}
				if err := b.Commit(ctx); err != nil {
					return err // the results and the acks commit together, or neither
				}
			}
			// end snippet
			return nil
		}
		require.NoError(t, run())
		requireStats(t, claimer, 0, 0, n, 0)
		var k int
		require.NoError(t, e.raw.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s", results)).Scan(&k))
		require.Equal(t, n, k)
	})
}

// TestHeldUnreadable: a row the row type cannot hold is parked alone, in
// the batch's transaction, with the scan error as its error; the batch's
// other rows are handed out.
func TestHeldUnreadable(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		c, cfg := jobSetup(t, e, dialect.StrategySkipLocked, 4, nil)
		e.exec(t, fmt.Sprintf("UPDATE %s SET payload = NULL WHERE id = (SELECT MIN(id) FROM (SELECT id FROM %s WHERE task_id = 42) x)", cfg.Table, cfg.Table))
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 1})
		require.NoError(t, err)
		ctx := context.Background()
		b, err := h.Hold(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, b.Len())
		require.Len(t, b.Unreadable(), 1)
		require.NoError(t, b.AckAll(ctx))
		require.NoError(t, b.Commit(ctx))
		requireStats(t, c, 0, 0, 3, 1)
		var status string
		require.NoError(t, e.raw.QueryRowContext(ctx, e.rebind(fmt.Sprintf("SELECT status FROM %s WHERE id = ?", cfg.Table)), b.Unreadable()[0].ID).Scan(&status))
		require.Equal(t, "FAILED", status)
	})
}

// TestHeldRowsAreACopy: changing what Rows returns changes nothing the
// batch holds or acks, as with [claim.Batch.Rows].
func TestHeldRowsAreACopy(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		c, _ := jobSetup(t, e, dialect.StrategySkipLocked, 3, nil)
		h, err := c.Holder(claim.HoldConfig{MaxInFlight: 1})
		require.NoError(t, err)
		ctx := context.Background()
		b, err := h.Hold(ctx)
		require.NoError(t, err)
		rows := b.Rows()
		want := append([]claim.Row[job](nil), rows...)
		rows[0].ID, rows[1].Version = int64(1<<40), 99
		require.Equal(t, want, b.Rows())
		require.NoError(t, b.AckAll(ctx))
		require.NoError(t, b.Commit(ctx))
		requireStats(t, c, 0, 0, 3, 0)
	})
}

// TestHeldClaimFromTheFirstPendingKey drains a table with held claims and
// then makes rows pending again among the acked ones, as retries and
// reaped rows are: a held claim from the lowest key (which on MySQL looks
// for the first pending key without locks before its locking scan) holds
// nothing after the drain, holds the rows pending again, the lowest one
// included, and skips them while another batch holds them; with integer
// and with text keys.
func TestHeldClaimFromTheFirstPendingKey(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		for _, text := range []bool{false, true} {
			t.Run(map[bool]string{false: "integer-keys", true: "text-keys"}[text], func(t *testing.T) {
				const n = 40
				cfg := claim.Config{
					ClaimTable:  dialect.ClaimTable{Table: tableName("firstkey"), Scope: []string{"task_id"}},
					ScopeValues: []any{42}, Strategy: dialect.StrategySkipLocked, BatchSize: 10,
				}
				cols := []string{"task_id"}
				row := func(i int) []any { return []any{42} }
				if text {
					cfg.IDKind = dialect.IDText
					cols = []string{"id", "task_id"}
					row = func(i int) []any { return []any{fmt.Sprintf("k%03d", i), 42} }
				}
				createTable(t, e, cfg)
				insertRows(t, e, cfg.Table, cols, n, row)
				c, err := claim.New[struct{}](e.d, cfg, nil)
				require.NoError(t, err)
				h, err := c.Holder(claim.HoldConfig{MaxInFlight: 2, Limit: 10 * time.Second})
				require.NoError(t, err)

				var keys []any
				for {
					b, err := h.Hold(ctx)
					require.NoError(t, err)
					if b.Len() == 0 { // an empty batch holds no transaction
						break
					}
					keys = append(keys, heldIDs(b)...)
					require.NoError(t, b.AckAll(ctx))
					require.NoError(t, b.Commit(ctx))
				}
				require.Len(t, keys, n, "the drain held every row once")

				b, err := h.Hold(ctx)
				require.NoError(t, err)
				require.Zero(t, b.Len(), "nothing is pending after the drain")

				// The lowest key and one in the middle pending again.
				again := []any{keys[0], keys[n/2]}
				require.EqualValues(t, 2, e.exec(t, "UPDATE "+cfg.Table+" SET status = 'PENDING' WHERE id IN (?, ?)", again...))
				b, err = h.Hold(ctx)
				require.NoError(t, err)
				require.Equal(t, again, heldIDs(b), "the rows pending again, the lowest key first")

				other, err := h.Hold(ctx)
				require.NoError(t, err)
				require.Zero(t, other.Len(), "the pending rows are held by the first batch")

				require.NoError(t, b.Rollback(ctx))
				b, err = h.Hold(ctx)
				require.NoError(t, err)
				require.Equal(t, again, heldIDs(b), "rolled back, the rows are held again")
				require.NoError(t, b.AckAll(ctx))
				require.NoError(t, b.Commit(ctx))
				st, err := c.Stats(ctx)
				require.NoError(t, err)
				require.Equal(t, [3]int64{0, 0, n}, [3]int64{st.Pending, st.Processing, st.Done}, "pending, processing, done")
			})
		}
	})
}

// TestHeldAckReadsOnlyItsRows: a held batch's ack, by update and by
// delete, reads its own rows by key and does not wait for the rows another
// open batch holds. Without the primary key named, MariaDB read this small
// table whole for the ack, and a DELETE (which, unlike an UPDATE, does not
// pass a row locked by another transaction that it will not change) waited
// for the other batch: two such acks deadlocked and rolled back. The hold
// limit, 2 s, bounds that wait.
func TestHeldAckReadsOnlyItsRows(t *testing.T) {
	t.Parallel()
	holdable(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		for _, del := range []bool{false, true} {
			t.Run(map[bool]string{false: "update", true: "delete"}[del], func(t *testing.T) {
				cfg := claim.Config{
					ClaimTable:  dialect.ClaimTable{Table: tableName("heldack"), Scope: []string{"task_id"}, DeleteDone: del},
					ScopeValues: []any{42}, Strategy: dialect.StrategySkipLocked, BatchSize: 10,
				}
				createTable(t, e, cfg)
				insertRows(t, e, cfg.Table, []string{"task_id"}, 30, func(int) []any { return []any{42} })
				c, err := claim.New[struct{}](e.d, cfg, nil)
				require.NoError(t, err)
				h, err := c.Holder(claim.HoldConfig{MaxInFlight: 2, Limit: 2 * time.Second})
				require.NoError(t, err)
				a, err := h.Hold(ctx)
				require.NoError(t, err)
				b, err := h.Hold(ctx)
				require.NoError(t, err)
				require.Equal(t, [2]int{10, 10}, [2]int{a.Len(), b.Len()})
				require.NoError(t, a.AckAll(ctx), "the ack of one batch, another batch open")
				require.NoError(t, a.Commit(ctx))
				require.NoError(t, b.AckAll(ctx))
				require.NoError(t, b.Commit(ctx))
				st, err := c.Stats(ctx)
				require.NoError(t, err)
				done := int64(20)
				if del {
					done = 0
				}
				require.Equal(t, [3]int64{10, 0, done}, [3]int64{st.Pending, st.Processing, st.Done}, "pending, processing, done")
			})
		}
	})
}

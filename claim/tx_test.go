package claim_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// createEffects creates a table of effect rows with no key at all, so that
// a duplicate effect would be counted, never hidden by a unique index.
func createEffects(t *testing.T, e *env, table string) {
	t.Helper()
	ddl, err := store.CreateTableDDL(e.d, store.TableDef{Table: table, Columns: []store.ColumnDef{
		{Name: "src", Type: store.TypeInt, NotNull: true},
		{Name: "tok", Type: store.TypeText, Len: store.MaxTokenLen, NotNull: true},
	}})
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(context.Background(), e.d, ddl))
}

// Run handlers that write their effect and ack in one transaction leave
// exactly one effect per row, even when some of their transactions roll
// back: a rolled-back row is released when its batch ends and processed
// again.
func TestRunAckTxExactlyOneEffect(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		const rows = 60
		var logs syncBuffer
		c, _ := jobSetup(t, e, s, rows, func(cfg *claim.Config) {
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		})
		effects := tableName("effects")
		createEffects(t, e, effects)
		var rolledBack sync.Map
		var rollbacks atomic.Int64
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- c.Run(runCtx, claim.WorkerConfig[job]{Workers: 3, PollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond,
				Handler: func(ctx context.Context, r claim.Row[job]) error {
					tx, err := e.raw.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer func() { _ = tx.Rollback() }()
					b, ok := claim.BatchOf[job](ctx)
					if !ok {
						return errors.New("no batch in the handler's context")
					}
					if _, err := tx.ExecContext(ctx, e.rebind(fmt.Sprintf("INSERT INTO %s (src, tok) VALUES (?, ?)", effects)), r.ID, b.Token()); err != nil {
						return err
					}
					if err := b.AckTx(ctx, dialect.SQLTx(tx), r.ID); err != nil {
						return err
					}
					if r.ID.(int64)%4 == 0 {
						if _, again := rolledBack.LoadOrStore(r.ID, true); !again {
							rollbacks.Add(1)
							return tx.Rollback() // its effect and its ack go together
						}
					}
					return tx.Commit()
				}})
		}()
		awaitStats(t, "every row to be done", c.Stats, func(st claim.Stats) bool { return st.Done == rows },
			func() string { return fmt.Sprintf("%d transactions rolled back", rollbacks.Load()) })
		cancel()
		require.NoError(t, <-done)
		require.Positive(t, rollbacks.Load())
		var total, distinct int
		require.NoError(t, e.raw.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*), COUNT(DISTINCT src) FROM %s", effects)).Scan(&total, &distinct))
		require.Equal(t, [2]int{rows, rows}, [2]int{total, distinct}, "exactly one effect per row")
		requireStats(t, c, 0, 0, rows, 0)
		// The log names the rolled-back rows for what they are, not as
		// rows left unprocessed by a shutdown.
		out := logs.String()
		require.Contains(t, out, "transactional ack rolled back")
		require.NotContains(t, out, "released unprocessed rows")
	})
}

// A transactional ack of rows the token lost reports them before the
// caller commits; the heartbeat never holds the batch while it waits for
// rows a caller's open transaction holds, so the caller can go on using
// the batch; FailTx completes rows with the transaction.
func TestBatchTxLossAndHeartbeat(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		c, cfg := jobSetup(t, e, s, 5, func(cfg *claim.Config) { withLifecycle(cfg); cfg.MaxAttempts = 3 })
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 5, b.Len())
		rows := b.Rows()

		tx, err := e.raw.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, b.AckTx(ctx, dialect.SQLTx(tx), rows[0].ID))
		// A heartbeat now waits for the row tx holds (or for the database
		// lock, on SQLite) without holding the batch.
		hb := make(chan error, 1)
		go func() {
			hctx, hcancel := context.WithTimeout(ctx, 30*time.Second)
			defer hcancel()
			_, err := b.Heartbeat(hctx)
			hb <- err
		}()
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, b.FailTx(ctx, dialect.SQLTx(tx), rows[1].ID, errors.New("bad input")), "the batch is usable while a heartbeat waits")
		require.NoError(t, b.FailTx(ctx, dialect.SQLTx(tx), rows[2].ID, claim.RetryAfter(0, errors.New("at once"))))
		require.NoError(t, tx.Commit())
		require.NoError(t, <-hb)

		var status string
		var msg sql.NullString
		q := e.rebind(fmt.Sprintf("SELECT status, last_error FROM %s WHERE id = ?", cfg.Table))
		require.NoError(t, e.raw.QueryRowContext(ctx, q, rows[0].ID).Scan(&status, &msg))
		require.Equal(t, "DONE", status)
		require.NoError(t, e.raw.QueryRowContext(ctx, q, rows[1].ID).Scan(&status, &msg))
		require.Equal(t, "PENDING", status)
		require.Equal(t, "bad input", msg.String)
		require.NoError(t, e.raw.QueryRowContext(ctx, q, rows[2].ID).Scan(&status, &msg))
		require.Equal(t, "PENDING", status)

		// Another worker takes row 3 (a reaper returned it, say): the
		// transactional ack reports the loss before the caller commits.
		e.exec(t, fmt.Sprintf("UPDATE %s SET token = 'someone-else' WHERE id = ?", cfg.Table), rows[3].ID)
		tx, err = e.raw.BeginTx(ctx, nil)
		require.NoError(t, err)
		err = b.AckTx(ctx, dialect.SQLTx(tx), rows[3].ID, rows[4].ID)
		require.ErrorIs(t, err, dialect.ErrClaimLost)
		var lost *claim.LostError
		require.ErrorAs(t, err, &lost)
		require.Equal(t, []any{rows[3].ID}, lost.IDs)
		require.NoError(t, tx.Rollback())
		require.ErrorIs(t, b.Err(), dialect.ErrClaimLost, "the loss ends the batch's context")
		// Row 4's ack rolled back with the transaction: Release returns it.
		n, err := b.Release(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "the rolled-back row is released, the committed ones and the lost one are not")
		require.NoError(t, e.raw.QueryRowContext(ctx, q, rows[4].ID).Scan(&status, &msg))
		require.Equal(t, "PENDING", status)

		_, ok := claim.BatchOf[job](ctx)
		require.False(t, ok, "not a Run handler's context")
		require.ErrorIs(t, b.FailTx(ctx, dialect.SQLTx(tx), rows[4].ID, claim.SnoozeFor(time.Minute)), dialect.ErrInvalidConfig, "a snooze runs on the store's own connection")
	})
}

// On SQLite, transactions begun on the handle sqlite.Open returns are
// write transactions (BEGIN IMMEDIATE), so handlers that read before they
// write and ack in their transaction (AckTx) never fail with SQLITE_BUSY
// while other workers claim and ack: a deferred BEGIN that read first
// cannot upgrade to a writer once another connection committed, and busy
// waiting does not help it. Four workers, each row read, written and acked
// in one transaction: no error, exactly one effect per row.
func TestAckTxSQLiteUnderContention(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	require.Equal(t, "sqlite", e.kind)
	ctx := context.Background()
	const rows = 400
	c, _ := jobSetup(t, e, dialect.StrategyTokenUpdate, rows, nil)
	effects := tableName("effects")
	createEffects(t, e, effects)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				b, err := c.Claim(ctx)
				if err != nil {
					errs <- err
					return
				}
				if b.Len() == 0 {
					return
				}
				for _, r := range b.Rows() {
					err := func() error {
						tx, err := e.raw.BeginTx(ctx, nil)
						if err != nil {
							return err
						}
						defer func() { _ = tx.Rollback() }()
						var n int
						if err := tx.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE src = ?", effects), r.ID).Scan(&n); err != nil {
							return err
						}
						if n != 0 {
							return fmt.Errorf("row %v has an effect already", r.ID)
						}
						if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (src, tok) VALUES (?, ?)", effects), r.ID, b.Token()); err != nil {
							return err
						}
						if err := b.AckTx(ctx, dialect.SQLTx(tx), r.ID); err != nil {
							return err
						}
						return tx.Commit()
					}()
					if err != nil {
						errs <- fmt.Errorf("row %v: %w", r.ID, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var total, distinct int
	require.NoError(t, e.raw.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*), COUNT(DISTINCT src) FROM %s", effects)).Scan(&total, &distinct))
	require.Equal(t, [2]int{rows, rows}, [2]int{total, distinct}, "exactly one effect per row")
	requireStats(t, c, 0, 0, rows, 0)
}

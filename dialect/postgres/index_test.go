package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestConcurrentIndexes builds the recommended indexes of a table in use
// on the real server. While a long transaction has written to the table, a
// plain CREATE INDEX waits for it, and every writer queues behind the
// CREATE INDEX (an INSERT gives up after its lock_timeout); built
// CONCURRENTLY, writers go on. CONCURRENTLY cannot run inside a
// transaction block. A build cancelled while it waits leaves an INVALID
// index that CREATE INDEX ... IF NOT EXISTS would skip: MissingIndexes
// reports it, with the DROP INDEX that removes it, and applying that
// builds a valid index.
func TestConcurrentIndexes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := dbtest.PostgresPool(t)
	d, err := New(ctx, pool, dialect.Options{})
	require.NoError(t, err)
	var schema string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema))
	spec := jobSpec(t)
	spec.Table = schema + ".jobs" // qualified, as the DROP INDEX must be
	ddl, err := store.CreateTableDDL(d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	_, err = pool.Exec(ctx, `INSERT INTO jobs (task_id, payload) SELECT g % 10, 'p' FROM generate_series(1, 1000) g`)
	require.NoError(t, err)
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	ix := cs.(store.IndexDDLer)
	online := store.IndexOptions{Online: true}
	stmts := ix.IndexDDLWith(online)
	require.Len(t, stmts, len(cs.IndexDDL()))
	for i, s := range stmts {
		require.Equal(t, strings.Replace(cs.IndexDDL()[i], "CREATE INDEX IF NOT EXISTS", "CREATE INDEX CONCURRENTLY IF NOT EXISTS", 1), s)
	}

	// A writer's transaction stays open while the index is built.
	writer := func() func() {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `UPDATE jobs SET payload = 'q' WHERE id = 1`)
		require.NoError(t, err)
		return func() { require.NoError(t, tx.Rollback(ctx)) }
	}
	// insert runs another writer's INSERT that gives up after 300 ms
	// waiting for a lock.
	insert := func() error {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		_, err = conn.Exec(ctx, `SET lock_timeout = '300ms'`)
		require.NoError(t, err)
		defer conn.Exec(ctx, `RESET lock_timeout`) //nolint:errcheck // the pool's next user resets nothing else
		_, err = conn.Exec(ctx, `INSERT INTO jobs (task_id, payload) VALUES (1, 'new')`)
		return err
	}
	for _, c := range []struct {
		name    string
		stmt    string
		blocked bool
	}{
		{"plain", cs.IndexDDL()[1], true},
		{"concurrently", stmts[1], false},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := writer()
			done := make(chan error, 1)
			go func() { done <- store.ExecDDL(ctx, d, []string{c.stmt}) }()
			waitForIndexBuild(ctx, t, pool, c.stmt)
			err := insert()
			if c.blocked {
				var pe *pgconn.PgError
				require.True(t, errors.As(err, &pe) && pe.Code == codeLockNotAvailable, "the insert queued behind CREATE INDEX: %v", err)
			} else {
				require.NoError(t, err, "writers go on while the index is built concurrently")
			}
			release()
			require.NoError(t, <-done)
			_, err = pool.Exec(ctx, fmt.Sprintf(`DROP INDEX %q.%q`, schema, store.IndexName(spec.Table, "token")))
			require.NoError(t, err)
		})
	}

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, stmts[0])
	var pe *pgconn.PgError
	require.True(t, errors.As(err, &pe) && pe.Code == "25001", "CONCURRENTLY inside a transaction block: %v", err)
	require.NoError(t, tx.Rollback(ctx))

	// A concurrent build cancelled while it waits for a writer leaves an
	// INVALID index.
	release := writer()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SET statement_timeout = '500ms'`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, stmts[2])
	require.True(t, errors.As(err, &pe) && pe.Code == "57014", "cancelled by statement_timeout: %v", err)
	_, err = conn.Exec(ctx, `RESET statement_timeout`)
	require.NoError(t, err)
	conn.Release()
	release()
	var valid bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`,
		schema+"."+store.IndexName(spec.Table, "reap")).Scan(&valid))
	require.False(t, valid, "the cancelled build left an INVALID index")
	require.NoError(t, store.ExecDDL(ctx, d, stmts[2:3]), "IF NOT EXISTS skips the INVALID index")

	reap := fmt.Sprintf(`%q.%q`, schema, store.IndexName(spec.Table, "reap"))
	missing, err := ix.MissingIndexesWith(ctx, online)
	require.NoError(t, err)
	require.Contains(t, missing, `DROP INDEX CONCURRENTLY IF EXISTS `+reap)
	require.Contains(t, missing, stmts[2])
	plain, err := cs.MissingIndexes(ctx)
	require.NoError(t, err)
	require.Contains(t, plain, `DROP INDEX IF EXISTS `+reap)
	require.NoError(t, store.ExecDDL(ctx, d, missing))
	missing, err = ix.MissingIndexesWith(ctx, online)
	require.NoError(t, err)
	require.Empty(t, missing)
	require.NoError(t, pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`,
		schema+"."+store.IndexName(spec.Table, "reap")).Scan(&valid))
	require.True(t, valid)
}

// waitForIndexBuild waits until a session running stmt waits for a lock.
func waitForIndexBuild(ctx context.Context, t *testing.T, pool *pgxpool.Pool, stmt string) {
	t.Helper()
	for {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE query = $1 AND wait_event_type = 'Lock'`, stmt).Scan(&n))
		if n > 0 {
			return
		}
		require.NoError(t, ctx.Err())
		time.Sleep(10 * time.Millisecond)
	}
}

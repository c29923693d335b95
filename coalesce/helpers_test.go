package coalesce_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// forEachEngine runs fn as a parallel subtest per engine, on a fresh
// database with the coalescer's tables and the test's state table.
func forEachEngine(t *testing.T, fn func(t *testing.T, c *testengine.Conn)) {
	t.Helper()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			c := testengine.Open(t, e, 8)
			setup(t, c)
			fn(t, c)
		})
	}
}

// setup creates the coalescer's tables and the state table the test folds
// into: state(k, total, writes, changes).
func setup(t testing.TB, c *testengine.Conn) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, coalesce.CreateTables(ctx, c.Dialect, c.DB, coalesce.Config{}))
	// Twice: the tables and indexes exist the second time.
	require.NoError(t, coalesce.CreateTables(ctx, c.Dialect, c.DB, coalesce.Config{}))
	_, err := c.DB.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS state (k VARCHAR(191) NOT NULL PRIMARY KEY,
		total BIGINT NOT NULL, writes BIGINT NOT NULL, changes BIGINT NOT NULL)`)
	require.NoError(t, err)
}

// sumFold adds the changes' payloads (decimal integers) to the key's state
// row in the fold's transaction, counting the writes and the changes.
func sumFold(dollar bool) coalesce.FoldFunc {
	update := testengine.Rebind("UPDATE state SET total = total + ?, writes = writes + 1, changes = changes + ? WHERE k = ?", dollar)
	insert := testengine.Rebind("INSERT INTO state (k, total, writes, changes) VALUES (?, ?, 1, ?)", dollar)
	return func(ctx context.Context, tx *sql.Tx, key string, changes []coalesce.Record) error {
		if len(changes) == 0 {
			return errors.New("empty fold")
		}
		var sum int64
		for _, ch := range changes {
			d, err := strconv.ParseInt(string(ch.Payload), 10, 64)
			if err != nil {
				return err
			}
			sum += d
		}
		res, err := tx.ExecContext(ctx, update, sum, len(changes), key)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		_, err = tx.ExecContext(ctx, insert, key, sum, len(changes))
		return err
	}
}

// stateOf reads a key's state row (zeros when missing).
func stateOf(t testing.TB, c *testengine.Conn, key string) (total, writes, changes int64) {
	t.Helper()
	err := c.DB.QueryRow(testengine.Rebind("SELECT total, writes, changes FROM state WHERE k = ?", c.Dollar), key).Scan(&total, &writes, &changes)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, 0
	}
	require.NoError(t, err)
	return total, writes, changes
}

// count runs a COUNT(*) query.
func count(t testing.TB, c *testengine.Conn, q string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, c.DB.QueryRow(testengine.Rebind(q, c.Dollar), args...).Scan(&n))
	return n
}

// newCoalescer returns a coalescer of the default tables.
func newCoalescer(t testing.TB, c *testengine.Conn, cfg coalesce.Config) *coalesce.Coalescer {
	t.Helper()
	co, err := coalesce.New(c.Dialect, c.DB, cfg)
	require.NoError(t, err)
	return co
}

// newFlusher returns a flusher of co folding with sumFold.
func newFlusher(t testing.TB, c *testengine.Conn, co *coalesce.Coalescer, fc coalesce.FlusherConfig) *coalesce.Flusher {
	t.Helper()
	if fc.Fold == nil {
		fc.Fold = sumFold(c.Dollar)
	}
	f, err := co.Flusher(fc)
	require.NoError(t, err)
	return f
}

// drain flushes until a round claims nothing and no key is dirty.
func drain(t testing.TB, ctx context.Context, c *testengine.Conn, f *coalesce.Flusher) {
	t.Helper()
	for range 10000 {
		n, err := f.Flush(ctx)
		require.NoError(t, err)
		if n == 0 && count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE status IN ('PENDING', 'PROCESSING')") == 0 {
			return
		}
	}
	t.Fatal("drain: keys still dirty after 10000 rounds")
}

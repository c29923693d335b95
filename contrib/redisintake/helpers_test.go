package redisintake_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/contrib/redisintake"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// bundle is one test's Redis, database, coalescer, intake and flusher.
type bundle struct {
	c      *testengine.Conn
	rdb    *redis.Client
	prefix string
	co     *coalesce.Coalescer
	in     *redisintake.Intake
	f      *coalesce.Flusher
	// backwards counts folds that found a version at or above the one
	// they were to write: an older version about to replace a newer one.
	backwards *atomic.Int64
}

// forEachEngine runs fn as a parallel subtest per engine, each with a
// Redis prefix and a fresh database of its own.
func forEachEngine(t *testing.T, fn func(t *testing.T, b *bundle)) {
	t.Helper()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			rdb, prefix := newRedis(t)
			c := testengine.Open(t, e, 4)
			fn(t, setup(t, c, rdb, prefix, redisintake.Config{}))
		})
	}
}

// setup creates the coalescer's tables and the state table, and returns
// a bundle whose intake has cfg (its Prefix set to prefix).
func setup(t testing.TB, c *testengine.Conn, rdb *redis.Client, prefix string, cfg redisintake.Config) *bundle {
	t.Helper()
	require.NoError(t, createTables(context.Background(), c))
	b := &bundle{c: c, rdb: rdb, prefix: prefix, backwards: new(atomic.Int64)}
	var err error
	b.co, err = coalesce.New(c.Dialect, c.DB, coalesce.Config{})
	require.NoError(t, err)
	cfg.Prefix = prefix
	b.in, err = redisintake.New(rdb, b.co, cfg)
	require.NoError(t, err)
	b.f, err = b.co.Flusher(coalesce.FlusherConfig{Fold: latestFold(c.Dollar, b.backwards), PollMax: 20 * time.Millisecond})
	require.NoError(t, err)
	return b
}

func createTables(ctx context.Context, c *testengine.Conn) error {
	if err := coalesce.CreateTables(ctx, c.Dialect, c.DB, coalesce.Config{}); err != nil {
		return err
	}
	_, err := c.DB.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS user_state (k VARCHAR(191) NOT NULL PRIMARY KEY,
		version BIGINT NOT NULL, state VARCHAR(255) NOT NULL, writes BIGINT NOT NULL)`)
	return err
}

// latestFold writes the newest state of a fold's changes with a
// version-checked write: a row already at that version or above is never
// overwritten, and counted in backwards (the fold then fails).
func latestFold(dollar bool, backwards *atomic.Int64) coalesce.FoldFunc {
	update := testengine.Rebind("UPDATE user_state SET version = ?, state = ?, writes = writes + 1 WHERE k = ? AND version < ?", dollar)
	read := testengine.Rebind("SELECT version FROM user_state WHERE k = ?", dollar)
	insert := testengine.Rebind("INSERT INTO user_state (k, version, state, writes) VALUES (?, ?, ?, 1)", dollar)
	return func(ctx context.Context, tx *sql.Tx, key string, changes []coalesce.Record) error {
		last, ok := redisintake.Latest(changes)
		if !ok {
			return errors.New("empty fold")
		}
		res, err := tx.ExecContext(ctx, update, last.Seq, string(last.Payload), key, last.Seq)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var cur int64
		err = tx.QueryRowContext(ctx, read, key).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			_, err = tx.ExecContext(ctx, insert, key, last.Seq, string(last.Payload))
			return err
		}
		if err != nil {
			return err
		}
		backwards.Add(1)
		return fmt.Errorf("key %q: fold of version %d found version %d in SQL", key, last.Seq, cur)
	}
}

// stateOf reads a key's row of the state table (found false when none).
func (b *bundle) stateOf(t testing.TB, key string) (version int64, state string, writes int64, found bool) {
	t.Helper()
	err := b.c.DB.QueryRow(testengine.Rebind("SELECT version, state, writes FROM user_state WHERE k = ?", b.c.Dollar), key).
		Scan(&version, &state, &writes)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", 0, false
	}
	require.NoError(t, err)
	return version, state, writes, true
}

// count runs a COUNT(*) query.
func (b *bundle) count(t testing.TB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.c.DB.QueryRow(testengine.Rebind(q, b.c.Dollar), args...).Scan(&n))
	return n
}

// settle drains Redis and flushes the coalescer by hand until neither has
// a dirty key.
func (b *bundle) settle(t testing.TB, ctx context.Context) {
	t.Helper()
	for range 10000 {
		moved, err := b.in.Drain(ctx)
		require.NoError(t, err)
		flushed, err := b.f.Flush(ctx)
		require.NoError(t, err)
		if moved == 0 && flushed == 0 && b.idle(t, ctx) {
			return
		}
	}
	t.Fatal("settle: keys still dirty after 10000 rounds")
}

// idle reports whether neither Redis nor the keys table has a dirty key.
func (b *bundle) idle(t testing.TB, ctx context.Context) bool {
	t.Helper()
	dirty, _, err := b.in.Backlog(ctx)
	require.NoError(t, err)
	sqlDirty, _, err := b.co.Backlog(ctx)
	require.NoError(t, err)
	return dirty == 0 && sqlDirty == 0
}

// state is the state a test writes for a key's version.
func state(key string, v int64) []byte { return fmt.Appendf(nil, "%s@%d", key, v) }

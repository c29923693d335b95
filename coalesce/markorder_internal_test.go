package coalesce

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/lockwait"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestMarksLockKeysInByteOrder: the dirty marks of several keys lock
// their rows in the keys' byte order, the order in which a flush folding
// several keys in one transaction (FlusherConfig.KeysPerTx) locks them,
// whatever the rows' physical order. The row of "b" is written before
// that of "a"; a transaction locks "a", a mark of both keys starts and
// waits, and the transaction then locks "b": the mark must not hold it.
// (Locked in the physical order, the mark held "b" while it waited for
// "a", and the server found a deadlock.)
func TestMarksLockKeysInByteOrder(t *testing.T) {
	lockOrderTest(t, func(ctx context.Context, co *Coalescer) error {
		_, err := co.db.ExecContext(ctx, co.bq.bumpProcessingKeys.render(co.e, 2), "a", 7, "b", 7)
		return err
	}, "SELECT COUNT(*) FROM coalesce_keys WHERE version = 8")
}

// TestAcceptBatchTxMarksInByteOrder: as TestMarksLockKeysInByteOrder, for
// the marks AcceptBatchTx writes in the caller's transaction, given its
// changes of "b" before those of "a".
func TestAcceptBatchTxMarksInByteOrder(t *testing.T) {
	lockOrderTest(t, func(ctx context.Context, co *Coalescer) error {
		tx, err := co.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		res, err := co.AcceptBatchTx(ctx, tx, []Change{{Key: "b", EventID: "e-b", Payload: []byte("1")}, {Key: "a", EventID: "e-a", Payload: []byte("1")}})
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
		return tx.Commit()
	}, "SELECT COUNT(*) FROM coalesce_keys WHERE version = 8")
}

// TestStartFlushLocksKeysInByteOrder: as TestMarksLockKeysInByteOrder,
// for the statement with which a flush records the versions its claimed
// keys start from.
func TestStartFlushLocksKeysInByteOrder(t *testing.T) {
	lockOrderTest(t, func(ctx context.Context, co *Coalescer) error {
		_, err := co.db.ExecContext(ctx, co.sq.startFlush, "tok-1")
		return err
	}, "SELECT COUNT(*) FROM coalesce_keys WHERE flush_version = 7")
}

// lockOrderTest writes the rows of the keys "b" and then "a", processing
// at version 7 under the token "tok-1"; locks the row of "a" in a
// transaction; runs mark, which must wait for it; and then locks "b" in
// the same transaction, which must not wait for mark. It then commits and
// checks that mark wrote both rows: the query done counts 2.
func lockOrderTest(t *testing.T, mark func(context.Context, *Coalescer) error, done string) {
	for _, e := range testengine.All {
		if e.Name == "sqlite" {
			continue // one writer: no row locks
		}
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := testengine.Open(t, e, 4)
			cfg := Config{}
			require.NoError(t, CreateTables(ctx, c.Dialect, c.DB, cfg))
			co, err := New(c.Dialect, c.DB, cfg)
			require.NoError(t, err)
			for _, k := range []string{"b", "a"} {
				_, err := c.DB.ExecContext(ctx, testengine.Rebind("INSERT INTO coalesce_keys (change_key, status, version, token) VALUES (?, 'PROCESSING', 7, 'tok-1')", c.Dollar), k)
				require.NoError(t, err)
			}
			lock := testengine.Rebind("UPDATE coalesce_keys SET folded = folded + 1 WHERE change_key = ?", c.Dollar)

			tx, err := c.DB.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			_, err = tx.ExecContext(ctx, lock, "a")
			require.NoError(t, err)

			sess, err := lockwait.Of(ctx, c.DB, tx, c.Dialect.Capabilities().Engine)
			require.NoError(t, err)
			marked := make(chan error, 1)
			go func() { marked <- mark(ctx, co) }()
			// The mark has locked what it locks before "a" once the server
			// shows it waiting for the transaction's lock.
			require.NoError(t, sess.Await(ctx, 10*time.Second, func() error {
				select {
				case err := <-marked:
					return fmt.Errorf("the mark did not wait for the row of a: %v", err)
				default:
					return nil
				}
			}))
			locked := make(chan error, 1)
			go func() {
				_, err := tx.ExecContext(ctx, lock, "b")
				locked <- err
			}()
			select {
			case err := <-locked:
				require.NoError(t, err, "locking b after a")
			case <-time.After(5 * time.Second):
				t.Fatal("the row of b is held by the mark waiting for a: locked out of byte order")
			}
			require.NoError(t, tx.Commit())
			require.NoError(t, <-marked)
			require.EqualValues(t, 2, count(t, c, done), "the mark wrote both keys' rows")
		})
	}
}

// count runs a COUNT(*) query.
func count(t *testing.T, c *testengine.Conn, q string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, c.DB.QueryRow(q).Scan(&n))
	return n
}

package coalesce_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestChangeDuringFold: a change of a key accepted while that key's fold
// runs is not part of the fold (it read the changes before), keeps the key
// dirty when the fold's transaction completes it, and is folded exactly
// once by the next flush. The change is accepted from another connection
// while the fold's transaction is open; where the engine makes that accept
// wait for the fold's locks (SQLite's one writer; InnoDB's locks on the
// changes read), it lands just after the commit instead, and the same must
// hold. The accept is given up to a second to land inside the fold.
func TestChangeDuringFold(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		for i, p := range []string{"1", "2"} {
			_, err := co.Accept(ctx, coalesce.Change{Key: "u1", EventID: "before-" + p, Source: "s", Seq: int64(i + 1), Payload: []byte(p)})
			require.NoError(t, err)
		}

		sum := sumFold(c.Dollar)
		accepted := make(chan error, 1)
		calls := 0
		var inFold bool // the accept returned while the first fold ran
		f := newFlusher(t, c, co, coalesce.FlusherConfig{Fold: func(ctx context.Context, tx *sql.Tx, key string, recs []coalesce.Record) error {
			calls++
			if calls == 1 {
				require.Len(t, recs, 2, "the first fold reads the two changes accepted before it")
				go func() {
					_, err := co.Accept(context.Background(), coalesce.Change{Key: "u1", EventID: "during", Source: "s", Seq: 3, Payload: []byte("40")})
					accepted <- err
				}()
				select {
				case err := <-accepted:
					require.NoError(t, err)
					inFold = true
				case <-time.After(time.Second):
				}
			}
			return sum(ctx, tx, key, recs)
		}})

		n, err := f.Flush(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		if !inFold {
			require.NoError(t, <-accepted)
		}
		t.Logf("the change landed %s", map[bool]string{true: "inside the fold's transaction", false: "after the fold's commit (the engine made it wait)"}[inFold])

		// The first fold wrote the two changes it read; the third waits.
		total, writes, changes := stateOf(t, c, "u1")
		require.Equal(t, [3]int64{3, 1, 2}, [3]int64{total, writes, changes})
		acc, per, err := co.Versions(ctx, "u1")
		require.NoError(t, err)
		require.Greater(t, acc, per, "the change accepted during the fold is not persisted yet")
		require.EqualValues(t, 1, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE folded_at IS NULL"))
		require.EqualValues(t, 1, count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE status = 'PENDING'"),
			"the key stays dirty: its completion by version saw the change")

		// The next flush folds it, once.
		drain(t, ctx, c, f)
		require.Equal(t, 2, calls)
		total, writes, changes = stateOf(t, c, "u1")
		require.Equal(t, [3]int64{43, 2, 3}, [3]int64{total, writes, changes})
		acc, per, err = co.Versions(ctx, "u1")
		require.NoError(t, err)
		require.Equal(t, acc, per)
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE folded_at IS NULL"))
	})
}

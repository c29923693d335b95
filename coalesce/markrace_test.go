package coalesce_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestMarkRacesFlushCompletion: a change commits while its key's flush is
// folding the changes it read before; the dirty mark reads the key's row
// as being flushed with no bump since the flush started, so it must bump
// the version for the flush's ack to requeue the key. But the flush
// completes the key (its ack sets it done) between the mark's read and
// its write. The mark's compare-and-set must then match nothing (the row
// is no longer being flushed), read again and mark the done key pending:
// a bump of a done row's version would leave the change unfolded for
// good.
//
// The fold is held until the mark has read, then let go, and the mark
// waits for the flush to return before it writes. Where the engine makes
// the change's insert wait for the fold's transaction (SQLite's single
// writer), the fold is let go after a second instead; the change then
// commits after the flush and the race does not happen. The other engines
// must run the race (their fold is held up to 20 s, for loaded machines).
func TestMarkRacesFlushCompletion(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		inFold, release := make(chan struct{}), make(chan struct{})
		hold := 20 * time.Second
		if c.Engine == testengine.SQLite {
			hold = time.Second
		}
		var holdOnce sync.Once
		sum := sumFold(c.Dollar)
		f := newFlusher(t, c, co, coalesce.FlusherConfig{Fold: func(ctx context.Context, tx *sql.Tx, key string, recs []coalesce.Record) error {
			holdOnce.Do(func() {
				close(inFold)
				select {
				case <-release:
				case <-time.After(hold):
				}
			})
			return sum(ctx, tx, key, recs)
		}})

		_, err := co.Accept(ctx, coalesce.Change{Key: "k", EventID: "e1", Payload: []byte("1")})
		require.NoError(t, err)
		var flushErr error
		flushed := make(chan struct{}) // closed once Flush returned, flushErr set
		go func() {
			defer close(flushed)
			_, flushErr = f.Flush(ctx)
		}()
		<-inFold

		// The hook runs on Accept's goroutine, between the mark's read and
		// its write: it lets the fold go and waits for the flush to end.
		var markOnce sync.Once
		raced := false
		coalesce.SetMarkRead(co, func(string) {
			markOnce.Do(func() {
				select {
				case <-flushed: // the change committed after the flush
				default:
					raced = true
				}
				close(release)
				<-flushed
			})
		})
		_, err = co.Accept(ctx, coalesce.Change{Key: "k", EventID: "e2", Payload: []byte("2")})
		coalesce.SetMarkRead(co, nil)
		require.NoError(t, err)
		<-flushed
		require.NoError(t, flushErr)
		t.Logf("the mark read the key while its flush folded: %v", raced)
		if c.Engine != testengine.SQLite {
			require.True(t, raced, "the change's commit waited for the fold: the race was not run")
		}

		var status string
		require.NoError(t, c.DB.QueryRow(testengine.Rebind("SELECT status FROM coalesce_keys WHERE change_key = ?", c.Dollar), "k").Scan(&status))
		assert.Equal(t, "PENDING", status, "the key of an unfolded change is not dirty")
		drain(t, ctx, c, f)
		total, _, changes := stateOf(t, c, "k")
		assert.EqualValues(t, 3, total, "the state misses a change")
		assert.EqualValues(t, 2, changes)
		assert.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE folded_at IS NULL"), "changes left unfolded")
	})
}

package coalesce_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// With Workers, Run's loops fold different keys at once: the first fold
// waits, inside its transaction, until another key's fold has started,
// which one loop (folding its batch's keys one after another, one batch at
// a time) could never do. On SQLite the single writer serializes the
// folds' transactions, so there the first fold does not wait; every change
// is folded once on every engine.
func TestFlusherWorkersFoldAtOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		parallel := c.Engine != testengine.SQLite
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		co := newCoalescer(t, c, coalesce.Config{})
		for i, key := range []string{"a", "b", "c"} {
			_, err := co.Accept(ctx, coalesce.Change{Key: key, EventID: fmt.Sprint("e", i), Payload: []byte("1")})
			require.NoError(t, err)
		}
		var first atomic.Value // the key of the first fold
		other := make(chan struct{})
		var closed, waitedInVain atomic.Bool
		sum := sumFold(c.Dollar)
		f := newFlusher(t, c, co, coalesce.FlusherConfig{
			Workers: 3, BatchSize: 1, PollMin: time.Millisecond, PollMax: 10 * time.Millisecond,
			Fold: func(ctx context.Context, tx *sql.Tx, key string, changes []coalesce.Record) error {
				if first.CompareAndSwap(nil, key) && parallel {
					select {
					case <-other:
					case <-time.After(30 * time.Second):
						waitedInVain.Store(true)
						return errors.New("no other key was folded while this fold waited")
					}
				} else if first.Load() != key && closed.CompareAndSwap(false, true) {
					close(other)
				}
				return sum(ctx, tx, key, changes)
			},
		})
		done := make(chan error, 1)
		go func() { done <- f.Run(ctx) }()
		deadline := time.Now().Add(time.Minute)
		for count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE folded_at IS NULL") > 0 {
			require.True(t, time.Now().Before(deadline), "changes still unfolded after a minute")
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		require.NoError(t, <-done)
		if parallel {
			require.False(t, waitedInVain.Load(), "no second key's fold started while the first waited")
			require.True(t, closed.Load())
		}
		for _, key := range []string{"a", "b", "c"} {
			total, writes, changes := stateOf(t, c, key)
			assert.Equal(t, [3]int64{1, 1, 1}, [3]int64{total, writes, changes}, key)
		}
	})
}

// An error that running again cannot cure, met by one loop, ends Run: the
// other loops stop too and Run returns the error.
func TestFlusherWorkersStopOnPermanentError(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		f := newFlusher(t, c, co, coalesce.FlusherConfig{Workers: 4, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
		done := make(chan error, 1)
		go func() { done <- f.Run(ctx) }()
		_, err := c.DB.ExecContext(ctx, "DROP TABLE coalesce_keys")
		require.NoError(t, err)
		select {
		case err := <-done:
			require.Error(t, err)
			require.True(t, dialect.IsPermanent(err), "%v", err)
		case <-time.After(time.Minute):
			t.Fatal("Run did not return after its table was dropped")
		}
	})
}

func TestFlusherWorkersBounds(t *testing.T) {
	c := testengine.Open(t, testengine.All[0], 2)
	co := newCoalescer(t, c, coalesce.Config{})
	for _, n := range []int{-1, coalesce.MaxFlushWorkers + 1} {
		_, err := co.Flusher(coalesce.FlusherConfig{Fold: sumFold(c.Dollar), Workers: n})
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "Workers %d", n)
		require.ErrorContains(t, err, "Workers")
	}
}

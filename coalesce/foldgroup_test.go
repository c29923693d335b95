package coalesce_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/observe"
)

// foldLog records the folds of a flusher: which keys each transaction
// folded.
type foldLog struct {
	mu  sync.Mutex
	txs map[*sql.Tx][]string
}

func (l *foldLog) wrap(fold coalesce.FoldFunc) coalesce.FoldFunc {
	return func(ctx context.Context, tx *sql.Tx, key string, recs []coalesce.Record) error {
		l.mu.Lock()
		if l.txs == nil {
			l.txs = map[*sql.Tx][]string{}
		}
		l.txs[tx] = append(l.txs[tx], key)
		l.mu.Unlock()
		return fold(ctx, tx, key, recs)
	}
}

// widest returns the most keys one transaction folded.
func (l *foldLog) widest() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, keys := range l.txs {
		n = max(n, len(keys))
	}
	return n
}

// TestKeysPerTxExactlyOnce: TestExactlyOnce's writers and three flushers
// folding up to four keys per transaction: every change is folded exactly
// once, and transactions did fold several keys.
func TestKeysPerTxExactlyOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		co := newCoalescer(t, c, coalesce.Config{})
		var log foldLog
		var fcs []coalesce.FlusherConfig
		for i := range 3 {
			fcs = append(fcs, coalesce.FlusherConfig{
				BatchSize: 8, KeysPerTx: 4, Linger: time.Duration(i) * 5 * time.Millisecond, PollMax: 50 * time.Millisecond,
				Fold: log.wrap(sumFold(c.Dollar)),
			})
		}
		loadAndDrain(t, c, co, "g", 8, 25, fcs...)
		require.Greater(t, log.widest(), 1, "no transaction folded more than one key")
		require.LessOrEqual(t, log.widest(), 4, "a transaction folded more than KeysPerTx keys")
	})
}

// acceptKeys accepts one change of payload 1 for each key.
func acceptKeys(t *testing.T, ctx context.Context, co *coalesce.Coalescer, prefix string, keys ...string) {
	t.Helper()
	for _, k := range keys {
		_, err := co.Accept(ctx, coalesce.Change{Key: k, EventID: prefix + k, Payload: []byte("1")})
		require.NoError(t, err)
	}
}

// folds records the observed fold events by key.
type folds struct {
	mu     sync.Mutex
	events map[string][]observe.Event
}

func (o *folds) Observe(_ context.Context, e observe.Event) {
	if e.Op != coalesce.OpFold {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.events == nil {
		o.events = map[string][]observe.Event{}
	}
	k, _ := e.Key.(string)
	o.events[k] = append(o.events[k], e)
}

func (o *folds) of(key string) []observe.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observe.Event(nil), o.events[key]...)
}

// TestKeysPerTxFoldFailure: a fold that fails in a group of four keys
// rolls the group back; the four are then folded one per transaction, so
// the three good keys are folded once and only the failing key is failed
// (its attempt counted, its error stored, retried after the backoff).
func TestKeysPerTxFoldFailure(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		obs := &folds{}
		co := newCoalescer(t, c, coalesce.Config{Observer: obs})
		acceptKeys(t, ctx, co, "e-", "a", "b", "c", "d")
		sum := sumFold(c.Dollar)
		var log foldLog
		calls := map[string]int{}
		f := newFlusher(t, c, co, coalesce.FlusherConfig{
			BatchSize: 4, KeysPerTx: 4, Backoff: func(int) time.Duration { return time.Hour },
			Fold: log.wrap(func(ctx context.Context, tx *sql.Tx, key string, recs []coalesce.Record) error {
				calls[key]++
				if key == "c" {
					return errors.New("no such account")
				}
				return sum(ctx, tx, key, recs)
			}),
		})
		n, err := f.Flush(ctx)
		require.NoError(t, err)
		require.Equal(t, 4, n)
		require.Equal(t, 3, log.widest(), "the group folded a, b and c (in key order) before c failed")
		require.Equal(t, map[string]int{"a": 2, "b": 2, "c": 2, "d": 1}, calls,
			"the group's keys were folded again one per transaction")
		for _, k := range []string{"a", "b", "d"} {
			total, writes, changes := stateOf(t, c, k)
			require.Equal(t, [3]int64{1, 1, 1}, [3]int64{total, writes, changes}, "key %s folded once", k)
		}
		total, writes, _ := stateOf(t, c, "c")
		require.Zero(t, total+writes, "the failing key's fold was rolled back")
		var attempts int64
		var lastErr sql.NullString
		require.NoError(t, c.DB.QueryRow(testengine.Rebind("SELECT attempts, last_error FROM coalesce_keys WHERE change_key = ?", c.Dollar), "c").Scan(&attempts, &lastErr))
		require.Equal(t, int64(1), attempts, "one failed fold counts one attempt")
		require.Contains(t, lastErr.String, "no such account")
		require.EqualValues(t, 3, count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE status = 'DONE'"))
		require.EqualValues(t, 1, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE folded_at IS NULL"))
		for _, k := range []string{"a", "b", "d"} {
			ev := obs.of(k)
			require.Len(t, ev, 1, "key %s: one fold event, of its own transaction", k)
			require.NoError(t, ev[0].Err)
			require.Equal(t, 1, ev[0].Rows)
		}
		ev := obs.of("c")
		require.Len(t, ev, 1)
		require.ErrorContains(t, ev[0].Err, "no such account")
	})
}

// TestKeysPerTxLostKey: when the ack of a group finds one of its keys
// lost (taken by a reaper; here the group's own transaction takes it, so
// that every engine can run the test), nothing of the group commits: the
// other keys go back to pending, and the next flushes fold every key
// exactly once.
func TestKeysPerTxLostKey(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		obs := &folds{}
		co := newCoalescer(t, c, coalesce.Config{Observer: obs})
		acceptKeys(t, ctx, co, "e-", "a", "b", "c")
		sum := sumFold(c.Dollar)
		reap := testengine.Rebind("UPDATE coalesce_keys SET status = 'PENDING', token = NULL WHERE change_key = ?", c.Dollar)
		first := true
		f := newFlusher(t, c, co, coalesce.FlusherConfig{
			BatchSize: 3, KeysPerTx: 3,
			Fold: func(ctx context.Context, tx *sql.Tx, key string, recs []coalesce.Record) error {
				if first && key == "c" {
					first = false
					if _, err := tx.ExecContext(ctx, reap, "b"); err != nil {
						return err
					}
				}
				return sum(ctx, tx, key, recs)
			},
		})
		n, err := f.Flush(ctx)
		require.NoError(t, err, "a key lost to a reaper is not an error of the flush")
		require.Equal(t, 3, n)
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM state"), "nothing of the group committed")
		require.EqualValues(t, 2, count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE status = 'PENDING'"),
			"the keys not lost went back to pending")
		// The reaper's own write, which the test made in the rolled-back
		// transaction, as a reaper commits it.
		_, err = c.DB.ExecContext(ctx, reap, "b")
		require.NoError(t, err)
		require.EqualValues(t, 3, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE folded_at IS NULL"))
		require.ErrorIs(t, obs.of("b")[0].Err, dialect.ErrClaimLost)
		for _, k := range []string{"a", "c"} {
			e := obs.of(k)[0].Err
			require.Error(t, e, "key %s", k)
			require.NotErrorIs(t, e, dialect.ErrClaimLost, "key %s was not lost", k)
		}

		drain(t, ctx, c, f)
		for _, k := range []string{"a", "b", "c"} {
			total, writes, changes := stateOf(t, c, k)
			require.Equal(t, [3]int64{1, 1, 1}, [3]int64{total, writes, changes}, "key %s folded once", k)
		}
	})
}

// TestKeysPerTxMaxChanges: a key of a group with more than MaxChanges
// unfolded changes is folded MaxChanges at a time and goes back to
// pending for the rest, as it does alone.
func TestKeysPerTxMaxChanges(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		for i := range 5 {
			acceptKeys(t, ctx, co, "e"+strconv.Itoa(i)+"-", "big")
		}
		acceptKeys(t, ctx, co, "e-", "small")
		f := newFlusher(t, c, co, coalesce.FlusherConfig{BatchSize: 2, KeysPerTx: 2, MaxChanges: 2})
		n, err := f.Flush(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		total, _, _ := stateOf(t, c, "big")
		require.EqualValues(t, 2, total, "MaxChanges of the big key's changes")
		total, _, _ = stateOf(t, c, "small")
		require.EqualValues(t, 1, total)
		require.EqualValues(t, 1, count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE status = 'PENDING'"))
		drain(t, ctx, c, f)
		total, writes, changes := stateOf(t, c, "big")
		require.Equal(t, [3]int64{5, 3, 5}, [3]int64{total, writes, changes})
	})
}

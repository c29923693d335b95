package coalesce_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestAcceptAndFlush: changes of two keys are accepted, a resent event id
// returns the first receipt, a stale sequence is refused with the current
// one, and a flush folds each key's changes into one state write, after
// which the versions say everything is persisted.
func TestAcceptAndFlush(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		r1, err := co.Accept(ctx, coalesce.Change{Key: "u1", EventID: "e1", Source: "phone", Seq: 1, Payload: []byte("5")})
		require.NoError(t, err)
		require.False(t, r1.Duplicate)
		require.Positive(t, r1.ID)
		r2, err := co.Accept(ctx, coalesce.Change{Key: "u1", EventID: "e2", Source: "phone", Seq: 3, Payload: []byte("7")})
		require.NoError(t, err)
		require.Greater(t, r2.ID, r1.ID)

		// A resend of e1, even with other fields, is the first receipt.
		dup, err := co.Accept(ctx, coalesce.Change{Key: "u1", EventID: "e1", Source: "phone", Seq: 9, Payload: []byte("100")})
		require.NoError(t, err)
		require.Equal(t, coalesce.Receipt{Key: "u1", EventID: "e1", Source: "phone", Seq: 1, ID: r1.ID, Duplicate: true}, dup)

		// Seq 2 and 3 are not above 3.
		for _, seq := range []int64{2, 3} {
			_, err = co.Accept(ctx, coalesce.Change{Key: "u1", EventID: "e-stale", Source: "phone", Seq: seq, Payload: []byte("1")})
			require.ErrorIs(t, err, coalesce.ErrStale)
			var stale *coalesce.StaleError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, coalesce.StaleError{Key: "u1", Source: "phone", Seq: seq, Current: 3}, *stale)
		}
		// Another source, another key and no source at all are independent.
		_, err = co.Accept(ctx, coalesce.Change{Key: "u1", EventID: "e3", Source: "laptop", Seq: 1, Payload: []byte("-2")})
		require.NoError(t, err)
		_, err = co.Accept(ctx, coalesce.Change{Key: "u2", EventID: "e4", Payload: []byte("11")})
		require.NoError(t, err)
		_, err = co.Accept(ctx, coalesce.Change{Key: "u2", EventID: "e5", Payload: []byte("1")})
		require.NoError(t, err)

		acc, per, err := co.Versions(ctx, "u1")
		require.NoError(t, err)
		require.Equal(t, [2]int64{3, 0}, [2]int64{acc, per})
		dirty, oldest, err := co.Backlog(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(2), dirty)
		require.GreaterOrEqual(t, oldest, time.Duration(0))

		f := newFlusher(t, c, co, coalesce.FlusherConfig{})
		drain(t, ctx, c, f)
		total, writes, changes := stateOf(t, c, "u1")
		require.Equal(t, [3]int64{10, 1, 3}, [3]int64{total, writes, changes})
		total, writes, changes = stateOf(t, c, "u2")
		require.Equal(t, [3]int64{12, 1, 2}, [3]int64{total, writes, changes})
		acc, per, err = co.Versions(ctx, "u1")
		require.NoError(t, err)
		require.Equal(t, [2]int64{3, 3}, [2]int64{acc, per})
		acc, per, err = co.Versions(ctx, "nobody")
		require.NoError(t, err)
		require.Equal(t, [2]int64{0, 0}, [2]int64{acc, per})
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE folded_at IS NULL"))

		// A duplicate after the flush is still the first receipt, and
		// folds nothing more.
		dup, err = co.Accept(ctx, coalesce.Change{Key: "u2", EventID: "e4", Payload: []byte("11")})
		require.NoError(t, err)
		require.True(t, dup.Duplicate)
		drain(t, ctx, c, f)
		total, writes, _ = stateOf(t, c, "u2")
		require.Equal(t, [2]int64{12, 1}, [2]int64{total, writes})
	})
}

// TestAcceptTx: a change accepted in the caller's transaction exists only
// if it commits, and is then folded.
func TestAcceptTx(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		tx, err := c.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = co.AcceptTx(ctx, tx, coalesce.Change{Key: "k", EventID: "rolled-back", Source: "s", Seq: 1, Payload: []byte("1000")})
		require.NoError(t, err)
		require.NoError(t, tx.Rollback())

		tx, err = c.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		r, err := co.AcceptTx(ctx, tx, coalesce.Change{Key: "k", EventID: "committed", Source: "s", Seq: 1, Payload: []byte("4")})
		require.NoError(t, err)
		require.False(t, r.Duplicate)
		require.NoError(t, tx.Commit())

		// Twice in transactions: the second is a duplicate.
		tx, err = c.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		r, err = co.AcceptTx(ctx, tx, coalesce.Change{Key: "k", EventID: "committed", Source: "s", Seq: 1, Payload: []byte("4")})
		require.NoError(t, err)
		require.True(t, r.Duplicate)
		require.NoError(t, tx.Commit())

		drain(t, ctx, c, newFlusher(t, c, co, coalesce.FlusherConfig{}))
		total, writes, changes := stateOf(t, c, "k")
		require.Equal(t, [3]int64{4, 1, 1}, [3]int64{total, writes, changes})
		_, err = co.AcceptTx(ctx, nil, coalesce.Change{Key: "k", EventID: "x"})
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	})
}

// TestBackpressure: over MaxBacklog dirty keys, or with an unfolded change
// older than MaxAge, Accept refuses with RetryAfter and writes nothing;
// after a flush it accepts again.
func TestBackpressure(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{MaxBacklog: 2, PressureInterval: time.Nanosecond, RetryAfter: 3 * time.Second})
		for i, k := range []string{"a", "b", "c"} {
			_, err := co.Accept(ctx, coalesce.Change{Key: k, EventID: "bp" + k, Payload: []byte("1")})
			require.NoError(t, err, "change %d", i)
		}
		_, err := co.Accept(ctx, coalesce.Change{Key: "d", EventID: "bpd", Payload: []byte("1")})
		require.ErrorIs(t, err, coalesce.ErrOverloaded)
		var over *coalesce.OverloadError
		require.ErrorAs(t, err, &over)
		require.Equal(t, 3*time.Second, over.RetryAfter)
		require.Equal(t, int64(3), over.Backlog)
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE event_id = 'bpd'"))

		f := newFlusher(t, c, co, coalesce.FlusherConfig{})
		drain(t, ctx, c, f)
		_, err = co.Accept(ctx, coalesce.Change{Key: "d", EventID: "bpd", Payload: []byte("1")})
		require.NoError(t, err)

		// Age: a change older than MaxAge (measured on the database clock)
		// refuses; an operator sees it in Backlog.
		aged := newCoalescer(t, c, coalesce.Config{MaxAge: 300 * time.Millisecond, PressureInterval: time.Nanosecond})
		start := time.Now()
		time.Sleep(400 * time.Millisecond)
		_, oldest, err := co.Backlog(ctx)
		require.NoError(t, err)
		require.GreaterOrEqual(t, oldest, 300*time.Millisecond, "measured %v after %v", oldest, time.Since(start))
		_, err = aged.Accept(ctx, coalesce.Change{Key: "e", EventID: "bpe", Payload: []byte("1")})
		require.ErrorAs(t, err, &over)
		require.Equal(t, coalesce.DefaultRetryAfter, over.RetryAfter)
		require.Greater(t, over.OldestAge, 300*time.Millisecond)
		drain(t, ctx, c, f)
		_, err = aged.Accept(ctx, coalesce.Change{Key: "e", EventID: "bpe", Payload: []byte("1")})
		require.NoError(t, err)
	})
}

// TestFoldFailure: a fold that fails retries its key after the backoff
// and parks it at MaxAttempts with the error stored; new changes of a
// parked key wait; unparked, the key folds everything once.
func TestFoldFailure(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		boom := errors.New("state service down")
		fails := 0
		ok := sumFold(c.Dollar)
		failing := true
		f := newFlusher(t, c, co, coalesce.FlusherConfig{
			MaxAttempts: 2, Backoff: func(int) time.Duration { return time.Millisecond },
			Fold: func(ctx context.Context, tx *sql.Tx, key string, chs []coalesce.Record) error {
				if failing {
					fails++
					return boom
				}
				return ok(ctx, tx, key, chs)
			},
		})
		_, err := co.Accept(ctx, coalesce.Change{Key: "p", EventID: "p1", Payload: []byte("2")})
		require.NoError(t, err)
		deadline := time.Now().Add(20 * time.Second)
		for count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE status = 'FAILED'") == 0 {
			require.True(t, time.Now().Before(deadline), "key not parked")
			_, err := f.Flush(ctx)
			require.NoError(t, err)
			time.Sleep(5 * time.Millisecond)
		}
		require.Equal(t, 2, fails)
		var lastErr string
		require.NoError(t, c.DB.QueryRow("SELECT last_error FROM coalesce_keys").Scan(&lastErr))
		require.Contains(t, lastErr, "state service down")
		total, writes, _ := stateOf(t, c, "p")
		require.Zero(t, total+writes)

		// Parked: a new change waits.
		_, err = co.Accept(ctx, coalesce.Change{Key: "p", EventID: "p2", Payload: []byte("3")})
		require.NoError(t, err)
		n, err := f.Flush(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
		// A parked key's changes do not age the backlog.
		dirty, oldest, err := co.Backlog(ctx)
		require.NoError(t, err)
		require.Equal(t, [2]int64{0, 0}, [2]int64{dirty, int64(oldest)})

		failing = false
		un, err := f.Claimer().Unpark(ctx, true)
		require.NoError(t, err)
		require.Equal(t, int64(1), un)
		drain(t, ctx, c, f)
		total, writes, changes := stateOf(t, c, "p")
		require.Equal(t, [3]int64{5, 1, 2}, [3]int64{total, writes, changes})
	})
}

// TestUnstrand: a change recorded by a process that died before marking
// its key (simulated by setting the key back to done) is found by
// Unstrand once older than StrandAfter, and folded.
func TestUnstrand(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		f := newFlusher(t, c, co, coalesce.FlusherConfig{StrandAfter: 200 * time.Millisecond})
		_, err := co.Accept(ctx, coalesce.Change{Key: "s", EventID: "s1", Payload: []byte("1")})
		require.NoError(t, err)
		drain(t, ctx, c, f)
		_, err = co.Accept(ctx, coalesce.Change{Key: "s", EventID: "s2", Payload: []byte("2")})
		require.NoError(t, err)
		_, err = co.Accept(ctx, coalesce.Change{Key: "new", EventID: "n1", Payload: []byte("3")})
		require.NoError(t, err)
		// The marks never happened: a done row, and no row at all.
		_, err = c.DB.Exec("UPDATE coalesce_keys SET status = 'DONE' WHERE change_key = 's'")
		require.NoError(t, err)
		_, err = c.DB.Exec("DELETE FROM coalesce_keys WHERE change_key = 'new'")
		require.NoError(t, err)
		n, err := f.Unstrand(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "changes younger than StrandAfter are left alone")
		time.Sleep(300 * time.Millisecond)
		n, err = f.Unstrand(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		drain(t, ctx, c, f)
		total, _, _ := stateOf(t, c, "s")
		require.Equal(t, int64(3), total)
		total, _, _ = stateOf(t, c, "new")
		require.Equal(t, int64(3), total)
	})
}

// TestUnstrandMarksAtMost1000Keys: one Unstrand call marks the keys of at
// most 1000 stranded changes, the oldest first, each key once; the next
// calls mark the rest, and every change is folded once.
func TestUnstrandMarksAtMost1000Keys(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		f := newFlusher(t, c, co, coalesce.FlusherConfig{StrandAfter: time.Second})
		// Recorded long ago by processes that died before marking their
		// keys (no key rows): three changes of "dup", the oldest, then one
		// change of each of 1005 keys.
		vals := []string{"('dup', 'dup-1', '1', 1)", "('dup', 'dup-2', '1', 2)", "('dup', 'dup-3', '1', 3)"}
		for i := range 1005 {
			vals = append(vals, fmt.Sprintf("('u-%d', 'u-%d', '1', %d)", i, i, 10+i))
		}
		_, err := c.DB.ExecContext(ctx, "INSERT INTO coalesce_changes (change_key, event_id, payload, accepted_at) VALUES "+strings.Join(vals, ", "))
		require.NoError(t, err)
		var marked []int
		for range 3 {
			n, err := f.Unstrand(ctx)
			require.NoError(t, err)
			marked = append(marked, n)
		}
		// 1000 changes a call: "dup"'s three and 997 others, then the 8
		// left (the marked keys are pending: no longer stranded).
		require.Equal(t, []int{998, 8, 0}, marked)
		drain(t, ctx, c, f)
		total, _, changes := stateOf(t, c, "dup")
		require.Equal(t, [2]int64{3, 3}, [2]int64{total, changes})
		require.Equal(t, int64(1005), count(t, c, "SELECT COUNT(*) FROM state WHERE k LIKE 'u-%' AND total = 1 AND changes = 1"))
	})
}

// TestMaxChanges: a key with more unfolded changes than MaxChanges is
// folded in several transactions, each taking at most MaxChanges in
// order, and none is left behind.
func TestMaxChanges(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		for i := range 7 {
			_, err := co.Accept(ctx, coalesce.Change{Key: "m", EventID: "m" + strconv.Itoa(i), Source: "s", Seq: int64(i + 1), Payload: []byte(strconv.Itoa(i))})
			require.NoError(t, err)
		}
		sum := sumFold(c.Dollar)
		var seqs [][]int64
		f := newFlusher(t, c, co, coalesce.FlusherConfig{MaxChanges: 3, Fold: func(ctx context.Context, tx *sql.Tx, key string, chs []coalesce.Record) error {
			var s []int64
			for _, ch := range chs {
				s = append(s, ch.Seq)
			}
			seqs = append(seqs, s)
			return sum(ctx, tx, key, chs)
		}})
		drain(t, ctx, c, f)
		require.Equal(t, [][]int64{{1, 2, 3}, {4, 5, 6}, {7}}, seqs)
		total, writes, changes := stateOf(t, c, "m")
		require.Equal(t, [3]int64{21, 3, 7}, [3]int64{total, writes, changes})
		acc, per, err := co.Versions(ctx, "m")
		require.NoError(t, err)
		require.Equal(t, [2]int64{7, 7}, [2]int64{acc, per})
	})
}

// TestPrune: with Retain, changes folded longer ago are deleted, unfolded
// and recent ones kept; a resend of a pruned change is accepted again.
func TestPrune(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		f := newFlusher(t, c, co, coalesce.FlusherConfig{Retain: 300 * time.Millisecond})
		for i := range 3 {
			_, err := co.Accept(ctx, coalesce.Change{Key: "r", EventID: "r" + strconv.Itoa(i), Payload: []byte("1")})
			require.NoError(t, err)
		}
		drain(t, ctx, c, f)
		_, err := co.Accept(ctx, coalesce.Change{Key: "r", EventID: "unfolded", Payload: []byte("1")})
		require.NoError(t, err)
		n, err := f.Prune(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "folded too recently")
		time.Sleep(500 * time.Millisecond)
		n, err = f.Prune(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		require.Equal(t, int64(1), count(t, c, "SELECT COUNT(*) FROM coalesce_changes"))
		r, err := co.Accept(ctx, coalesce.Change{Key: "r", EventID: "r0", Payload: []byte("1")})
		require.NoError(t, err)
		require.False(t, r.Duplicate, "its first acceptance was pruned")
		drain(t, ctx, c, f)
		total, _, _ := stateOf(t, c, "r")
		require.Equal(t, int64(5), total)
		n, err = newFlusher(t, c, co, coalesce.FlusherConfig{}).Prune(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "without Retain nothing is deleted")
	})
}

// A caller that stops waiting once its change is recorded still gets its
// key marked dirty: the mark runs on a deadline of its own, so the change
// is folded without waiting for the stranded sweep. Accept returns the
// context's cause (its outcome was unknown to the caller: a resend gets
// the receipt).
func TestAcceptMarksAfterCallerGone(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		co := newCoalescer(t, c, coalesce.Config{})
		gone := errors.New("the client went away")
		ctx, cancel := context.WithCancelCause(context.Background())
		// The mark waits, after its first read, until Accept returned.
		returned := make(chan struct{})
		coalesce.SetMarkRead(co, func(string) {
			cancel(gone)
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				t.Error("Accept did not return when its context ended")
			}
		})
		_, err := co.Accept(ctx, coalesce.Change{Key: "k", EventID: "e1", Payload: []byte("5")})
		close(returned)
		require.ErrorIs(t, err, gone)
		require.EqualValues(t, 1, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE event_id = 'e1'"), "the change was recorded")
		require.Eventually(t, func() bool {
			return count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE change_key = 'k' AND status = 'PENDING'") == 1
		}, 10*time.Second, 5*time.Millisecond, "the key was marked after the caller had gone")
		coalesce.SetMarkRead(co, nil)
		r, err := co.Accept(context.Background(), coalesce.Change{Key: "k", EventID: "e1", Payload: []byte("5")})
		require.NoError(t, err)
		require.True(t, r.Duplicate)
		s := newSent()
		s.add("k", 5)
		drain(t, context.Background(), c, newFlusher(t, c, co, coalesce.FlusherConfig{}))
		verify(t, c, s)
	})
}

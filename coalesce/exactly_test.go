package coalesce_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// sent is what the writers of a test had accepted: per key, the sum of
// the deltas of its distinct changes and their number.
type sent struct {
	mu            sync.Mutex
	total, number map[string]int64
}

func newSent() *sent { return &sent{total: map[string]int64{}, number: map[string]int64{}} }

func (s *sent) add(key string, delta int64) {
	s.mu.Lock()
	s.total[key] += delta
	s.number[key]++
	s.mu.Unlock()
}

// writeLoad has writers goroutines accept n changes each, half of them for
// three hot keys, the others over twenty keys, every tenth one sent twice
// (the second time at once or after a few other changes). Each writer is
// a source with its own sequence per key, so its changes are never stale.
// Accepted changes are recorded in s; an accept error fails the test.
func writeLoad(t *testing.T, ctx context.Context, co *coalesce.Coalescer, prefix string, writers, n int, s *sent) {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			seq := map[string]int64{}
			var resend []coalesce.Change
			for i := range n {
				key := "k" + strconv.Itoa(3+r.IntN(20))
				if r.IntN(2) == 0 {
					key = "hot" + strconv.Itoa(r.IntN(3))
				}
				seq[key]++
				delta := r.Int64N(201) - 100
				ch := coalesce.Change{
					Key: key, EventID: fmt.Sprintf("%s-w%d-%d", prefix, w, i),
					Source: "w" + strconv.Itoa(w), Seq: seq[key], Payload: []byte(strconv.FormatInt(delta, 10)),
				}
				if i%3 == 0 {
					ch.Source, ch.Seq = "", 0 // some without a source
				}
				rec, err := co.Accept(ctx, ch)
				if ctx.Err() != nil {
					return
				}
				if !assertNoError(t, err) {
					return
				}
				if rec.Duplicate {
					t.Errorf("first send of %s is a duplicate", ch.EventID)
					return
				}
				s.add(key, delta)
				if i%10 == 0 {
					resend = append(resend, ch)
				}
				if len(resend) > 0 && r.IntN(3) == 0 {
					d := resend[0]
					resend = resend[1:]
					d.Payload = []byte("999") // a resend never counts, whatever it carries
					rec, err := co.Accept(ctx, d)
					if !assertNoError(t, err) {
						return
					}
					if !rec.Duplicate || rec.Key != d.Key {
						t.Errorf("resend of %s: %+v", d.EventID, rec)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("accept: %v", err)
		return false
	}
	return true
}

// verify checks that every change is folded exactly once: each key's
// state holds the sum and the number of its distinct changes, no change is
// unfolded, and no key is dirty.
func verify(t *testing.T, c *testengine.Conn, s *sent) {
	t.Helper()
	require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE folded_at IS NULL"), "unfolded changes")
	require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE status <> 'DONE'"), "keys not done")
	var all int64
	for key, want := range s.total {
		total, writes, changes := stateOf(t, c, key)
		require.Equal(t, want, total, "key %s: sum of its changes", key)
		require.Equal(t, s.number[key], changes, "key %s: changes folded", key)
		require.Equal(t, s.number[key], count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE change_key = ?", key))
		require.Equal(t, s.number[key], count(t, c, "SELECT folded FROM coalesce_keys WHERE change_key = ?", key))
		require.LessOrEqual(t, writes, changes)
		all += changes
	}
	require.Equal(t, all, count(t, c, "SELECT COUNT(*) FROM coalesce_changes"))
	require.Equal(t, all, count(t, c, "SELECT COALESCE(SUM(changes), 0) FROM state"), "a state row the writers did not write")
}

// waitDrained waits until nothing is dirty or unfolded, for at most d.
func waitDrained(t *testing.T, ctx context.Context, co *coalesce.Coalescer, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		dirty, _, err := co.Backlog(ctx)
		require.NoError(t, err)
		if dirty == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "still %d dirty keys after %v", dirty, d)
		time.Sleep(20 * time.Millisecond)
	}
}

// loadAndDrain runs a flusher per configuration in fcs while writers
// goroutines accept writeLoad's changes (n each, event ids with prefix),
// waits until nothing is dirty, stops the flushers and verifies that every
// change was folded exactly once. It returns how long the accepts took.
func loadAndDrain(t *testing.T, c *testengine.Conn, co *coalesce.Coalescer, prefix string, writers, n int, fcs ...coalesce.FlusherConfig) time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var flushers sync.WaitGroup
	for _, fc := range fcs {
		f := newFlusher(t, c, co, fc)
		flushers.Go(func() {
			if err := f.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	s := newSent()
	start := time.Now()
	writeLoad(t, ctx, co, prefix, writers, n, s)
	accepted := time.Since(start)
	waitDrained(t, ctx, co, 60*time.Second)
	cancel()
	flushers.Wait()
	verify(t, c, s)
	return accepted
}

// TestExactlyOnce: eight writers accept changes for a few hot keys and
// more cold ones, resending some, while three flushers run concurrently
// (one lingering); at the end every key's state is the sum of its
// distinct changes, each folded once, and the hot keys took fewer state
// writes than changes.
func TestExactlyOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		co := newCoalescer(t, c, coalesce.Config{})
		var fcs []coalesce.FlusherConfig
		for i := range 3 {
			fcs = append(fcs, coalesce.FlusherConfig{BatchSize: 4, Linger: time.Duration(i) * 5 * time.Millisecond, PollMax: 50 * time.Millisecond})
		}
		accepted := loadAndDrain(t, c, co, "x", 8, 25, fcs...)
		var hotChanges, hotWrites int64
		for i := range 3 {
			_, w, n := stateOf(t, c, "hot"+strconv.Itoa(i))
			hotWrites += w
			hotChanges += n
		}
		t.Logf("%s: %d changes accepted in %v; hot keys: %d changes in %d state writes", c.Engine, count(t, c, "SELECT COUNT(*) FROM coalesce_changes"), accepted, hotChanges, hotWrites)
		require.Less(t, hotWrites, hotChanges, "the hot keys' changes were not coalesced at all")
	})
}

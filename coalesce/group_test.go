package coalesce_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestGroupedExactlyOnce: TestExactlyOnce's load, with Config.Group: the
// writers' concurrent Accepts share transactions, every change is still
// folded once, and each resend gets its first receipt.
func TestGroupedExactlyOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		co := newCoalescer(t, c, coalesce.Config{Group: 64})
		groups, grouped := coalesce.CountGroups(co)
		fc := coalesce.FlusherConfig{BatchSize: 4, PollMax: 50 * time.Millisecond}
		loadAndDrain(t, c, co, "g", 16, 25, fc, fc)
		t.Logf("%s: %d accepts in %d grouped transactions", c.Engine, grouped.Load(), groups.Load())
		require.Less(t, groups.Load(), grouped.Load(), "no two Accepts shared a transaction")
	})
}

// Accepts grouped together get Accept's outcomes: the same event id sent
// by several writers at once is recorded once, the others getting its
// receipt; a source's changes sent at once in any order are recorded in
// increasing sequence, the others refused as stale with the version they
// met.
func TestGroupedOutcomes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{Group: 32, GroupInFlight: 1})
		groups, grouped := coalesce.CountGroups(co)
		const writers = 24
		type outcome struct {
			r   coalesce.Receipt
			err error
		}
		for round := range 5 {
			out := make([]outcome, writers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := range writers {
				wg.Go(func() {
					<-start
					var ch coalesce.Change
					switch {
					case w < 8: // one event sent eight times
						ch = coalesce.Change{Key: "dup", EventID: fmt.Sprint("same-", round), Payload: []byte("1")}
					default: // one source's sequences, at once
						ch = coalesce.Change{Key: "seq", EventID: fmt.Sprint("s-", round, "-", w), Source: "phone",
							Seq: int64(round*100 + w), Payload: []byte("1")}
					}
					out[w].r, out[w].err = co.Accept(ctx, ch)
				})
			}
			close(start)
			wg.Wait()

			var first coalesce.Receipt
			recorded := 0
			for _, o := range out[:8] {
				require.NoError(t, o.err)
				if !o.r.Duplicate {
					recorded++
					first = o.r
				}
			}
			require.Equal(t, 1, recorded, "round %d: the event was recorded once", round)
			for _, o := range out[:8] {
				assert.Equal(t, first.ID, o.r.ID, "every sender gets the first receipt")
			}

			var ids []int64
			bySeq := map[int64]int64{}
			for _, o := range out[8:] {
				if o.err != nil {
					require.ErrorIs(t, o.err, coalesce.ErrStale)
					continue
				}
				require.False(t, o.r.Duplicate)
				ids = append(ids, o.r.ID)
				bySeq[o.r.ID] = o.r.Seq
			}
			require.NotEmpty(t, ids, "round %d: some sequence was recorded", round)
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			for i := 1; i < len(ids); i++ {
				require.Greater(t, bySeq[ids[i]], bySeq[ids[i-1]], "recorded in increasing sequence")
			}
			acc, _, err := co.Versions(ctx, "seq")
			require.NoError(t, err)
			require.Equal(t, bySeq[ids[len(ids)-1]], acc, "the last recorded sequence is the accepted version")
		}
		require.Less(t, groups.Load(), grouped.Load(), "no two Accepts shared a transaction")
	})
}

// The same event id sent by several writers into one grouped run is
// recorded once, and every other change of the run gets its own receipt:
// the run is gated until all the calls wait in its queue, so they are
// taken together, and every sender of the duplicate gets the first
// receipt.
func TestGroupedDuplicatesInOneRun(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		g := newGated(t, c)
		held := g.holdRun(t, newSent(), "opens")
		const dups, others = 8, 4
		calls := make([]*acceptCall, dups+others)
		for i := range calls {
			ch := coalesce.Change{Key: "dup", EventID: "same", Payload: []byte("1")}
			if i >= dups {
				ch = coalesce.Change{Key: fmt.Sprint("other-", i), EventID: fmt.Sprint("e-", i), Payload: []byte("1")}
			}
			calls[i] = g.start(ch)
		}
		g.waitQueued(t, len(calls))
		g.open()
		held()
		require.Equal(t, len(calls), g.run(t), "the %d calls were taken in one run", len(calls))
		g.open()
		var first coalesce.Receipt
		recorded := 0
		for i, a := range calls {
			r, err := a.wait(t)
			require.NoError(t, err, "change %d", i)
			assert.Equal(t, a.ch.Key, r.Key, "change %d gets its own receipt", i)
			assert.Equal(t, a.ch.EventID, r.EventID, "change %d gets its own receipt", i)
			if i == 0 {
				first = r
			}
			if i < dups {
				if !r.Duplicate {
					recorded++
				}
				assert.Equal(t, first.ID, r.ID, "every sender gets the first receipt")
			} else {
				assert.False(t, r.Duplicate)
			}
		}
		require.Equal(t, 1, recorded, "the event was recorded once")
		require.EqualValues(t, 1, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE event_id = 'same'"))
	})
}

// A lone Accept with grouping waits for nothing: it is recorded in a
// transaction of its own at once.
func TestGroupedLoneAccept(t *testing.T) {
	c := testengine.Open(t, testengine.All[0], 4)
	setup(t, c)
	co := newCoalescer(t, c, coalesce.Config{Group: 16})
	groups, grouped := coalesce.CountGroups(co)
	for i := range 3 {
		r, err := co.Accept(context.Background(), coalesce.Change{Key: "k", EventID: strconv.Itoa(i), Payload: []byte("1")})
		require.NoError(t, err)
		require.False(t, r.Duplicate)
	}
	require.EqualValues(t, 3, groups.Load())
	require.EqualValues(t, 3, grouped.Load())
}

func TestGroupConfig(t *testing.T) {
	c := testengine.Open(t, testengine.All[0], 2)
	for _, cfg := range []coalesce.Config{{Group: -1}, {Group: coalesce.MaxBatch + 1}, {Group: 8, GroupInFlight: -1}, {Group: 8, GroupInFlight: 65}} {
		_, err := coalesce.New(c.Dialect, c.DB, cfg)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%+v", cfg)
		require.ErrorContains(t, err, "Group")
	}
}

package coalesce_test

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
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

// refConfig names the tables of the reference coalescer, which takes the
// same changes one Accept at a time.
var refConfig = coalesce.Config{ChangesTable: "ref_changes", KeysTable: "ref_keys", SourcesTable: "ref_sources"}

// outcome is a change's result without its row id, which the two
// coalescers number alike only by chance, and the event id whose
// recording the id names.
type outcome struct {
	Key, EventID, Source string
	Seq                  int64
	Duplicate            bool
	Stale                *coalesce.StaleError
	IDOf                 string
}

// outcomes turns results into outcomes, checking that every change's
// receipt names a row id that the first receipt of its event id has.
func outcomes(t *testing.T, res []coalesce.BatchResult, ids map[int64]string) []outcome {
	t.Helper()
	out := make([]outcome, len(res))
	for i, r := range res {
		if r.Err != nil {
			require.ErrorIs(t, r.Err, coalesce.ErrStale)
			var stale *coalesce.StaleError
			require.ErrorAs(t, r.Err, &stale)
			out[i] = outcome{Stale: stale}
			continue
		}
		rc := r.Receipt
		require.Positive(t, rc.ID, "change %d", i)
		if !rc.Duplicate {
			require.NotContains(t, ids, rc.ID, "change %d: a new change with a recorded id", i)
			ids[rc.ID] = rc.EventID
		}
		require.Contains(t, ids, rc.ID, "change %d: a receipt whose id no receipt recorded", i)
		out[i] = outcome{Key: rc.Key, EventID: rc.EventID, Source: rc.Source, Seq: rc.Seq, Duplicate: rc.Duplicate, IDOf: ids[rc.ID]}
	}
	return out
}

// TestAcceptBatchMatchesAccept: batches with changes of several keys and
// sources, resends of earlier batches' changes, of changes without a
// Source, and stale sequences against earlier batches and against the
// batch's own earlier changes, give per change what Accept gives for the
// same changes one at a time (on tables of their own); the batches'
// recorded changes are folded once, and the versions agree.
func TestAcceptBatchMatchesAccept(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		require.NoError(t, coalesce.CreateTables(ctx, c.Dialect, c.DB, refConfig))
		co := newCoalescer(t, c, coalesce.Config{})
		ref := newCoalescer(t, c, refConfig)
		ch := func(key, ev, src string, seq int64, delta int) coalesce.Change {
			return coalesce.Change{Key: key, EventID: ev, Source: src, Seq: seq, Payload: []byte(strconv.Itoa(delta))}
		}
		batches := [][]coalesce.Change{
			{ch("u1", "e1", "phone", 1, 5), ch("u1", "e2", "phone", 3, 7), ch("u2", "e3", "", 0, 11),
				ch("u1", "e4", "phone", 2, 100), // below e2's 3, in this batch
				ch("u1", "e5", "laptop", 1, -2), ch("u3", "e6", "phone", 1, 1), ch("u1", "e6b", "phone", 3, 100)},
			{ch("u1", "e1", "phone", 9, 100), // accepted before: a duplicate, not judged by its sequence
				ch("u1", "e7", "phone", 3, 100), // not above 3
				ch("u2", "e3", "", 0, 100),      // without a source, accepted before
				ch("u1", "e8", "phone", 4, 3), ch("u1", "e9", "phone", 4, 100), ch("u4", "e10", "", 0, 13),
				ch("u1", "e4", "phone", 5, 17), // refused before: new now
				ch("u3", "e6", "other", 1, 100)},
			{ch("u5", "e11", "s", math.MaxInt64, 1), ch("u5", "e12", "s", -3, 100), ch("u2", "e13", "", 0, 2)},
			{ch("u1", "e8", "phone", 4, 100), ch("u1", "e14", "laptop", 1, 100), ch("u6", "e15", "phone", -7, 4)},
		}
		gotIDs, wantIDs := map[int64]string{}, map[int64]string{}
		want := map[string]int64{} // key -> sum of its recorded changes
		f := newFlusher(t, c, co, coalesce.FlusherConfig{})
		for b, batch := range batches {
			if b == 2 {
				// The keys are done: the next batches' marks set them
				// pending again (u5 and u6 are new).
				drain(t, ctx, c, f)
			}
			res, err := co.AcceptBatch(ctx, batch)
			require.NoError(t, err, "batch %d", b)
			require.Len(t, res, len(batch))
			got := outcomes(t, res, gotIDs)
			wantRes := make([]coalesce.BatchResult, len(batch))
			for i, ch := range batch {
				r, err := ref.Accept(ctx, ch)
				if err != nil {
					require.ErrorIs(t, err, coalesce.ErrStale)
					r = coalesce.Receipt{}
				}
				wantRes[i] = coalesce.BatchResult{Receipt: r, Err: err}
			}
			require.Equal(t, outcomes(t, wantRes, wantIDs), got, "batch %d", b)
			for i, r := range res {
				if r.Err == nil && !r.Receipt.Duplicate {
					d, err := strconv.ParseInt(string(batch[i].Payload), 10, 64)
					require.NoError(t, err)
					want[batch[i].Key] += d
				}
			}
		}
		for _, key := range []string{"u1", "u2", "u3", "u5", "u6"} {
			acc, _, err := co.Versions(ctx, key)
			require.NoError(t, err)
			racc, _, err := ref.Versions(ctx, key)
			require.NoError(t, err)
			require.Equal(t, racc, acc, "key %s: accepted version", key)
		}
		require.Equal(t, int64(4), count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE status = 'PENDING'"), "u1, u2, u5 and u6 dirty")
		drain(t, ctx, c, f)
		for key, sum := range want {
			total, writes, _ := stateOf(t, c, key)
			require.Equal(t, sum, total, "key %s", key)
			require.Positive(t, writes)
		}
		require.Equal(t, int64(len(want)), count(t, c, "SELECT COUNT(*) FROM state"))
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_sources WHERE last_seq = ?", int64(math.MinInt64)), "a source row left without a sequence")
	})
}

// TestAcceptBatchRefuses: an empty batch, one above MaxBatch, a change
// the tables cannot hold, two changes with one event id and a sourced
// change with the lowest sequence are refused as a whole, naming the
// change, as is a batch over the backlog's limit (ErrOverloaded); nothing
// is written.
func TestAcceptBatchRefuses(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		ok := func(ev string) coalesce.Change {
			return coalesce.Change{Key: "k", EventID: ev, Payload: []byte("1")}
		}
		big := make([]coalesce.Change, coalesce.MaxBatch+1)
		for i := range big {
			big[i] = ok("big" + strconv.Itoa(i))
		}
		for _, tc := range []struct {
			name  string
			batch []coalesce.Change
			msg   string
		}{
			{"empty", nil, "the batch is empty"},
			{"too large", big, "at most 1000 changes"},
			{"no key", []coalesce.Change{ok("a"), {EventID: "b"}}, "Change.Key: must be 1 to 191 bytes, got 0 (change 1)"},
			{"same event id", []coalesce.Change{ok("a"), ok("b"), ok("a")}, `changes 0 and 2 of the batch have the same event id "a"`},
			{"lowest sequence", []coalesce.Change{{Key: "k", EventID: "a", Source: "s", Seq: math.MinInt64}}, "must be above math.MinInt64 in a batch (change 0)"},
		} {
			res, err := co.AcceptBatch(ctx, tc.batch)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, tc.name)
			require.ErrorContains(t, err, tc.msg, tc.name)
			require.Nil(t, res, tc.name)
			tx, err := c.DB.BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = co.AcceptBatchTx(ctx, tx, tc.batch)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, tc.name)
			require.NoError(t, tx.Rollback())
		}
		_, err := co.AcceptBatchTx(ctx, nil, []coalesce.Change{ok("a")})
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes"))

		// Over the backlog's limit, the whole batch is refused.
		limited := newCoalescer(t, c, coalesce.Config{MaxBacklog: 1, PressureInterval: time.Nanosecond})
		_, err = limited.AcceptBatch(ctx, []coalesce.Change{{Key: "a", EventID: "a", Payload: []byte("1")}, {Key: "b", EventID: "b", Payload: []byte("1")}})
		require.NoError(t, err)
		_, err = limited.AcceptBatch(ctx, []coalesce.Change{{Key: "c", EventID: "c", Payload: []byte("1")}, {Key: "a", EventID: "a2", Payload: []byte("1")}})
		require.ErrorIs(t, err, coalesce.ErrOverloaded)
		var over *coalesce.OverloadError
		require.ErrorAs(t, err, &over)
		require.Equal(t, int64(2), over.Backlog)
		require.Equal(t, int64(2), count(t, c, "SELECT COUNT(*) FROM coalesce_changes"))
	})
}

// TestAcceptBatchTx: a batch accepted in the caller's transaction exists
// only if it commits, and is then folded; a resend in a later transaction
// is a duplicate, a stale change is refused in its result, and a key
// whose changes are all duplicates or refused is not written.
func TestAcceptBatchTx(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		batch := []coalesce.Change{
			{Key: "k", EventID: "t1", Source: "s", Seq: 1, Payload: []byte("4")},
			{Key: "k", EventID: "t2", Source: "s", Seq: 2, Payload: []byte("5")},
			{Key: "j", EventID: "t3", Payload: []byte("6")},
		}
		tx, err := c.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = co.AcceptBatchTx(ctx, tx, batch)
		require.NoError(t, err)
		require.NoError(t, tx.Rollback())
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes"))
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_sources"))

		tx, err = c.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		res, err := co.AcceptBatchTx(ctx, tx, batch)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		for i, r := range res {
			require.NoError(t, r.Err)
			require.False(t, r.Receipt.Duplicate, "change %d", i)
		}

		tx, err = c.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		again, err := co.AcceptBatchTx(ctx, tx, []coalesce.Change{batch[1],
			{Key: "k", EventID: "t4", Source: "s", Seq: 2, Payload: []byte("100")}, {Key: "j", EventID: "t5", Payload: []byte("1")}})
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		require.Equal(t, coalesce.Receipt{Key: "k", EventID: "t2", Source: "s", Seq: 2, ID: res[1].Receipt.ID, Duplicate: true}, again[0].Receipt)
		require.ErrorIs(t, again[1].Err, coalesce.ErrStale)
		require.False(t, again[2].Receipt.Duplicate)

		drain(t, ctx, c, newFlusher(t, c, co, coalesce.FlusherConfig{}))
		total, _, changes := stateOf(t, c, "k")
		require.Equal(t, [2]int64{9, 2}, [2]int64{total, changes})
		total, _, changes = stateOf(t, c, "j")
		require.Equal(t, [2]int64{7, 2}, [2]int64{total, changes})
	})
}

// TestAcceptBatchMarkRacesFlush is TestMarkRacesFlushCompletion with a
// batch: its hot key's mark reads the key as being flushed, and the flush
// completes the key before the mark writes. The batch's changes must be
// folded (the key requeued), and so must those of its other key.
func TestAcceptBatchMarkRacesFlush(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		inFold, release := make(chan struct{}), make(chan struct{})
		hold := 20 * time.Second
		if c.Engine == testengine.SQLite {
			hold = time.Second // its single writer makes the batch wait for the fold
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

		_, err := co.AcceptBatch(ctx, []coalesce.Change{{Key: "k", EventID: "e1", Payload: []byte("1")}})
		require.NoError(t, err)
		var flushErr error
		flushed := make(chan struct{})
		go func() {
			defer close(flushed)
			_, flushErr = f.Flush(ctx)
		}()
		<-inFold

		var markOnce sync.Once
		raced := false
		coalesce.SetMarkRead(co, func(key string) {
			if key != "k" {
				return
			}
			markOnce.Do(func() {
				select {
				case <-flushed:
				default:
					raced = true
				}
				close(release)
				<-flushed
			})
		})
		res, err := co.AcceptBatch(ctx, []coalesce.Change{
			{Key: "k", EventID: "e2", Payload: []byte("2")}, {Key: "other", EventID: "e3", Payload: []byte("5")},
			{Key: "k", EventID: "e4", Source: "s", Seq: 1, Payload: []byte("4")},
		})
		coalesce.SetMarkRead(co, nil)
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
		<-flushed
		require.NoError(t, flushErr)
		t.Logf("the mark read the key while its flush folded: %v", raced)
		if c.Engine != testengine.SQLite {
			require.True(t, raced, "the batch's commit waited for the fold: the race was not run")
		}
		var status string
		require.NoError(t, c.DB.QueryRow(testengine.Rebind("SELECT status FROM coalesce_keys WHERE change_key = ?", c.Dollar), "k").Scan(&status))
		assert.Equal(t, "PENDING", status, "the key of unfolded changes is not dirty")
		drain(t, ctx, c, f)
		total, _, changes := stateOf(t, c, "k")
		assert.EqualValues(t, 7, total, "the state misses a change")
		assert.EqualValues(t, 3, changes)
		total, _, _ = stateOf(t, c, "other")
		assert.EqualValues(t, 5, total)
		assert.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE folded_at IS NULL"), "changes left unfolded")
	})
}

// TestAcceptBatchExactlyOnce: eight writers accept batches of 1 to 20
// changes (hot keys and cold ones, a third without a Source, each writer
// a source with its own sequences), resending earlier batches' changes in
// later batches, while three flushers run; at the end every key's state is
// the sum of its distinct changes, each folded once.
func TestAcceptBatchExactlyOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		co := newCoalescer(t, c, coalesce.Config{})
		var flushers sync.WaitGroup
		for i := range 3 {
			f := newFlusher(t, c, co, coalesce.FlusherConfig{BatchSize: 4, Linger: time.Duration(i) * 5 * time.Millisecond, PollMax: 50 * time.Millisecond})
			flushers.Go(func() {
				if err := f.Run(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		s := newSent()
		var writers sync.WaitGroup
		for w := range 8 {
			writers.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 11))
				seq := map[string]int64{}
				var sentBefore []coalesce.Change
				n := 0
				for range 6 {
					var batch []coalesce.Change
					fresh := map[string]int64{}
					for range 1 + r.IntN(20) {
						key := "k" + strconv.Itoa(r.IntN(20))
						if r.IntN(2) == 0 {
							key = "hot" + strconv.Itoa(r.IntN(3))
						}
						seq[key]++
						delta := r.Int64N(201) - 100
						ch := coalesce.Change{Key: key, EventID: fmt.Sprintf("w%d-%d", w, n),
							Source: "w" + strconv.Itoa(w), Seq: seq[key], Payload: []byte(strconv.FormatInt(delta, 10))}
						if n%3 == 0 {
							ch.Source, ch.Seq = "", 0
						}
						n++
						fresh[ch.EventID] = delta
						batch = append(batch, ch)
					}
					// Resends of earlier batches' changes, carrying what they may.
					for range r.IntN(4) {
						if len(sentBefore) > 0 {
							d := sentBefore[r.IntN(len(sentBefore))]
							if _, again := fresh[d.EventID]; !again {
								d.Payload = []byte("999")
								fresh[d.EventID] = 0
								batch = append(batch, d)
							}
						}
					}
					res, err := co.AcceptBatch(ctx, batch)
					if !assertNoError(t, err) {
						return
					}
					for i, rs := range res {
						ch := batch[i]
						if rs.Err != nil {
							t.Errorf("%s: %v", ch.EventID, rs.Err)
							return
						}
						if string(ch.Payload) == "999" {
							if !rs.Receipt.Duplicate || rs.Receipt.Key != ch.Key {
								t.Errorf("resend of %s: %+v", ch.EventID, rs.Receipt)
								return
							}
							continue
						}
						if rs.Receipt.Duplicate {
							t.Errorf("first send of %s is a duplicate", ch.EventID)
							return
						}
						s.add(ch.Key, fresh[ch.EventID])
						sentBefore = append(sentBefore, ch)
					}
				}
			})
		}
		writers.Wait()
		waitDrained(t, ctx, co, 60*time.Second)
		cancel()
		flushers.Wait()
		verify(t, c, s)
	})
}

// TestAcceptBatchConcurrentResends: four writers send the same batches
// (the same event ids, with and without a Source, several keys) at once,
// in the same order, each batch by all of them together, so that a batch
// meets event ids another one records between its lookup and its insert,
// and sources' sequences moved by the duplicates of its changes. Every event id is recorded once:
// exactly one writer gets it as new, the others its receipt as a
// duplicate, none a stale refusal; every change is folded once.
func TestAcceptBatchConcurrentResends(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		var mu sync.Mutex
		retried := map[string]int{}
		co := newCoalescer(t, c, coalesce.Config{Retry: dialect.RetryPolicy{MaxAttempts: 50, OnRetry: func(op string, _ int, err error) {
			mu.Lock()
			retried[op+": "+err.Error()]++
			mu.Unlock()
		}}})
		var batches [][]coalesce.Change
		s := newSent()
		seq := map[string]int64{}
		for b := range 12 {
			var batch []coalesce.Change
			for i := range 8 {
				key := "k" + strconv.Itoa((b+i)%5)
				ch := coalesce.Change{Key: key, EventID: fmt.Sprintf("c%d-%d", b, i), Payload: []byte(strconv.Itoa(b*10 + i))}
				if i%2 == 0 {
					seq[key]++
					ch.Source, ch.Seq = "dev", seq[key]
				}
				s.add(key, int64(b*10+i))
				batch = append(batch, ch)
			}
			batches = append(batches, batch)
		}
		receipts := make([][][]coalesce.BatchResult, 4)
		// Each batch is sent by every writer at once.
		ready := make([]sync.WaitGroup, len(batches))
		for b := range ready {
			ready[b].Add(len(receipts))
		}
		var wg sync.WaitGroup
		for w := range receipts {
			wg.Go(func() {
				for b, batch := range batches {
					ready[b].Done()
					ready[b].Wait()
					res, err := co.AcceptBatch(ctx, batch)
					if !assertNoError(t, err) {
						return
					}
					receipts[w] = append(receipts[w], res)
				}
			})
		}
		wg.Wait()
		for b, batch := range batches {
			for i, ch := range batch {
				var news int
				var id int64
				for w := range receipts {
					require.Len(t, receipts[w], len(batches))
					r := receipts[w][b][i]
					require.NoError(t, r.Err, "%s from writer %d", ch.EventID, w)
					require.Equal(t, [3]string{ch.Key, ch.EventID, ch.Source}, [3]string{r.Receipt.Key, r.Receipt.EventID, r.Receipt.Source})
					require.Equal(t, ch.Seq, r.Receipt.Seq)
					if !r.Receipt.Duplicate {
						news++
					}
					if id == 0 {
						id = r.Receipt.ID
					}
					require.Equal(t, id, r.Receipt.ID, "%s: the receipts name different rows", ch.EventID)
				}
				require.Equal(t, 1, news, "%s: recorded by %d writers", ch.EventID, news)
			}
		}
		drain(t, ctx, c, newFlusher(t, c, co, coalesce.FlusherConfig{}))
		verify(t, c, s)
		t.Logf("%s: retries: %v", c.Engine, retried)
	})
}

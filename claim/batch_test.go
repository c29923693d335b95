package claim_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// slowDialect wraps a dialect so that its claim stores record the keys of
// every ack statement and, when armed with holdNextAck, hold the next Ack
// call before it reaches the database until let is called: a slow database,
// as a background write of deferred acks would meet it.
type slowDialect struct {
	dialect.Dialect

	mu      sync.Mutex
	hold    chan struct{} // the next Ack waits for it to close; nil: no hold
	held    chan struct{} // receives a value when an Ack starts waiting
	written map[any]int   // key -> ack statements that carried it
}

func newSlowDialect(d dialect.Dialect) *slowDialect {
	return &slowDialect{Dialect: d, held: make(chan struct{}, 1), written: map[any]int{}}
}

// holdNextAck makes the next Ack call wait, and returns the function that
// lets it go on.
func (s *slowDialect) holdNextAck() (let func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.hold = ch
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (s *slowDialect) WrapClaims(st store.ClaimStore) store.ClaimStore {
	return &slowStore{ClaimStore: st, s: s}
}

// Inner implements the store's test wrapping.
func (s *slowDialect) Inner() dialect.Dialect { return s.Dialect }

type slowStore struct {
	store.ClaimStore
	s *slowDialect
}

func (st *slowStore) Ack(ctx context.Context, p *store.AckParams) (store.AckResult, error) {
	s := st.s
	s.mu.Lock()
	hold := s.hold
	s.hold = nil
	if p.Outcome == store.OutcomeDone {
		for _, id := range p.IDs {
			s.written[id]++
		}
	}
	s.mu.Unlock()
	if hold != nil {
		s.held <- struct{}{}
		<-hold
	}
	return st.ClaimStore.Ack(ctx, p)
}

// writtenTwice returns the keys that more than one ack statement carried.
func (s *slowDialect) writtenTwice() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var twice []any
	for id, n := range s.written {
		if n > 1 {
			twice = append(twice, id)
		}
	}
	return twice
}

// slowSetup is jobSetup (n rows, SQLite) on a slowDialect, with AckBuffer
// 2 and an AckDelay of an hour: two deferred acks start a background write.
func slowSetup(t *testing.T, n int) (*slowDialect, *claim.Claimer[job]) {
	t.Helper()
	e := open(t, engines[0])
	sd := newSlowDialect(e.d)
	c, _ := jobSetup(t, &env{kind: e.kind, d: sd, raw: e.raw, dollar: e.dollar}, dialect.StrategyTokenUpdate, n,
		func(cfg *claim.Config) { cfg.AckBuffer, cfg.AckDelay = 2, time.Hour })
	return sd, c
}

// within runs fn and fails the test if it does not return within a few
// seconds: a method that waits behind a held background write never
// returns before the hold is let go.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s waited behind the background write of deferred acks", what)
	}
}

// TestBackgroundWriteDoesNotBlockBatch: while a background write of
// deferred acks is stuck in a slow database, the batch's other methods run.
func TestBackgroundWriteDoesNotBlockBatch(t *testing.T) {
	t.Parallel()
	sd, c := slowSetup(t, 10)
	ctx := context.Background()
	b, err := c.Claim(ctx)
	require.NoError(t, err)
	rows := b.Rows()
	let := sd.holdNextAck()
	defer let()
	require.NoError(t, b.Ack(ctx, rows[0].ID))
	require.NoError(t, b.Ack(ctx, rows[1].ID)) // the buffer is full: a background write starts
	<-sd.held                                  // ... and is stuck in the database

	within(t, "Batch methods", func() {
		require.Len(t, b.Unacked(), 8)
		require.Empty(t, b.Requeued())
		require.NoError(t, b.Ack(ctx, rows[2].ID)) // deferred
		require.NoError(t, b.Fail(ctx, rows[3].ID, errors.New("x")))
		require.NoError(t, b.Ack(ctx, rows[4].ID)) // deferred; the buffer is full again, but a write is in flight
		n, err := b.Heartbeat(ctx)
		require.NoError(t, err, "rows in flight are not counted as lost")
		require.EqualValues(t, 9, n) // rows 0 and 1 are still held (their write has not run), and so are the deferred 2 and 4
		require.ErrorIs(t, b.Ack(ctx, rows[0].ID), claim.ErrNotHeld, "a row in flight is not acked twice")
	})
	requireStats(t, c, 1, 9, 0, 0)

	let()
	require.NoError(t, b.Flush(ctx)) // waits for the write in flight, then writes rows 2 and 4
	requireStats(t, c, 1, 5, 4, 0)
	require.Len(t, b.Unacked(), 5)
	require.Empty(t, sd.writtenTwice())
}

// TestFlushAndReleaseWaitForBackgroundWrite: Flush, AckAll and Release
// report the outcome of a background write in flight, so they wait for it;
// no row is written twice and lost rows are reported once.
func TestFlushAndReleaseWaitForBackgroundWrite(t *testing.T) {
	t.Parallel()
	sd, c := slowSetup(t, 10)
	ctx := context.Background()
	b, err := c.Claim(ctx)
	require.NoError(t, err)
	rows := b.Rows()

	// Flush returns once the write in flight landed.
	let := sd.holdNextAck()
	require.NoError(t, b.Ack(ctx, rows[0].ID))
	require.NoError(t, b.Ack(ctx, rows[1].ID))
	<-sd.held
	flushed := make(chan error, 1)
	go func() { flushed <- b.Flush(ctx) }()
	select {
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) before the background write landed", err)
	case <-time.After(100 * time.Millisecond):
	}
	let()
	require.NoError(t, <-flushed)
	requireStats(t, c, 0, 8, 2, 0)

	// A Flush that gives up waiting reports its context and loses nothing.
	let = sd.holdNextAck()
	require.NoError(t, b.Ack(ctx, rows[2].ID))
	require.NoError(t, b.Ack(ctx, rows[3].ID))
	<-sd.held
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = b.Flush(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "claim: flush: ")

	// Release waits too, then releases only what is not deferred.
	released := make(chan int64, 1)
	go func() {
		n, err := b.Release(ctx)
		assertNoError(t, err)
		released <- n
	}()
	select {
	case n := <-released:
		t.Fatalf("Release returned (%d) before the background write landed", n)
	case <-time.After(100 * time.Millisecond):
	}
	let()
	require.EqualValues(t, 6, <-released, "rows 4..9; the deferred ones were acked")
	requireStats(t, c, 6, 0, 4, 0)
	require.Empty(t, b.Unacked())
	require.Empty(t, sd.writtenTwice())
}

// TestBackgroundWriteLostRowsReportedOnce: rows a background write finds
// lost are reported by the next Flush (or AckAll) only, even when that Flush
// waited for the write.
func TestBackgroundWriteLostRowsReportedOnce(t *testing.T) {
	t.Parallel()
	sd, c := slowSetup(t, 4)
	ctx := context.Background()
	old, err := c.Claim(ctx)
	require.NoError(t, err)
	rows := old.Rows()

	// The worker stalls: a reaper returns its rows, another claims them.
	time.Sleep(20 * time.Millisecond)
	_, err = claim.StoreOf(c).Reap(ctx, &store.ReapParams{Timeout: time.Millisecond, Limit: 100})
	require.NoError(t, err)
	fresh, err := c.Claim(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, fresh.Len())

	let := sd.holdNextAck()
	require.NoError(t, old.Ack(ctx, rows[0].ID))
	require.NoError(t, old.Ack(ctx, rows[1].ID))
	<-sd.held
	flushed := make(chan error, 1)
	go func() { flushed <- old.Flush(ctx) }()
	time.Sleep(20 * time.Millisecond)
	let()
	err = <-flushed
	var le *claim.LostError
	require.ErrorAs(t, err, &le)
	require.ErrorIs(t, err, dialect.ErrClaimLost)
	require.Equal(t, []any{rows[0].ID, rows[1].ID}, le.IDs)
	require.EqualError(t, err, "claim: flush: lost 2 rows [1 2]: reaped or released, possibly re-claimed")
	require.NoError(t, old.Flush(ctx), "reported once")

	// An unheld background write: its lost rows wait for AckAll.
	require.NoError(t, old.Ack(ctx, rows[2].ID))
	require.NoError(t, old.Ack(ctx, rows[3].ID))
	waitFor(t, "the background write", func() bool { return written(sd, rows[3].ID) })
	err = old.AckAll(ctx)
	require.ErrorAs(t, err, &le)
	require.Equal(t, []any{rows[2].ID, rows[3].ID}, le.IDs)
	require.NoError(t, old.AckAll(ctx), "reported once")
	require.Empty(t, sd.writtenTwice())
	requireStats(t, c, 0, 4, 0, 0) // the new owner's rows are untouched
}

func written(sd *slowDialect, id any) bool {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	return sd.written[id] > 0
}

// TestKeysNormalisedOnce: keys passed to a batch are normalised with
// store.NormalizeKey; one that does not fit the key column is an error,
// never a wrapped value that might name another row.
func TestKeysNormalisedOnce(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	c, _ := jobSetup(t, e, dialect.StrategyTokenUpdate, 5, nil)
	ctx := context.Background()
	b, err := c.Claim(ctx)
	require.NoError(t, err)
	first := b.IDs()[0].(int64)

	// uint64(math.MaxUint64) would wrap to -1, and 1<<63 + first to a
	// negative key: both are errors, not ErrNotHeld of a wrapped key.
	for _, bad := range []any{uint64(math.MaxUint64), uint64(1<<63) + uint64(first), uint(math.MaxUint64)} {
		err := b.Ack(ctx, bad)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%v", bad)
		require.NotErrorIs(t, err, claim.ErrNotHeld)
		require.ErrorContains(t, err, "claim: ack: ")
		require.ErrorContains(t, err, "overflows")
		require.ErrorIs(t, b.Ack(ctx, bad), dialect.ErrInvalidConfig)
		require.ErrorIs(t, b.Fail(ctx, bad, errors.New("x")), dialect.ErrInvalidConfig)
	}
	for _, bad := range []any{"1", 1.0, nil, []byte("1")} {
		require.ErrorIs(t, b.Ack(ctx, bad), dialect.ErrInvalidConfig, "%#v", bad)
	}
	require.Len(t, b.Unacked(), 5, "nothing was written")

	// Every integer type that fits names the same row.
	require.NoError(t, b.Ack(ctx, uint64(first)))
	for _, same := range []any{first, int(first), int32(first), uint8(first), uint(first)} {
		require.ErrorIs(t, b.Ack(ctx, same), claim.ErrNotHeld, "%T", same)
	}
	require.NoError(t, b.AckAll(ctx))
}

// TestBatchRowsAreACopy: changing what Rows returns changes nothing the
// batch writes.
func TestBatchRowsAreACopy(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	c, _ := jobSetup(t, e, dialect.StrategyTokenUpdate, 3, nil)
	ctx := context.Background()
	b, err := c.Claim(ctx)
	require.NoError(t, err)
	rows := b.Rows()
	want := append([]claim.Row[job](nil), rows...)
	rows[0].ID, rows[1].Version = int64(1<<40), 99
	require.Equal(t, want, b.Rows())
	require.Equal(t, []any{want[0].ID, want[1].ID, want[2].ID}, b.IDs())
	require.NoError(t, b.AckAll(ctx))
	requireStats(t, c, 0, 0, 3, 0)
}

// TestBatchErrorMessages: a message names the package and the operation
// once.
func TestBatchErrorMessages(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	c, _ := jobSetup(t, e, dialect.StrategyTokenUpdate, 4, nil)
	ctx := context.Background()
	old, err := c.Claim(ctx)
	require.NoError(t, err)
	ids := old.IDs()
	require.EqualError(t, old.Ack(ctx, 99), "claim: ack: id 99 (int) is not held by this batch")
	require.EqualError(t, old.Ack(ctx, 99), "claim: ack: id 99 (int) is not held by this batch")
	require.EqualError(t, old.Fail(ctx, 99, nil), "claim: fail: id 99 (int) is not held by this batch")

	time.Sleep(20 * time.Millisecond)
	_, err = claim.StoreOf(c).Reap(ctx, &store.ReapParams{Timeout: time.Millisecond, Limit: 100})
	require.NoError(t, err)
	require.EqualError(t, old.Ack(ctx, ids[:3]...), "claim: ack: lost 3 rows [1 2 3]: reaped or released, possibly re-claimed")
	require.EqualError(t, old.Fail(ctx, ids[3], errors.New("x")), "claim: fail: lost 1 row [4]: reaped or released, possibly re-claimed")
	_, err = old.Heartbeat(ctx)
	require.NoError(t, err, "nothing held, nothing expected")
}

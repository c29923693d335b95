package coalesce_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// The tests of this file cancel the callers of grouped Accepts
// (Config.Group) at chosen points of a run: while they are queued, while
// their run is held before it writes, and in the middle of their run's
// transaction or after its commit. Runs are held with GateGroups, and one
// grouped transaction is in flight at a time (GroupInFlight 1), so which
// calls share a run is known.

// gated is a coalescer whose grouped runs wait at a gate.
type gated struct {
	co     *coalesce.Coalescer
	gate   chan<- struct{}
	sizes  <-chan int
	queued func() int
}

func newGated(t *testing.T, c *testengine.Conn) *gated {
	co := newCoalescer(t, c, coalesce.Config{Group: 32, GroupInFlight: 1})
	g := &gated{co: co}
	g.gate, g.sizes, g.queued = coalesce.GateGroups(co)
	return g
}

// acceptCall is an Accept running in a goroutine of its own, on a context
// the test may cancel.
type acceptCall struct {
	ch     coalesce.Change
	cancel context.CancelCauseFunc
	done   chan struct{}
	r      coalesce.Receipt
	err    error
}

// start runs Accept(ch) in a goroutine.
func (g *gated) start(ch coalesce.Change) *acceptCall {
	ctx, cancel := context.WithCancelCause(context.Background())
	a := &acceptCall{ch: ch, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.r, a.err = g.co.Accept(ctx, ch)
	}()
	return a
}

// wait returns the call's outcome, failing the test if it does not come.
func (a *acceptCall) wait(t *testing.T) (coalesce.Receipt, error) {
	t.Helper()
	select {
	case <-a.done:
		return a.r, a.err
	case <-time.After(30 * time.Second):
		t.Fatalf("Accept of %s did not return", a.ch.EventID)
		return coalesce.Receipt{}, nil
	}
}

// run waits for the next run to reach the gate and returns its size.
func (g *gated) run(t *testing.T) int {
	t.Helper()
	select {
	case n := <-g.sizes:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no grouped run reached the gate")
		return 0
	}
}

// open lets the run held at the gate write.
func (g *gated) open() { g.gate <- struct{}{} }

// waitQueued waits until n calls wait for a run.
func (g *gated) waitQueued(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return g.queued() == n }, 30*time.Second, time.Millisecond, "%d calls queued", n)
}

// accept runs one Accept alone (nothing else queued) through the gate.
func (g *gated) accept(t *testing.T, ch coalesce.Change) (coalesce.Receipt, error) {
	t.Helper()
	a := g.start(ch)
	require.Equal(t, 1, g.run(t), "a lone Accept runs alone")
	g.open()
	return a.wait(t)
}

// holdRun starts an Accept of a change of its own, recorded in s, that
// runs at once and waits at the gate: the calls started after it queue.
// Opening the gate records it; its outcome is checked by the returned
// function.
func (g *gated) holdRun(t *testing.T, s *sent, key string) (check func()) {
	t.Helper()
	a := g.start(coalesce.Change{Key: key, EventID: "hold-" + key, Payload: []byte("1")})
	require.Equal(t, 1, g.run(t), "the first Accept runs at once")
	return func() {
		t.Helper()
		r, err := a.wait(t)
		require.NoError(t, err)
		require.False(t, r.Duplicate)
		s.add(key, 1)
	}
}

// rowID returns the id of the changes row of event id ev.
func rowID(t *testing.T, c *testengine.Conn, ev string) int64 {
	t.Helper()
	return count(t, c, "SELECT id FROM coalesce_changes WHERE event_id = ?", ev)
}

// requireOwnReceipt checks that a's Accept returned its own change's new
// receipt, and records the change in s.
func requireOwnReceipt(t *testing.T, c *testengine.Conn, a *acceptCall, s *sent) {
	t.Helper()
	r, err := a.wait(t)
	require.NoError(t, err, a.ch.EventID)
	require.False(t, r.Duplicate, a.ch.EventID)
	require.Equal(t, a.ch.Key, r.Key)
	require.Equal(t, a.ch.EventID, r.EventID)
	require.Equal(t, a.ch.Source, r.Source)
	require.Equal(t, a.ch.Seq, r.Seq)
	require.Equal(t, rowID(t, c, a.ch.EventID), r.ID, "%s: the receipt names its row", a.ch.EventID)
	d, err := strconv.ParseInt(string(a.ch.Payload), 10, 64)
	require.NoError(t, err)
	s.add(a.ch.Key, d)
}

// A caller that gives up while its Accept is queued for a grouped run gets
// its context's error at once, before any run moves, and its change is
// never written; the other calls queued with it are recorded together,
// each with its own receipt, and folded once.
func TestGroupedCancelQueued(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		g := newGated(t, c)
		s := newSent()
		held := g.holdRun(t, s, "held")
		calls := make([]*acceptCall, 4)
		for i := range calls {
			calls[i] = g.start(coalesce.Change{Key: "q" + strconv.Itoa(i), EventID: "eq" + strconv.Itoa(i),
				Source: "phone", Seq: int64(i + 1), Payload: []byte(strconv.Itoa(i + 10))})
		}
		g.waitQueued(t, len(calls))

		gone := calls[1]
		cause := errors.New("the client went away")
		gone.cancel(cause)
		_, err := gone.wait(t) // the gate is still shut: nothing ran it
		require.ErrorIs(t, err, cause)
		require.Equal(t, len(calls)-1, g.queued(), "the cancelled call left the queue")

		g.open()
		held()
		require.Equal(t, len(calls)-1, g.run(t), "the next run took the other queued calls, not the cancelled one")
		g.open()
		for i, a := range calls {
			if i != 1 {
				requireOwnReceipt(t, c, a, s)
			}
		}
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE event_id = 'eq1'"), "the cancelled change was written")
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE change_key = 'q1'"), "the cancelled change's key was marked")
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_sources WHERE change_key = 'q1'"), "the cancelled change's source moved")

		drain(t, context.Background(), c, newFlusher(t, c, g.co, coalesce.FlusherConfig{}))
		verify(t, c, s)
	})
}

// A caller that gives up once its Accept is in a run (held at the gate
// before it writes) gets its context's error at once; the run goes on for
// the others, who get their own receipts. The abandoned change is
// recorded at most once, a resend of its event id gets the first receipt
// (Duplicate) if it was recorded, or is recorded now, and the flushers
// fold it once.
func TestGroupedCancelInRun(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		g := newGated(t, c)
		s := newSent()
		held := g.holdRun(t, s, "held")
		gone := g.start(coalesce.Change{Key: "x", EventID: "ex", Source: "phone", Seq: 1, Payload: []byte("5")})
		others := []*acceptCall{
			g.start(coalesce.Change{Key: "x", EventID: "ex-other", Payload: []byte("7")}),
			g.start(coalesce.Change{Key: "y", EventID: "ey", Source: "phone", Seq: 1, Payload: []byte("11")}),
		}
		g.waitQueued(t, 3)
		g.open()
		held()
		require.Equal(t, 3, g.run(t), "the three queued calls share the run")
		require.Zero(t, g.queued())

		cause := errors.New("the client went away")
		gone.cancel(cause)
		_, err := gone.wait(t) // the run still waits at the gate
		require.ErrorIs(t, err, cause)
		g.open()
		for _, a := range others {
			requireOwnReceipt(t, c, a, s)
		}

		recorded := count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE event_id = 'ex'")
		require.LessOrEqual(t, recorded, int64(1))
		t.Logf("%s: the abandoned change was recorded %d time(s)", c.Engine, recorded)
		r, err := g.accept(t, gone.ch)
		require.NoError(t, err, "the resend")
		if recorded == 1 {
			require.True(t, r.Duplicate, "the resend of a recorded change gets its first receipt")
			require.Equal(t, rowID(t, c, "ex"), r.ID)
			require.Equal(t, "x", r.Key)
			require.EqualValues(t, 1, r.Seq)
		} else {
			require.False(t, r.Duplicate, "the resend of an unrecorded change is recorded")
			require.Equal(t, rowID(t, c, "ex"), r.ID)
		}
		require.EqualValues(t, 1, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE event_id = 'ex'"))
		s.add("x", 5)

		drain(t, context.Background(), c, newFlusher(t, c, g.co, coalesce.FlusherConfig{}))
		verify(t, c, s)
	})
}

// When every caller of a grouped run has given up, the run's context ends
// and its transaction records all of the run's changes or none:
//
//   - ended before the insert of the changes, after the write of a
//     source's sequence: nothing of the run remains (no change, no source
//     row, no key marked), and the same changes sent again are recorded
//     as new (not as duplicates, nor as stale);
//   - ended after the commit, in the dirty marks: every change of the
//     run is recorded and its key marked all the same (the marks run on
//     a deadline of their own), a resend gets its first receipt, and the
//     flushers fold each change once.
//
// Later Accepts of the same coalescer work each time.
func TestGroupedRunAbandoned(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		g := newGated(t, c)
		s := newSent()

		// One run at a time is armed: its callers are cancelled at the
		// chosen point, and the point waits until the run's context ended.
		const (
			midTx = iota + 1
			afterCommit
		)
		var armed atomic.Int32
		var callers []*acceptCall // set before the armed run leaves the gate
		cause := errors.New("every client went away")
		// The armed run's context, seen by both hooks: its marks run after
		// its callers have gone, beside the next run's transaction.
		var runMu sync.Mutex
		var runCtx context.Context
		// The run waits in the hook until its callers returned, so that
		// they return their context's error, not the run's outcome.
		abandon := func() {
			runMu.Lock()
			ctx := runCtx
			runMu.Unlock()
			for _, a := range callers {
				a.cancel(cause)
			}
			timeout := time.After(30 * time.Second)
			for _, a := range callers {
				select {
				case <-a.done:
				case <-timeout:
					t.Errorf("Accept of %s did not return when its context ended", a.ch.EventID)
				}
			}
			select {
			case <-ctx.Done():
			case <-timeout:
				t.Error("the run's context did not end when its last caller gave up")
			}
		}
		coalesce.SetBeforeInsert(g.co, func(ctx context.Context) {
			if armed.Load() != 0 {
				runMu.Lock()
				runCtx = ctx
				runMu.Unlock()
			}
			if armed.CompareAndSwap(midTx, 0) {
				abandon()
			}
		})
		coalesce.SetMarkRead(g.co, func(string) {
			if armed.CompareAndSwap(afterCommit, 0) {
				abandon()
			}
		})
		// abandonRun holds a run, queues chs behind it, arms the point
		// and lets their run go; it returns once every caller returned
		// its context's error and a later lone Accept went through (the
		// abandoned run was over before it began: one run at a time).
		abandonRun := func(point int32, barrier string, chs ...coalesce.Change) {
			held := g.holdRun(t, s, "held-"+barrier)
			callers = nil
			for _, ch := range chs {
				callers = append(callers, g.start(ch))
			}
			g.waitQueued(t, len(chs))
			g.open()
			held()
			require.Equal(t, len(chs), g.run(t))
			armed.Store(point)
			g.open()
			for _, a := range callers {
				_, err := a.wait(t)
				require.ErrorIs(t, err, cause, a.ch.EventID)
			}
			require.Zero(t, armed.Load(), "the run did not reach its point")
			r, err := g.accept(t, coalesce.Change{Key: barrier, EventID: barrier, Payload: []byte("1")})
			require.NoError(t, err, "an Accept after the abandoned run")
			require.False(t, r.Duplicate)
			s.add(barrier, 1)
		}

		// Mid-transaction: ax's source row was written when the run's
		// context ended.
		ax := coalesce.Change{Key: "ax", EventID: "eax", Source: "phone", Seq: 1, Payload: []byte("3")}
		ay := coalesce.Change{Key: "ay", EventID: "eay", Payload: []byte("4")}
		abandonRun(midTx, "after-mid", ax, ay)
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE event_id IN ('eax', 'eay')"), "a change of the rolled-back run")
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_sources WHERE change_key = 'ax'"), "the rolled-back run's source row")
		require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE change_key IN ('ax', 'ay')"), "a key of the rolled-back run")
		for _, ch := range []coalesce.Change{ax, ay} {
			r, err := g.accept(t, ch)
			require.NoError(t, err, "%s sent again (a stale refusal would mean the source's row stayed)", ch.EventID)
			require.False(t, r.Duplicate, ch.EventID)
			require.Equal(t, rowID(t, c, ch.EventID), r.ID)
		}
		s.add("ax", 3)
		s.add("ay", 4)

		// After the commit: both changes are recorded, and their keys
		// marked all the same (the marks run on a deadline of their own,
		// not the abandoned run's context); a resend gets the first
		// receipt.
		bx := coalesce.Change{Key: "bx", EventID: "ebx", Payload: []byte("6")}
		by := coalesce.Change{Key: "by", EventID: "eby", Source: "phone", Seq: 1, Payload: []byte("8")}
		abandonRun(afterCommit, "after-commit", bx, by)
		require.EqualValues(t, 2, count(t, c, "SELECT COUNT(*) FROM coalesce_changes WHERE event_id IN ('ebx', 'eby')"), "the committed run's changes")
		require.Eventually(t, func() bool {
			return count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE change_key IN ('bx', 'by') AND status = 'PENDING'") == 2
		}, 10*time.Second, 5*time.Millisecond, "the run's marks went on after its context ended")
		for _, ch := range []coalesce.Change{bx, by} {
			resend := ch
			resend.Payload = []byte("999") // a resend never counts, whatever it carries
			r, err := g.accept(t, resend)
			require.NoError(t, err, ch.EventID)
			require.True(t, r.Duplicate, ch.EventID)
			require.Equal(t, rowID(t, c, ch.EventID), r.ID)
			require.Equal(t, ch.Key, r.Key)
			require.Equal(t, ch.Seq, r.Seq)
		}
		require.EqualValues(t, 2, count(t, c, "SELECT COUNT(*) FROM coalesce_keys WHERE change_key IN ('bx', 'by') AND status = 'PENDING'"), "the keys stay pending")
		s.add("bx", 6)
		s.add("by", 8)

		drain(t, context.Background(), c, newFlusher(t, c, g.co, coalesce.FlusherConfig{}))
		verify(t, c, s)
	})
}

package claim

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Idle loops poll one at a time: a loop that is let through by the poller
// slot keeps it until its claim is done, so however many loops wait and
// however short the interval, at most one poll is in flight; wake-ups let
// other loops through beside it.
func TestWakerOnePollAtATime(t *testing.T) {
	t.Parallel()
	var w waker
	ctx, cancel := context.WithCancel(context.Background())
	var inflight, polls, overlapped atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				done := w.idle(ctx, time.Microsecond, time.Microsecond)
				if ctx.Err() != nil { // Run's loops stop here
					done()
					return
				}
				if inflight.Add(1) > 1 {
					overlapped.Add(1)
				}
				time.Sleep(100 * time.Microsecond) // the claim
				inflight.Add(-1)
				polls.Add(1)
				done()
			}
		})
	}
	for polls.Load() < 500 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	require.Zero(t, overlapped.Load(), "polls in flight at once")
}

// A wake-up lets a waiting loop through at once, whatever the interval:
// the poller waiting out its backoff, or a loop waiting while another holds
// the poller slot; one given while no loop waits is kept for the next. Each
// case has one waiter, so that which loop takes a wake-up never depends on
// scheduling.
func TestWakerKick(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	returned := func(t *testing.T, ch <-chan func()) func() {
		t.Helper()
		select {
		case f := <-ch:
			return f
		case <-time.After(30 * time.Second):
			t.Fatal("the wake-up did not let the loop through")
			return nil
		}
	}

	// The poller, waiting out an hour, is woken and then frees the slot.
	var w waker
	ch := make(chan func(), 1)
	go func() { ch <- w.idle(ctx, time.Hour, time.Hour) }()
	require.Eventually(t, func() bool { w.init(); return len(w.poll) == 0 }, 30*time.Second, time.Millisecond, "the loop takes the poller slot")
	w.kick()
	returned(t, ch)()
	require.Len(t, w.poll, 1, "the poller freed its slot")

	// Another loop holds the slot: a waiting loop is woken without it.
	<-w.poll
	go func() { ch <- w.idle(ctx, time.Hour, time.Hour) }()
	w.kick()
	returned(t, ch)()
	require.Empty(t, w.poll, "a woken loop that never held the slot does not free it")
	w.poll <- struct{}{}

	// Nobody waits: the wake-up is kept, once.
	w.kick()
	w.kick()
	go func() { ch <- w.idle(ctx, time.Hour, time.Hour) }()
	returned(t, ch)()
	require.Len(t, w.poll, 1, "the kept wake-up let the loop through without the slot")
	require.Empty(t, w.kicks, "two wake-ups while nobody waits are kept as one")
}

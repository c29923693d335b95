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

// A wake-up lets one waiting loop through at once, whatever the interval;
// one given while no loop waits is kept for the next.
func TestWakerKick(t *testing.T) {
	t.Parallel()
	var w waker
	ctx := context.Background()
	// The poller slot is taken by a loop waiting out an hour.
	hold := make(chan func())
	go func() { hold <- w.idle(ctx, time.Hour, time.Hour) }()
	through := make(chan struct{})
	go func() {
		w.idle(ctx, time.Hour, time.Hour)()
		close(through)
	}()
	w.kick()
	select {
	case <-through:
	case free := <-hold: // the poller took the kick: the other still waits
		free()
		w.kick()
		<-through
	}
	w.kick() // nobody waits: kept
	w.idle(ctx, time.Hour, time.Hour)()
}

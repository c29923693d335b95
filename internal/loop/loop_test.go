package loop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// patience bounds every wait of these tests for something that must
// happen: generous, as the machine may be loaded. Nothing is asserted on
// how fast it happens.
const patience = 10 * time.Second

// long is a wait that must be cut short for a test to pass in time.
const long = time.Hour

// within runs f in a goroutine and returns its result, failing the test if
// f has not returned within patience.
func within[T any](t *testing.T, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("did not return within %v", patience)
		panic("unreachable")
	}
}

func TestSleep(t *testing.T) {
	ctx := t.Context()
	require.True(t, Sleep(ctx, time.Millisecond, nil), "a live ctx after the wait")
	require.True(t, Sleep(ctx, 0, nil))
	require.True(t, Sleep(ctx, -time.Second, nil))

	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	require.True(t, within(t, func() bool { return Sleep(ctx, long, wake) }), "a wake-up cuts the wait short")
	closed := make(chan struct{})
	close(closed)
	require.True(t, within(t, func() bool { return Sleep(ctx, long, closed) }), "so does a closed wake channel")

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(10*time.Millisecond, cancel)
	require.False(t, within(t, func() bool { return Sleep(cctx, long, nil) }), "the end of ctx cuts the wait short")
	require.False(t, Sleep(cctx, 0, nil), "an ended ctx is reported without a wait too")
}

// counter is a step that counts its calls and returns what next returns.
type counter struct {
	n    atomic.Int64
	next func(n int64) Next
}

func (c *counter) step(context.Context) Next { return c.next(c.n.Add(1)) }

func TestRunEndsWithStepError(t *testing.T) {
	boom := errors.New("boom")
	c := &counter{next: func(n int64) Next {
		switch {
		case n == 5:
			return End(boom)
		case n%2 == 0:
			return After(time.Millisecond)
		default:
			return Next{}
		}
	}}
	err := within(t, func() error { return Loop{}.Run(t.Context(), c.step) })
	require.ErrorIs(t, err, boom)
	require.EqualValues(t, 5, c.n.Load(), "no step after End")

	c = &counter{next: func(n int64) Next {
		if n == 3 {
			return End(nil)
		}
		return Poll(time.Millisecond)
	}}
	require.NoError(t, within(t, func() error { return Loop{}.Run(t.Context(), c.step) }), "End(nil): the work is done")
	require.EqualValues(t, 3, c.n.Load())
}

func TestRunStopsOnContext(t *testing.T) {
	// Ended before Run: no step at all.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c := &counter{next: func(int64) Next { return Next{} }}
	require.NoError(t, Loop{}.Run(ctx, c.step))
	require.Zero(t, c.n.Load(), "no step once ctx has ended")

	// Ended during a long wait: Run returns nil at once.
	ctx, cancel = context.WithCancel(t.Context())
	stepped := make(chan struct{})
	c = &counter{next: func(n int64) Next {
		if n == 1 {
			close(stepped)
		}
		return After(long)
	}}
	go func() { <-stepped; cancel() }()
	require.NoError(t, within(t, func() error { return Loop{}.Run(ctx, c.step) }))
	require.EqualValues(t, 1, c.n.Load())

	// Ended during a step that then fails: the failure is the shutdown's.
	ctx, cancel = context.WithCancel(t.Context())
	c = &counter{next: func(int64) Next { cancel(); return End(errors.New("cancelled")) }}
	require.NoError(t, within(t, func() error { return Loop{}.Run(ctx, c.step) }))
	require.EqualValues(t, 1, c.n.Load())
}

func TestRunStopsOnStop(t *testing.T) {
	stop := make(chan struct{})
	c := &counter{next: func(n int64) Next {
		if n == 3 {
			close(stop)
		}
		return After(time.Millisecond)
	}}
	require.NoError(t, within(t, func() error { return Loop{Stop: stop}.Run(t.Context(), c.step) }))
	require.EqualValues(t, 3, c.n.Load(), "no step after Stop closed")

	// Closed during the first wait: no step.
	stop = make(chan struct{})
	c = &counter{next: func(int64) Next { return Next{} }}
	time.AfterFunc(10*time.Millisecond, func() { close(stop) })
	require.NoError(t, within(t, func() error { return Loop{First: long, Stop: stop}.Run(t.Context(), c.step) }))
	require.Zero(t, c.n.Load())
}

// TestRunWake checks that a wake-up cuts a Poll short and not an After
// nor the first wait: a step whose wait is an hour runs again only when
// woken.
func TestRunWake(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wake := make(chan struct{}) // unbuffered: a send lands only in a wait that listens
	c := &counter{next: func(n int64) Next {
		if n == 1 {
			return After(long)
		}
		return Poll(long)
	}}
	done := make(chan error, 1)
	go func() { done <- Loop{First: long, Wake: wake}.Run(ctx, c.step) }()

	// The first wait and the After wait do not listen: no send lands.
	sendSoon := func() bool {
		select {
		case wake <- struct{}{}:
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}
	require.False(t, sendSoon(), "the first wait takes no wake-up")
	require.Zero(t, c.n.Load())

	c2 := &counter{next: c.next}
	go func() { done <- Loop{Wake: wake}.Run(ctx, c2.step) }()
	// c2 steps at once (n=1), then waits After(long): no wake-up lands.
	require.False(t, sendSoon(), "an After wait takes no wake-up")
	require.EqualValues(t, 1, c2.n.Load())
	cancel()
	require.NoError(t, within(t, func() error { return <-done }))
	require.NoError(t, within(t, func() error { return <-done }))

	// A Poll wait does.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	c3 := &counter{next: func(int64) Next { return Poll(long) }}
	go func() { done <- Loop{Wake: wake}.Run(ctx, c3.step) }()
	for i := range 3 {
		within(t, func() bool { wake <- struct{}{}; return true })
		require.Eventually(t, func() bool { return c3.n.Load() == int64(i+2) }, patience, time.Millisecond,
			"each wake-up runs one more step")
	}
	cancel()
	require.NoError(t, within(t, func() error { return <-done }))
}

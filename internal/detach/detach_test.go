package detach

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type key struct{}

func TestRunWaitsWhileTheContextLasts(t *testing.T) {
	ctx := context.WithValue(context.Background(), key{}, "v")
	ran := false
	Run(ctx, time.Second, func(fctx context.Context) {
		require.Equal(t, "v", fctx.Value(key{}), "the caller's values are kept")
		_, ok := fctx.Deadline()
		require.True(t, ok, "the work is bounded by its own timeout")
		ran = true
	})
	require.True(t, ran, "a live context waits for the work")
}

func TestRunReturnsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	release := make(chan struct{})
	finished := make(chan error, 1)
	Run(ctx, 5*time.Second, func(fctx context.Context) {
		select {
		case <-release: // only once Run has returned
		case <-fctx.Done():
		}
		finished <- fctx.Err()
	})
	close(release)
	require.NoError(t, <-finished, "Run returned while the work went on, and the caller's end did not cancel it")
}

// BenchmarkRun is what Run adds to the work it runs (a goroutine, its
// context with a timeout, the wait for it): the coalescer pays it once per
// accept, for the dirty mark (coalesce's markCommitted).
func BenchmarkRun(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		Run(ctx, time.Second, func(context.Context) {})
	}
}

// lateTries runs Late with undo recording the time of each try after
// start; undo reports done from try stopAt on (1-based; 0: never). It
// returns the tries made by the last pause, or by until and a half second.
func lateTries(t *testing.T, ctx context.Context, until time.Time, stopAt int) []time.Duration {
	t.Helper()
	start := time.Now()
	var mu sync.Mutex
	var got []time.Duration
	finished := make(chan struct{})
	Late(ctx, time.Minute, until, func(fctx context.Context) bool {
		// (assert: not the test's goroutine)
		assert.Equal(t, "v", fctx.Value(key{}), "the caller's values are kept")
		assert.True(t, IsBackground(fctx), "marked as the library's own work")
		assert.NoError(t, fctx.Err(), "the caller's end does not cancel the tries")
		mu.Lock()
		defer mu.Unlock()
		got = append(got, time.Since(start))
		done := len(got) == stopAt
		if done || len(got) == len(LatePauses) {
			close(finished)
		}
		return done
	})
	limit := 15 * time.Second
	if !until.IsZero() {
		limit = time.Until(until) + 500*time.Millisecond
	}
	select {
	case <-finished:
	case <-time.After(limit):
		require.False(t, until.IsZero(), "Late did not try after every pause")
	}
	time.Sleep(100 * time.Millisecond) // a try after the last would show
	mu.Lock()
	defer mu.Unlock()
	return append([]time.Duration(nil), got...)
}

func TestLateTriesAfterEachPause(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	cancel() // the caller gave up: the tries go on
	got := lateTries(t, ctx, time.Time{}, 0)
	require.Len(t, got, len(LatePauses), "one try after each pause")
	var sum time.Duration
	for i, p := range LatePauses {
		sum += p
		require.GreaterOrEqual(t, got[i], sum, "try %d comes after the pauses before it", i+1)
	}
}

func TestLateStopsWhenDone(t *testing.T) {
	t.Parallel()
	ctx := context.WithValue(context.Background(), key{}, "v")
	got := lateTries(t, ctx, time.Time{}, 2)
	require.Len(t, got, 2, "no try after undo reported done")
}

func TestLateStopsAtItsBound(t *testing.T) {
	t.Parallel()
	ctx := context.WithValue(context.Background(), key{}, "v")
	// Room for the first two pauses (300 ms), not the third (1 s more).
	got := lateTries(t, ctx, time.Now().Add(800*time.Millisecond), 0)
	require.Len(t, got, 2, "no try at or after the bound")
}

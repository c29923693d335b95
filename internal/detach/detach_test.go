package detach

import (
	"context"
	"testing"
	"time"

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

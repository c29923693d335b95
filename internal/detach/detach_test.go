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

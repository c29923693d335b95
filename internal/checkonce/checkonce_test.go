package checkonce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRun: callers at once run one check; a failed check runs again; a
// passed one never; a waiter whose context ends returns its error.
func TestRun(t *testing.T) {
	ctx := context.Background()
	c := New()
	var runs atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 32)
	failFirst := true
	var mu sync.Mutex
	check := func(ctx context.Context) error {
		runs.Add(1)
		started <- struct{}{}
		<-release
		mu.Lock()
		defer mu.Unlock()
		if failFirst {
			failFirst = false
			return errors.New("down")
		}
		return nil
	}

	// The first check fails: its caller gets the error, and one waiter
	// runs the check again, which passes for the others.
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { errs <- c.Run(ctx, "test", check) })
	}
	<-started
	time.Sleep(20 * time.Millisecond)

	wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	err := c.Run(wctx, "test", check)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "test: waiting for the check in progress")

	close(release)
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
		}
	}
	require.Equal(t, 1, failed, "the caller of the failed check")
	require.EqualValues(t, 2, runs.Load(), "the failed check and one more")
	require.NoError(t, c.Run(ctx, "test", check))
	require.EqualValues(t, 2, runs.Load(), "a passed check is not run again")
}

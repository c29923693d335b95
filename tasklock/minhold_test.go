package tasklock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

// TestMinHoldOncePerWindow runs one keyed job on two hosts whose app clocks
// disagree by ten minutes. Each host tries the job far more often than its
// window and finishes it at once; with MinHold every run starts at least
// MinHold after the previous one on the database clock, whichever host runs
// it, because the hold is an expiry the database compares with its own
// clock.
func TestMinHoldOncePerWindow(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		const ttl, hold = 5 * time.Second, 600 * time.Millisecond
		d := e.open(t)
		type run struct {
			host string
			at   time.Time // acquisition on the database clock
		}
		var mu sync.Mutex
		var runs []run
		var problems []string // from the hosts' goroutines
		problem := func(format string, args ...any) {
			mu.Lock()
			problems = append(problems, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		host := func(name string, skew time.Duration) func(ctx context.Context) {
			k := keyed(t, d, tasklock.Config{TTL: ttl, MinHold: hold, Now: func() time.Time { return time.Now().Add(skew) }})
			return func(ctx context.Context) {
				for ctx.Err() == nil {
					err := k.Do(ctx, "report", func(_ context.Context, l *tasklock.Lease) error {
						mu.Lock()
						runs = append(runs, run{name, l.ExpiresAt().Add(-ttl)})
						mu.Unlock()
						if want := l.ExpiresAt().Add(hold - ttl); !l.HoldUntil().Equal(want) {
							problem("%s: HoldUntil %v, want %v", name, l.HoldUntil(), want)
						}
						return nil
					})
					if err != nil && ctx.Err() == nil && !errors.Is(err, dialect.ErrLeaseHeld) {
						problem("%s: %v", name, err)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
		ahead, behind := host("ahead", 5*time.Minute), host("behind", -5*time.Minute)
		ctx, cancel := context.WithCancel(ctxT(t))
		var wg sync.WaitGroup
		wg.Go(func() { ahead(ctx) })
		wg.Go(func() { behind(ctx) })
		// Run until at least four windows have passed on the database
		// clock, whatever the machine's load.
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(runs) >= 4
		}, 30*time.Second, 20*time.Millisecond)
		cancel()
		wg.Wait()
		require.Empty(t, problems)

		slices.SortFunc(runs, func(a, b run) int { return a.at.Compare(b.at) })
		for i := 1; i < len(runs); i++ {
			gap := runs[i].at.Sub(runs[i-1].at)
			require.GreaterOrEqual(t, gap, hold, "run %d (%s) started %v after run %d (%s), within the hold", i, runs[i].host, gap, i-1, runs[i-1].host)
		}
	})
}

// TestMinHoldRelease checks what a holder sees: Release under a hold
// reports success and ends the lease locally, the key stays taken until the
// hold ends, and a release after the hold frees the key at once.
func TestMinHoldRelease(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		k, _ := setup(t, e, tasklock.Config{TTL: 5 * time.Second, MinHold: time.Hour})
		ctx := ctxT(t)
		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		require.WithinDuration(t, l.ExpiresAt().Add(time.Hour-5*time.Second), l.HoldUntil(), 0)
		ok, err := l.Release(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.ErrorIs(t, l.Err(), tasklock.ErrReleased)
		ok, err = l.Release(ctx)
		require.NoError(t, err)
		require.False(t, ok, "a second release runs no statement")
		_, err = k.Acquire(ctx, "job")
		require.ErrorIs(t, err, dialect.ErrLeaseHeld, "held for an hour after the acquisition")
		st, err := k.Inspect(ctx, "job")
		require.NoError(t, err)
		require.False(t, st.ExpiresAt.Before(l.HoldUntil()))

		ok, err = k.ForceRelease(ctx, "job")
		require.NoError(t, err)
		require.True(t, ok, "an operator ends a hold")
		_, err = k.Acquire(ctx, "job")
		require.NoError(t, err)

		short, _ := setup(t, e, tasklock.Config{TTL: 5 * time.Second, MinHold: time.Millisecond})
		l, err = short.Acquire(ctx, "job")
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond)
		ok, err = l.Release(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		l2, err := short.Acquire(ctx, "job")
		require.NoError(t, err, "a release after the hold frees the key at once")
		require.Equal(t, l.Fence()+1, l2.Fence())
	})
}

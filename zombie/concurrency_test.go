package zombie_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/zombie"
)

// TestReaperWithClaimers: a reaper sweeping every 2 ms while 16 workers claim
// and ack (heartbeating, as a loaded deployment should) never makes two workers hold a row (every row is acked exactly
// once), and no retryable error reaches a caller. On MariaDB it also runs
// without the recommended indexes, logging the retries each variant needed.
func TestReaperWithClaimers(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			for _, s := range engineStrategies(t, en) {
				variants := []bool{false}
				if en.kind == testengine.MySQL {
					variants = append(variants, true)
				}
				for _, noIndexes := range variants {
					name := s.String()
					if noIndexes {
						name += "/no-indexes"
					}
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						reaperUnderLoad(t, open(t, en), s, noIndexes)
					})
				}
			}
		})
	}
}

func reaperUnderLoad(t *testing.T, e *env, s dialect.Strategy, noIndexes bool) {
	const rows, workers, abandoned = 1000, 16, 3
	ctx := ctxT(t)
	start := time.Now()
	cc := jobsConfig(10)
	cc.Strategy = s
	cc.HeartbeatInterval = 250 * time.Millisecond
	cs := createTable(t, e, cc, noIndexes)
	insertRows(t, e, cc.Table, "PENDING", rows, 500)
	c, err := claim.New[struct{}](e.d, cc, nil)
	require.NoError(t, err)
	// A few dead workers' batches, for the reaper to return mid-run.
	for range abandoned {
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 10, b.Len())
	}

	var mu sync.Mutex
	acked := map[int64]int{}
	var errs []error
	var returned int64
	lostAcks := 0
	r, err := zombie.New(e.d, cc, zombie.Config{Timeout: 3 * time.Second, BatchLimit: 5, Observer: sweeps(func(res zombie.Result) { mu.Lock(); returned += res.Returned; mu.Unlock() }, func(err error) { mu.Lock(); errs = append(errs, fmt.Errorf("reaper: %w", err)); mu.Unlock() })})
	require.NoError(t, err)
	rctx, stop := context.WithCancel(ctx)
	reaperDone := make(chan error, 1)
	go func() { reaperDone <- r.Run(rctx, 2*time.Millisecond) }()

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			fail := func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
			for ctx.Err() == nil {
				b, err := c.Claim(ctx)
				if err != nil {
					fail(err)
					return
				}
				if b.Len() == 0 {
					st, err := c.Stats(ctx)
					if err != nil {
						fail(err)
						return
					}
					if st.Pending == 0 && st.Processing == 0 {
						return
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				stop := b.KeepAlive(ctx)
				err = b.AckAll(ctx)
				stop()
				// Under heavy load (SQLite's single writer with the race
				// detector) an ack can wait longer than the timeout and the
				// reaper takes its rows: that is the guarantee working, not
				// a failure. Those rows are acked by whoever re-claims them.
				lostIDs := map[any]bool{}
				var lost *claim.LostError
				if errors.As(err, &lost) {
					for _, id := range lost.IDs {
						lostIDs[id] = true
					}
					err = nil
				}
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				lostAcks += len(lostIDs)
				for _, id := range b.IDs() {
					if !lostIDs[id] {
						acked[id.(int64)]++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stop()
	require.NoError(t, <-reaperDone)

	for _, err := range errs {
		require.False(t, errors.Is(err, dialect.ErrRetryable), "retryable error surfaced: %v", err)
	}
	require.Empty(t, errs)
	require.Len(t, acked, rows)
	for id, n := range acked {
		require.Equal(t, 1, n, "row %d acked %d times", id, n)
	}
	st, err := cs.Stats(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, rows, st.Done)
	require.EqualValues(t, abandoned*10+int64(lostAcks), returned, "the abandoned batches came back (and the rows of acks that lost the race)")
	t.Logf("%s %s indexes=%v: %d rows, %d workers, %d rows reaped (%d from slow live workers), %d dialect retries, %v",
		e.kind, s, !noIndexes, rows, workers, returned, lostAcks, store.Retries(e.d), time.Since(start).Round(time.Millisecond))
}

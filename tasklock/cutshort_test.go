package tasklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

// TestAcquireCutShort cuts acquisitions short by their context at points
// swept over twice an acquisition's time, 300 tries, with a TTL of a
// minute: each fails with its context's error or succeeds (and is
// released), and afterwards the key is free within seconds, not at the
// TTL. An acquisition of unknown outcome releases what it may have taken,
// also where the server finished the statement after Acquire returned and
// after its first release (MySQL does, once go-sql-driver/mysql closed the
// connection).
func TestAcquireCutShort(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		k, d := setup(t, e, tasklock.Config{TTL: time.Minute})
		other := keyed(t, d, tasklock.Config{TTL: time.Minute})
		ctx := ctxT(t)
		// One acquisition uncut, for the time one takes.
		t0 := time.Now()
		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		span := max(time.Since(t0), time.Millisecond)
		_, err = l.Release(ctx)
		require.NoError(t, err)
		const tries = 300
		failed := 0
		for i := range tries {
			cctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(2*span*time.Duration(i)/tries, cancel)
			l, err := k.Acquire(cctx, "job")
			cancel()
			switch {
			case err == nil:
				_, err = l.Release(ctx)
				require.NoError(t, err)
			case errors.Is(err, dialect.ErrLeaseHeld):
				// An earlier try's acquisition, committed after its
				// Acquire returned: its late release frees the key.
				time.Sleep(20 * time.Millisecond)
			default:
				failed++
				require.ErrorIs(t, err, context.Canceled, "try %d: an acquisition cut short", i)
			}
		}
		t.Logf("%d of %d tries cut short by their context", failed, tries)
		require.NotZero(t, failed, "no try was cut short: the sweep misses the acquisition")
		var last error
		require.Eventually(t, func() bool {
			l, err := other.Acquire(ctx, "job")
			if err == nil {
				_, err = l.Release(ctx)
			}
			last = err
			return err == nil
		}, 10*time.Second, 20*time.Millisecond, "a cut-short acquisition kept the key")
		require.NoError(t, last)
	})
}

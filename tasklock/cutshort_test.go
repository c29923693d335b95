package tasklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
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
			cctx, cancel := cutAt(span, i, tries)
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
		requireSomeCut(t, e, failed, "acquisition")
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

// cutAt returns the context of try i of tries, cancelled at a point swept
// over twice span, the time one uncut call takes.
func cutAt(span time.Duration, i, tries int) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(2*span*time.Duration(i)/time.Duration(tries), cancel)
	return ctx, cancel
}

// TestRenewAndReleaseCutShort cuts renewals and releases short by their
// context at points swept over twice the call's time, 300 tries each: each
// fails with its context's error whatever the driver reported (a statement
// go-sql-driver/mysql never sent is a "bad connection" to it), or
// succeeds. A renewal cut short leaves the lease held; a release cut short
// is retried by a second Release, and afterwards another holder takes the
// key at once.
func TestRenewAndReleaseCutShort(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		k, d := setup(t, e, tasklock.Config{TTL: time.Minute})
		other := keyed(t, d, tasklock.Config{TTL: time.Minute})
		ctx := ctxT(t)
		const tries = 300
		l, err := k.Acquire(ctx, "job")
		require.NoError(t, err)
		t0 := time.Now()
		require.NoError(t, l.Renew(ctx))
		span := max(time.Since(t0), 100*time.Microsecond)
		failed := 0
		for i := range tries {
			cctx, cancel := cutAt(span, i, tries)
			err := l.Renew(cctx)
			cancel()
			if err != nil {
				failed++
				require.ErrorIs(t, err, context.Canceled, "renewal %d cut short", i)
			}
		}
		t.Logf("%d of %d renewals cut short by their context", failed, tries)
		requireSomeCut(t, e, failed, "renewal")
		require.NoError(t, l.Err(), "a renewal cut short ended the lease")
		_, err = other.Acquire(ctx, "job")
		require.ErrorIs(t, err, dialect.ErrLeaseHeld, "the lease is still held after its renewals")
		t0 = time.Now()
		_, err = l.Release(ctx)
		require.NoError(t, err)
		span = max(time.Since(t0), 100*time.Microsecond)

		failed = 0
		for i := range tries {
			l, err := k.Acquire(ctx, "job")
			require.NoError(t, err, "try %d: the key is free after the last try's release", i)
			cctx, cancel := cutAt(span, i, tries)
			_, err = l.Release(cctx)
			cancel()
			if err != nil {
				failed++
				require.ErrorIs(t, err, context.Canceled, "release %d cut short", i)
				_, err = l.Release(ctx) // what Release's doc says to do
				require.NoError(t, err)
			}
		}
		t.Logf("%d of %d releases cut short by their context", failed, tries)
		requireSomeCut(t, e, failed, "release")
		l, err = other.Acquire(ctx, "job")
		require.NoError(t, err, "the key is free after the releases")
		_, err = l.Release(ctx)
		require.NoError(t, err)
	})
}

// requireSomeCut fails unless some of a sweep's calls were cut short, on
// the engines with a server: an embedded SQLite statement takes tens of
// microseconds, about a timer's resolution, and a sweep there may cut none.
func requireSomeCut(t *testing.T, e engine, cut int, what string) {
	t.Helper()
	if e.name == testengine.SQLite {
		return
	}
	require.NotZero(t, cut, "no %s was cut short: the sweep misses it", what)
}

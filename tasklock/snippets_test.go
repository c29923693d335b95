package tasklock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

// The tests in this file run the code snippets of the documentation
// (README.md and the tasklock package doc) verbatim, between the
// "snippet" markers, on every engine; the repository's snippet test checks
// that the documentation still holds exactly this code.

func TestSnippetReadmeLease(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		d := e.open(t)
		ctx := ctxT(t)
		var fences []int64
		buildReport := func(ctx context.Context, fence int64) error {
			fences = append(fences, fence)
			return ctx.Err()
		}
		run := func() error {
			// snippet: readme-tasklock
			if err := tasklock.CreateTable(ctx, d, "claimlock_lease"); err != nil { // library-managed key table
				return err
			}
			k, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable("claimlock_lease"), TTL: 30 * time.Second})
			if err != nil {
				return err
			}
			err = k.Do(ctx, "report:daily", func(ctx context.Context, l *tasklock.Lease) error {
				// ctx is cancelled if the lease is lost or its local deadline passes.
				return buildReport(ctx, l.Fence()) // attach the fence to protected writes
			})
			if errors.Is(err, dialect.ErrLeaseHeld) {
				return nil // someone else is running it
			}
			return err
			// end snippet
		}
		require.NoError(t, run())
		require.NoError(t, run())
		require.Equal(t, []int64{1, 2}, fences, "each run a fresh, larger fence")
	})
}

func TestSnippetGodocLease(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		d := e.open(t)
		ctx := ctxT(t)
		require.NoError(t, tasklock.CreateTable(ctx, d, "leases"))
		var sent atomic.Int64
		sendReport := func(ctx context.Context, fence int64) error {
			sent.Add(fence)
			return nil
		}
		run := func() error {
			// snippet: godoc-tasklock
			lk, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: 30 * time.Second})
			if err != nil {
				return err
			}
			return lk.Do(ctx, "nightly-report", func(ctx context.Context, l *tasklock.Lease) error {
				return sendReport(ctx, l.Fence())
			})
			// end snippet
		}
		require.NoError(t, run())
		require.EqualValues(t, 1, sent.Load())
	})
}

package claim_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
)

// operator changes rows under a running batch as an operator or another
// writer would: "delete" deletes one row, "reset" returns another to
// pending (status and token, nothing else), "both" does both. It returns
// the keys it took from the batch, in key order.
func operator(t *testing.T, e *env, table, what string, ids []any) []any {
	t.Helper()
	deleted, reset := ids[3], ids[7]
	var took []any
	if what == "delete" || what == "both" {
		require.EqualValues(t, 1, e.exec(t, "DELETE FROM "+table+" WHERE id = ?", deleted))
		took = append(took, deleted)
	}
	if what == "reset" || what == "both" {
		require.EqualValues(t, 1, e.exec(t, "UPDATE "+table+" SET status = 'PENDING', token = NULL WHERE id = ?", reset))
		took = append(took, reset)
	}
	return took
}

// lostSeen collects the keys of the rows OpLost events of token batches
// reported, and tells when a key was reported.
type lostSeen struct {
	mu   sync.Mutex
	ids  []any
	seen map[any]chan struct{}
}

func newLostSeen() *lostSeen { return &lostSeen{seen: map[any]chan struct{}{}} }

func (l *lostSeen) ch(id any) chan struct{} {
	c, ok := l.seen[id]
	if !ok {
		c = make(chan struct{})
		l.seen[id] = c
	}
	return c
}

// observe is the observer's part.
func (l *lostSeen) observe(e observe.Event) {
	if e.Op != claim.OpLost || e.Held {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Lost != len(e.LostIDs) {
		panic(fmt.Sprintf("OpLost counts %d rows but lists %v", e.Lost, e.LostIDs))
	}
	for _, id := range e.LostIDs {
		l.ids = append(l.ids, id)
		close(l.ch(id))
	}
}

// reported returns the channel closed once id was reported lost.
func (l *lostSeen) reported(id any) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ch(id)
}

func (l *lostSeen) all() []any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids)
}

// TestPartialLossKeepAlive: rows deleted or reset by an operator under a
// batch kept alive by KeepAlive cost those rows only. The heartbeat reports
// them by key (OpLost, Batch.Lost), their row contexts end with a LostError
// naming them while the others' do not, the batch's context stays live and
// its local deadline keeps moving; an ack of a lost row reports it lost and
// writes nothing, AckAll acks the others exactly once and reports the rows
// the keep-alive found lost. The reset row stays pending: the batch never
// touches it again.
func TestPartialLossKeepAlive(t *testing.T) {
	t.Parallel()
	for _, what := range []string{"delete", "reset", "both"} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
				ctx := ctxT(t)
				seen := newLostSeen()
				var acked atomic.Int64
				c, cfg := jobSetup(t, e, s, 14, func(cfg *claim.Config) {
					cfg.BatchSize = 14
					cfg.ReapTimeout, cfg.HeartbeatInterval = time.Minute, 20*time.Millisecond
					watch(cfg, seen.observe)
					onAck(cfg, func(n int) { acked.Add(int64(n)) })
				})
				b, err := c.Claim(ctx)
				require.NoError(t, err)
				require.Equal(t, 14, b.Len())
				ids := b.IDs()
				bctx, cancel := b.Context(ctx)
				defer cancel()
				rctx := make([]context.Context, len(ids))
				for i, id := range ids {
					var rcancel context.CancelFunc
					rctx[i], rcancel = b.RowContext(ctx, id)
					defer rcancel()
				}
				stranger, scancel := b.RowContext(ctx, int64(1<<40))
				defer scancel()
				require.ErrorIs(t, context.Cause(stranger), claim.ErrNotHeld, "a row context of a key not in the batch")

				stop := b.KeepAlive(ctx)
				defer stop()
				took := operator(t, e, cfg.Table, what, ids)
				for _, id := range took {
					select {
					case <-seen.reported(id):
					case <-time.After(30 * time.Second):
						t.Fatalf("no OpLost reported row %v (lost so far: %v)", id, b.Lost())
					}
				}
				require.Equal(t, took, b.Lost())
				require.ElementsMatch(t, took, seen.all(), "OpLost reports each lost row once")

				for i, id := range ids {
					if slices.Contains(took, id) {
						require.Error(t, rctx[i].Err(), "the row context of lost row %v did not end", id)
						var le *claim.LostError
						require.ErrorAs(t, context.Cause(rctx[i]), &le)
						require.Contains(t, le.IDs, id)
						continue
					}
					require.NoError(t, rctx[i].Err(), "the row context of held row %v ended", id)
				}
				require.NoError(t, b.Err(), "the batch ended on a partial loss")
				require.NoError(t, bctx.Err())
				require.ElementsMatch(t, slices.DeleteFunc(slices.Clone(ids), func(id any) bool { return slices.Contains(took, id) }), b.Unacked())

				// The local deadline still moves with heartbeats that find
				// the rows left.
				d0, ok := b.Deadline()
				require.True(t, ok)
				waitFor(t, "a heartbeat after the loss to move the deadline", func() bool {
					d, _ := b.Deadline()
					return d.After(d0)
				})

				// An ack of a lost row reports it, writes nothing.
				var le *claim.LostError
				require.ErrorAs(t, b.Ack(ctx, took[0]), &le)
				require.Equal(t, []any{took[0]}, le.IDs)
				require.ErrorIs(t, b.Fail(ctx, took[0], errors.New("x")), dialect.ErrClaimLost)
				require.Zero(t, acked.Load())

				err = b.AckAll(ctx)
				require.ErrorAs(t, err, &le, "AckAll reports the rows the keep-alive found lost")
				require.ElementsMatch(t, took, le.IDs)
				require.ErrorIs(t, b.Err(), claim.ErrBatchDone)
				require.EqualValues(t, 14-len(took), acked.Load(), "every row still held acked once")
				reset := int64(0)
				if what != "delete" {
					reset = 1
				}
				requireStats(t, c, reset, 0, int64(14-len(took)), 0)
				require.NoError(t, bctx.Err(), "completing the batch does not cancel its context")
			})
		})
	}
}

// TestPartialLossRun: an operator deletes the row whose handler is running
// and resets a later row of the same batch. The running handler's context
// ends with a LostError naming its row; the reset row is never handed to
// the handler; the batch's other 12 rows are handled with live contexts and
// acked exactly once, none failed, none released, the reset row left
// pending.
func TestPartialLossRun(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := ctxT(t)
		seen := newLostSeen()
		var acked, failed, released atomic.Int64
		c, cfg := jobSetup(t, e, s, 14, func(cfg *claim.Config) {
			cfg.BatchSize = 14
			cfg.ReapTimeout, cfg.HeartbeatInterval = time.Minute, 20*time.Millisecond
			watch(cfg, seen.observe)
			watch(cfg, func(e observe.Event) {
				switch e.Op {
				case claim.OpAck:
					acked.Add(int64(e.Acked))
				case claim.OpFail:
					failed.Add(int64(e.Failed))
				case claim.OpRelease:
					released.Add(int64(e.Rows))
				}
			})
		})
		// The batch's keys are the scope's 14 lowest: Run hands them out in
		// key order, the deleted one first.
		ids := make([]any, 14)
		for i := range ids {
			ids[i] = int64(i + 1)
		}
		deleted, reset := ids[0], ids[5]

		var mu sync.Mutex
		calls := map[any]int{}
		liveErr := map[any]error{} // context errors of the held rows' handlers at their end
		var deletedCause error
		started := make(chan struct{})
		rctx, stopRun := context.WithCancel(ctx)
		defer stopRun()
		runErr := make(chan error, 1)
		go func() {
			runErr <- c.Run(rctx, claim.WorkerConfig[job]{
				PollMin: time.Millisecond, PollMax: 10 * time.Millisecond,
				ShutdownMode: claim.ShutdownFinish,
				Handler: func(ctx context.Context, r claim.Row[job]) error {
					mu.Lock()
					calls[r.ID]++
					mu.Unlock()
					if r.ID != deleted {
						mu.Lock()
						liveErr[r.ID] = ctx.Err()
						mu.Unlock()
						return nil
					}
					close(started)
					// The row context ends before its loss is reported.
					select {
					case <-ctx.Done():
					case <-seen.reported(deleted):
					}
					mu.Lock()
					deletedCause = context.Cause(ctx)
					mu.Unlock()
					return errors.New("stopped")
				},
			})
		}()
		<-started
		// With ShutdownFinish this only stops new claims: the batch is
		// processed to its end, and the reset row is not claimed again.
		stopRun()
		// The reset first: the heartbeat that finds the deleted row gone
		// (and so lets the loop go on) finds the reset one too.
		if e.exec(t, "UPDATE "+cfg.Table+" SET status = 'PENDING', token = NULL WHERE id = ?", reset) != 1 ||
			e.exec(t, "DELETE FROM "+cfg.Table+" WHERE id = ?", deleted) != 1 {
			t.Fatal("the operator's statements changed nothing")
		}
		select {
		case err := <-runErr:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not finish the batch")
		}

		mu.Lock()
		defer mu.Unlock()
		var le *claim.LostError
		require.ErrorAs(t, deletedCause, &le, "the deleted row's handler context did not end with its loss")
		require.Contains(t, le.IDs, deleted)
		require.ElementsMatch(t, []any{deleted, reset}, seen.all())
		require.Zero(t, calls[reset], "the reset row, lost before its turn, was handed out")
		require.Equal(t, 1, calls[deleted])
		for _, id := range ids {
			if id == deleted || id == reset {
				continue
			}
			require.Equal(t, 1, calls[id], "row %v", id)
			require.NoError(t, liveErr[id], "the handler context of held row %v ended", id)
		}
		require.EqualValues(t, 12, acked.Load(), "the 12 rows still held acked once")
		require.Zero(t, failed.Load(), "a handler stopped by its row's loss is not a failure")
		require.Zero(t, released.Load(), "nothing to release: every row held was processed")
		requireStats(t, c, 1, 0, 12, 0)
	})
}

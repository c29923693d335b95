// Package hold answers, from any code that has the work's context, whether
// the claim or lease the work depends on is still held: the last check
// before a side effect outside the database.
//
// Pass the context claimlock handed to the work (claim.Batch.Context,
// claim.Batch.RowContext, a claim.Claimer.Run handler's context,
// claim.Held.Context, a claim.Holder.Run handler's context,
// tasklock.Lease.Context, a tasklock.Locker.Do function's context) down to
// the code that sends, and call Check right before the send.
//
//	if err := hold.Check(ctx); err != nil {
//		return err // the rows may be someone else's by now: do not send
//	}
//	send(ctx, msg)
//
// Why not ctx.Err(): a context learns of a deadline when a timer goroutine
// runs, and a process resumed after a freeze (a stopped VM, SIGSTOP, a long
// GC pause) can reach the send before that goroutine has run. Check compares
// each local deadline with the clock itself, so right after such a freeze it
// reports the loss at once. A freeze between Check and the send itself is
// still possible; keep the two adjacent, and make the effect idempotent
// where it can be (the claim's token protects the database, not the
// outside world).
package hold

import (
	"context"
	"errors"

	"github.com/claimlock/claimlock/internal/holdctx"
)

// ErrNoHold is what Check returns for a context that carries no claim or
// lease of claimlock: the check cannot vouch for anything, which is
// usually a context that was not passed down (context.Background() in the
// send path).
var ErrNoHold = errors.New("hold: the context carries no claim or lease")

// Check returns nil while every claim and lease ctx carries is held and
// inside its local deadline, compared with the clock now. Otherwise it
// returns why not: an error matching dialect.ErrClaimLost (with
// dialect.ErrLocalDeadline once the deadline passed), dialect.ErrLeaseLost
// (dialect.ErrLocalDeadline), the reason a batch or lease ended
// (claim.ErrBatchDone, a release), or [ErrNoHold] when ctx carries none.
// It does not look at ctx.Err(): a cancelled context whose rows are still
// held (a shutdown that releases them after the handler returns) is held.
func Check(ctx context.Context) error {
	carried, err := holdctx.Check(ctx)
	if !carried {
		return ErrNoHold
	}
	return err
}

// Carried reports whether ctx carries any claim or lease that Check
// checks, for code that runs both under a claim and without one.
func Carried(ctx context.Context) bool {
	carried, _ := holdctx.Check(ctx)
	return carried
}

package tasklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/holdctx"
	"github.com/claimlock/claimlock/internal/store"
)

// Lease is one acquisition of a key. Its owner token is fresh for every
// acquisition; its methods are safe for concurrent use.
//
// A lease ends when it is released, when a renewal finds it taken or freed
// ([dialect.ErrLeaseLost]), or when its local deadline passes
// ([dialect.ErrLocalDeadline]): (local start of the last successful acquire or renew statement) + TTL -
// SafetyMargin. The deadline is enforced by a timer, so it fires on time
// even when the database stops answering. When a lease ends, [Lease.Done]
// is closed and every context from [Lease.Context] is cancelled.
type Lease struct {
	k     *Locker
	key   any
	owner string
	fence int64

	ctx    context.Context
	cancel context.CancelCauseFunc

	// holdUntil is acquisition + MinHold on the database clock (zero
	// without MinHold): Release and Finish keep the key until then.
	holdUntil time.Time

	mu        sync.Mutex
	expiresAt time.Time   // DB clock, latest known
	deadline  time.Time   // local clock (cfg.Now)
	timer     *time.Timer // fires at deadline
	gen       uint64      // bumped whenever timer is re-armed
	ka        *keepAlive  // running keep-alive, or nil
	released  bool        // a Release already freed the row
	// children cancel the live contexts from [Lease.Context]; end calls
	// them before it returns, so that no free statement can follow the
	// end of the lease while a holder's context is still live (a
	// context.AfterFunc on l.ctx would cancel them on a goroutine of its
	// own, possibly after the row was freed).
	children map[*context.CancelCauseFunc]struct{}
}

func newLease(ctx context.Context, k *Locker, key any, owner string, info store.LeaseInfo, start time.Time) *Lease {
	l := &Lease{k: k, key: key, owner: owner, fence: info.Fence, expiresAt: info.ExpiresAt}
	if k.cfg.MinHold > 0 {
		// The acquire statement wrote expiry = its now + TTL: its now is
		// the acquisition time on the database clock.
		l.holdUntil = info.ExpiresAt.Add(k.cfg.MinHold - k.cfg.TTL)
	}
	l.ctx, l.cancel = context.WithCancelCause(k.leaseBase(ctx))
	l.mu.Lock()
	l.armLocked(start.Add(k.cfg.TTL - k.cfg.SafetyMargin))
	l.mu.Unlock()
	return l
}

// Key returns the leased key.
func (l *Lease) Key() any { return l.key }

// Owner returns the owner token: fresh random text for every acquisition,
// written to the owner column. On a table without an owner column
// ([TaskTableNoOwner]) it is the lease's stamp, the lock time it wrote read
// back as an integer, which a renewal may move.
func (l *Lease) Owner() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owner
}

// Fence returns the fencing token: the fence column after this acquisition,
// strictly greater than the fence of every earlier acquisition of the key
// (0 when the table has no fence column). Attach it to every write the lease
// protects and have the target reject writes with a smaller fence.
func (l *Lease) Fence() int64 { return l.fence }

// ExpiresAt returns the expiry written by the last successful acquire or
// renew, on the database clock. It is informational: compare it with
// nothing local; the holder stops at [Lease.Deadline].
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Deadline returns the lease's local deadline, on the Config.Now clock:
// (local start of the last successful acquire or renew) + TTL -
// SafetyMargin. ok is always true: every lease has one (the signature is
// [github.com/claimlock/claimlock/claim.Batch.Deadline]'s, where it may
// not).
func (l *Lease) Deadline() (deadline time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline, true
}

// deadlineNow is Deadline without its ok.
func (l *Lease) deadlineNow() time.Time {
	d, _ := l.Deadline()
	return d
}

// HoldUntil returns the end of the lease's minimum hold, acquisition time
// + Config.MinHold on the database clock, or the zero time without
// MinHold. Like [Lease.ExpiresAt] it is informational: no acquisition of the
// key succeeds before it, whichever host tries.
func (l *Lease) HoldUntil() time.Time { return l.holdUntil }

// Done returns a channel closed when the lease ends: released, lost, or past
// its local deadline.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err returns nil while the lease is held, and afterwards why it ended:
// [ErrReleased], or an error matching [dialect.ErrLeaseLost] (and
// [dialect.ErrLocalDeadline] when the local deadline passed).
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Context returns a context derived from parent that is also cancelled when
// the lease ends, with [Lease.Err] as its cause (see context.Cause). Call
// the returned cancel function when done with it.
//
// The context is cancelled by the time the lease has ended: before
// [Lease.Done] is closed, and before Release, Finish or [Locker.Do] send the
// statement that lets another holder acquire the key.
func (l *Lease) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(holdctx.With(parent, l.holdErr))
	l.mu.Lock()
	if l.ctx.Err() != nil {
		l.mu.Unlock()
		cancel(context.Cause(l.ctx))
		return ctx, func() { cancel(context.Canceled) }
	}
	if l.children == nil {
		l.children = map[*context.CancelCauseFunc]struct{}{}
	}
	l.children[&cancel] = struct{}{}
	l.mu.Unlock()
	return ctx, func() {
		l.mu.Lock()
		delete(l.children, &cancel)
		l.mu.Unlock()
		cancel(context.Canceled)
	}
}

// holdErr is the lease's check for package hold: [Lease.Err], and the
// local deadline compared with the clock itself (a process resumed after a
// freeze sees it before the deadline's timer has run).
func (l *Lease) holdErr() error {
	if err := l.Err(); err != nil {
		return err
	}
	if !l.k.cfg.Now().Before(l.deadlineNow()) {
		return fmt.Errorf("%w: %w (key %v, fence %d)", dialect.ErrLeaseLost, dialect.ErrLocalDeadline, l.key, l.fence)
	}
	return nil
}

// armLocked sets the local deadline and (re)arms the timer that ends the
// lease at it. Callers hold l.mu.
func (l *Lease) armLocked(deadline time.Time) {
	l.deadline = deadline
	l.gen++
	gen := l.gen
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timer = time.AfterFunc(deadline.Sub(l.k.cfg.Now()), func() { l.expire(gen) })
}

// expire ends the lease at its local deadline unless the timer was re-armed
// meanwhile.
func (l *Lease) expire(gen uint64) {
	l.mu.Lock()
	if gen != l.gen {
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.end(fmt.Errorf("%w: %w (key %v, fence %d)", dialect.ErrLeaseLost, dialect.ErrLocalDeadline, l.key, l.fence))
}

// end ends the lease with cause, once; it reports whether this call did.
// Every context from [Lease.Context] is cancelled before l.ctx (and so
// [Lease.Done]), and before end returns.
func (l *Lease) end(cause error) bool {
	l.mu.Lock()
	if l.ctx.Err() != nil {
		l.mu.Unlock()
		return false
	}
	for c := range l.children {
		(*c)(cause)
	}
	clear(l.children)
	l.cancel(cause)
	l.gen++
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	if cause != ErrReleased {
		cfg := l.k.cfg
		cfg.Logger.Warn("tasklock: lease lost", "key", l.key, "fence", l.fence, "err", cause)
		l.k.observe(l.ctx, OpLost, l.key, l.Owner(), l.fence, false, cause, time.Now())
	}
	return true
}

// Renew extends the lease by the TTL on the database clock and moves the
// local deadline to (local start of this statement) + TTL - SafetyMargin.
// It returns an error matching [dialect.ErrLeaseLost] when the lease has ended
// (locally or in the database: someone else took it, or it was released or
// force-released); the lease then ends. Other errors (a timeout, a broken
// connection) leave the lease running until its local deadline; renewing
// again is safe. A Renew that failed because ctx ended matches ctx's
// error, whatever the driver reported.
func (l *Lease) Renew(ctx context.Context) error {
	start := time.Now()
	err := l.renew(ctx)
	l.observeRenew(ctx, err, start)
	return err
}

func (l *Lease) renew(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return fmt.Errorf("tasklock: renew %v: %w", l.key, l.lostErr(err))
	}
	cfg := l.k.cfg
	start := cfg.Now()
	info, err := l.k.ls.Renew(ctx, l.key, l.Owner(), cfg.TTL)
	took := cfg.Now().Sub(start)
	if err != nil {
		if isLost(err) {
			l.end(fmt.Errorf("tasklock: renew %v (fence %d): %w", l.key, l.fence, err))
			return fmt.Errorf("tasklock: renew %v: %w", l.key, err)
		}
		err = errclass.EndedWith(ctx, err)
		if errors.Is(ctx.Err(), context.Canceled) {
			// The caller gave up (a keep-alive stopped, Release): not a failure.
			return fmt.Errorf("tasklock: renew %v: %w", l.key, err)
		}
		cfg.Logger.Warn("tasklock: renew failed", "key", l.key, "fence", l.fence, "err", err)
		return fmt.Errorf("tasklock: renew %v: %w", l.key, err)
	}
	l.mu.Lock()
	if info.Owner != "" {
		// Without an owner column this is the new stamp the row holds: a
		// Release must use it to free the row, even if the lease ended
		// while the statement was in flight.
		l.owner = info.Owner
	}
	if l.ctx.Err() != nil {
		// The local deadline passed (or Release ran) while the statement
		// was in flight: the holder was told to stop, so the lease stays
		// ended even though the row was extended. Release frees the row.
		l.mu.Unlock()
		return fmt.Errorf("tasklock: renew %v: %w", l.key, l.lostErr(l.Err()))
	}
	if info.ExpiresAt.After(l.expiresAt) {
		l.expiresAt = info.ExpiresAt
	}
	if d := start.Add(cfg.TTL - cfg.SafetyMargin); d.After(l.deadline) {
		l.armLocked(d)
	}
	l.mu.Unlock()
	cfg.Logger.Debug("tasklock: renewed", "key", l.key, "fence", l.fence, "took", took)
	return nil
}

func isLost(err error) bool {
	return errors.Is(err, dialect.ErrLeaseLost)
}

// lostErr turns the reason a lease ended into the error Renew reports: a
// released lease is lost too, as far as renewing goes.
func (l *Lease) lostErr(cause error) error {
	if isLost(cause) {
		return cause
	}
	return fmt.Errorf("%w: %w", dialect.ErrLeaseLost, cause)
}

// Release stops the keep-alive, ends the lease locally (cancelling its
// contexts with [ErrReleased]) and frees the row if this lease still owns
// it. It returns (true, nil) when it freed the row, and (false, nil) when
// the lease had already expired and been taken or freed by someone else:
// a no-op, reported but not an error. A database error leaves the row to
// expire after the TTL; calling Release again retries it (one that failed
// because ctx ended matches ctx's error, whatever the driver reported).
// Once a Release has freed the row, later calls return (false, nil)
// without a statement.
//
// Release cancels every context from [Lease.Context] (and closes
// [Lease.Done]) before it frees the row, even when called early: work that
// goes on after an early release must not use the lease's context, and is
// no longer protected by the lease (another holder may start at once, or,
// with Config.MinHold, at the end of the hold).
//
// With Config.MinHold, a Release before acquisition + MinHold (on the
// database clock) leaves the row held until then instead of freeing it;
// it still reports (true, nil), and [Lease.HoldUntil] says until when.
func (l *Lease) Release(ctx context.Context) (bool, error) {
	start := time.Now()
	ok, ran, err := l.free(ctx, "release", func() (bool, error) { return l.k.ls.Release(ctx, l.key, l.Owner(), l.holdUntil) })
	l.observeFree(ctx, OpRelease, ok, ran, err, start)
	return ok, err
}

// free ends the lease locally and runs write, the statement that frees the
// row if this lease still holds it, once: after a write that freed the row,
// later calls return (false, nil) without a statement (ran false).
func (l *Lease) free(ctx context.Context, op string, write func() (bool, error)) (ok, ran bool, err error) {
	l.stopKeepAlive(ctx, nil)
	l.end(ErrReleased)
	l.mu.Lock()
	done := l.released
	l.mu.Unlock()
	if done {
		return false, false, nil
	}
	ok, err = write()
	if err != nil {
		return false, true, fmt.Errorf("tasklock: %s %v: %w", op, l.key, errclass.EndedWith(ctx, err))
	}
	if ok {
		l.mu.Lock()
		l.released = true
		l.mu.Unlock()
		l.k.cfg.Logger.Debug("tasklock: "+op+" freed the lease", "key", l.key, "fence", l.fence)
	} else {
		l.k.cfg.Logger.Warn("tasklock: "+op+" found the lease expired or taken over; nothing changed", "key", l.key, "fence", l.fence)
	}
	return ok, true, nil
}

// Finish sets the task's status column (the lease table's Status) to status
// and frees the lease, in one statement conditioned on this lease still
// holding it, so a task is marked done only by its current holder. It ends
// the lease like [Lease.Release] and reports whether it finished the task:
// (false, nil) when the lease had expired and been taken or freed by someone
// else, in which case nothing changed. With Config.MinHold it keeps the key
// taken until [Lease.HoldUntil], as Release does; the status is written at
// once.
func (l *Lease) Finish(ctx context.Context, status any) (bool, error) {
	start := time.Now()
	ok, ran, err := l.free(ctx, "finish", func() (bool, error) { return l.k.ls.Finish(ctx, l.key, l.Owner(), status, l.holdUntil) })
	l.observeFree(ctx, OpFinish, ok, ran, err, start)
	return ok, err
}

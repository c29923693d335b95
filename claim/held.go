package claim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/holdctx"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
)

// HoldConfig configures held-transaction claims ([Claimer.Holder]).
type HoldConfig struct {
	// Limit is the hold limit, enforced by the server: a held batch's
	// transaction that stays idle for this long is ended by the server and
	// its rows go back to pending (a frozen or partitioned process cannot
	// hold them longer), and no statement or lock wait in it lasts longer.
	// While the batch lives its connection pings the server every Limit/3
	// (when no statement of yours is running), so a live batch is never
	// ended for idleness. The batch's context is cancelled at (start of the
	// last statement that succeeded) + Limit - SafetyMargin, on the local
	// monotonic clock, whether or not the server answers. MySQL and MariaDB
	// count it in whole seconds, rounded up. Zero means 30 seconds.
	Limit time.Duration
	// SafetyMargin is subtracted from Limit for the batch's local deadline.
	// Zero means Limit/10; it must be below Limit.
	SafetyMargin time.Duration
	// MaxInFlight is how many held batches of this holder may be open at
	// once; [Holder.Hold] waits for a free slot. Each holds one connection of
	// the pool for its whole life. Zero means the pool's size less one
	// (one connection stays free for everything else), or 1 when the pool's
	// size is not bounded or not known. It must be below the pool's size.
	MaxInFlight int
}

// DefaultHoldLimit is the hold limit when [HoldConfig.Limit] is zero.
const DefaultHoldLimit = 30 * time.Second

// Holder claims batches whose rows are held by a transaction rather than
// marked: see [Claimer.Holder].
type Holder[T any] struct {
	c      *Claimer[T]
	limit  time.Duration
	margin time.Duration
	slots  chan struct{}
	// cursor is the key cursor and turn of this holder's claims
	// ([store.HoldCursor]): the next claim starts past the rows the
	// holder's other open batches hold (held rows stay pending, and a
	// claim would otherwise skip them one by one).
	cursor *store.HoldCursor
}

// Holder returns a holder of held-transaction claims of c's table and
// scope, or an error wrapping [dialect.ErrNotSupported] (an engine without
// row locks that skip: SQLite, which has one writer at a time, so a
// transaction held through a handler would stop every other claim and ack;
// a server without SKIP LOCKED) or [dialect.ErrInvalidConfig] (a bad
// configuration, or MaxInFlight at or above the pool's size: every
// connection would be held).
//
// A held claim writes nothing: in a transaction on one connection it
// selects and locks up to the batch size of pending rows, skipping rows
// locked now (PostgreSQL: FOR NO KEY UPDATE SKIP LOCKED; MySQL and
// MariaDB: FOR UPDATE SKIP LOCKED), and leaves the transaction open while
// you handle them. Acks, fails and your own statements run in that
// transaction and take effect together at [Held.Commit]; a crash, a
// dropped connection or the hold limit rolls everything back and the rows
// are pending as they were, so the server itself is the reaper. Rows stay
// in the pending status while held: durable claims and other holders skip
// them (with SKIP LOCKED; a token-update claimer of the same table waits
// for them instead, so do not mix the two). A claim does not count an
// attempt; a failure does. The claim index ([Claimer.IndexDDL]) is needed
// on MySQL and MariaDB.
func (c *Claimer[T]) Holder(cfg HoldConfig) (*Holder[T], error) {
	k := c.core
	if k.held == nil || !k.held.Holds() {
		caps := k.d.Capabilities()
		return nil, fmt.Errorf("claim: %w: held claims on %s %s (they need row locks that other claims skip; SQLite has one writer at a time)",
			dialect.ErrNotSupported, caps.Engine, caps.Version)
	}
	limit := cfg.Limit
	switch {
	case limit < 0:
		return nil, invalid("HoldConfig.Limit", "%v is negative", limit)
	case limit == 0:
		limit = DefaultHoldLimit
	case limit < time.Millisecond:
		return nil, invalid("HoldConfig.Limit", "%v is below one millisecond", limit)
	}
	margin := cfg.SafetyMargin
	switch {
	case margin < 0:
		return nil, invalid("HoldConfig.SafetyMargin", "%v is negative", margin)
	case margin == 0:
		margin = limit / 10
	case margin >= limit:
		return nil, invalid("HoldConfig.SafetyMargin", "%v is not below the hold limit %v", margin, limit)
	}
	pool := k.held.PoolSize()
	n := cfg.MaxInFlight
	switch {
	case n < 0:
		return nil, invalid("HoldConfig.MaxInFlight", "%d is negative", n)
	case n == 0 && pool > 1:
		n = pool - 1
	case n == 0:
		n = 1
	case pool > 0 && n >= pool:
		return nil, invalid("HoldConfig.MaxInFlight", "%d held batches would take every connection of a pool of %d (each holds one for its life; keep one free)", n, pool)
	}
	if pool == 1 {
		return nil, invalid("HoldConfig", "a pool of one connection cannot hold a batch and still serve anything else")
	}
	return &Holder[T]{c: c, limit: limit, margin: margin, slots: make(chan struct{}, n), cursor: store.NewHoldCursor()}, nil
}

// MaxInFlight returns how many held batches the holder opens at most.
func (h *Holder[T]) MaxInFlight() int { return cap(h.slots) }

// Hold claims a held batch: up to the batch size of pending rows in scope,
// locked by a transaction it leaves open, in key order. It waits for a
// free slot (MaxInFlight) while ctx lasts. With nothing pending it returns
// an empty batch, already ended. End every batch with [Held.Commit] or
// [Held.Rollback]. With Config.PauseTable, a hold of a paused table or
// scope holds nothing and returns an error matching [ErrPaused]
// ([Holder.Run] then polls as when nothing is pending).
func (h *Holder[T]) Hold(ctx context.Context) (*Held[T], error) {
	k := h.c.core
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	free := func() { <-h.slots }
	if err := k.verify(ctx); err != nil {
		free()
		return nil, errclass.EndedWith(ctx, err)
	}
	if err := k.checkPaused(ctx); err != nil {
		free()
		if errors.Is(err, ErrPaused) {
			k.observePaused(ctx, time.Now(), true)
		}
		return nil, errclass.EndedWith(ctx, err)
	}
	k.checkIndexes(ctx)
	b := &Held[T]{core: k, token: store.NewToken(), limit: h.limit, margin: h.margin, free: free, stop: make(chan struct{}), stopped: make(chan struct{})}
	start := time.Now()
	sh, _, err := k.held.Hold(ctx, &store.HoldParams{Limit: k.limit, ScopeValues: k.scope, HoldLimit: h.limit, Cursor: h.cursor}, func(s store.Scanner) error {
		r, err := h.c.scan(s)
		if err != nil {
			return &scanError{err}
		}
		b.rows = append(b.rows, r)
		return nil
	})
	if se := (*scanError)(nil); errors.As(err, &se) {
		// A row the row type cannot hold (a NULL into a string field,
		// say) must not stop every batch: hold the keys, then read the
		// rows one by one in the transaction and park the unreadable ones
		// alone (below).
		b.rows = nil
		sh, err = h.salvage(ctx, b)
	}
	if err != nil {
		free()
		err = errclass.EndedWith(ctx, storeError("hold", err))
		k.observeHeld(ctx, b.event(OpClaim, start, err))
		return nil, err
	}
	b.h = sh
	b.setHeldRows(b.rows, b.holdsLocked)
	e := b.event(OpClaim, start, nil)
	e.Claimed = len(b.rows) + len(b.unreadable)
	k.observeHeld(ctx, e)
	park := store.OutcomeFailed
	if !k.spec.Failed.IsSet() {
		park = store.OutcomeRetry // no parked status: counted and retried
	}
	for i, u := range b.unreadable {
		p := &store.AckParams{IDs: []any{u.ID}, Outcome: park, MaxAttempts: k.maxAttempts, Error: u.Err.Error()}
		t0 := time.Now()
		res, err := sh.Ack(ctx, p)
		k.observeHeld(ctx, b.ackEvent(p, res, t0, err))
		if err != nil {
			b.unreadable[i].Err = errors.Join(u.Err, err)
			free()
			return nil, storeError("hold", err)
		}
	}
	b.ctx, b.cancel = context.WithCancelCause(holdctx.With(context.WithoutCancel(ctx), b.holdErr))
	if len(b.rows) == 0 {
		// Nothing to hand out: nothing pending, or only unreadable rows,
		// parked by this commit (then hold again: others may be pending).
		if err := b.Commit(ctx); err != nil || len(b.unreadable) == 0 {
			return b, err
		}
		return h.Hold(ctx)
	}
	b.proved(start)
	go b.keepAlive()
	return b, nil
}

// salvage holds a batch reading only its keys, then reads its rows one at
// a time, so that a row the row type cannot hold fails only its own read:
// b.rows gets the readable rows and b.unreadable the others.
func (h *Holder[T]) salvage(ctx context.Context, b *Held[T]) (*store.Held, error) {
	k := h.c.core
	var keys []any
	sh, _, err := k.held.Hold(ctx, &store.HoldParams{Limit: k.limit, ScopeValues: k.scope, HoldLimit: h.limit, Cursor: h.cursor}, func(s store.Scanner) error {
		id, err := h.c.scanKey(s)
		keys = append(keys, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, id := range keys {
		var r Row[T]
		var serr error
		err := sh.Read(ctx, []any{id}, func(s store.Scanner) error {
			r, serr = h.c.scan(s)
			return serr
		})
		switch {
		case serr != nil:
			b.unreadable = append(b.unreadable, RowError{ID: id, Err: serr})
		case err != nil:
			_ = sh.Rollback(ctx)
			return nil, err
		default:
			b.rows = append(b.rows, r)
		}
	}
	return sh, nil
}

// Held is a batch of rows held by a transaction ([Holder.Hold]). Its
// methods are safe for concurrent use; statements run one at a time on the
// batch's connection.
type Held[T any] struct {
	core          *core
	token         string // names the batch in its events
	h             *store.Held
	limit, margin time.Duration
	free          func()
	// rowBook holds the rows (its unreadable ones are parked in the
	// batch's transaction). The held claim h is the one record of which
	// rows are open (it refuses keys it does not hold, and a savepoint
	// rollback restores it): the book asks it (holdsLocked), guarded by mu.
	rowBook[T]

	mu     sync.Mutex // serialises the connection's statements; guards the fields below
	lastOK time.Time  // local start of the last statement that succeeded: set by proved
	ended  bool
	// due is the local deadline (lastOK + limit - margin), for the check of
	// package hold, which must not wait for b.mu behind a statement.
	due atomic.Pointer[time.Time]
	// sp is set once a savepoint was taken after the claim ([Holder.Run]):
	// a failed statement of the handler then rolls back to it, keeping
	// the rows held, and failed keeps its error (the batch refuses further
	// statements until the loop records the failure).
	sp     bool
	failed error

	ctx     context.Context
	cancel  context.CancelCauseFunc
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
	lost    sync.Once // reports the loss once
}

// Rows returns the held rows in key order. The slice is a copy, as
// [Batch.Rows]'s is: changing it does not change what the batch holds.
func (b *Held[T]) Rows() []Row[T] { return b.copyRows() }

// Unreadable returns the rows the row type could not hold (a NULL into a
// string field, say): they are parked, with the scan error as their error,
// when the batch commits, and are not in Rows. The slice is a copy.
func (b *Held[T]) Unreadable() []RowError { return b.copyUnreadable() }

// Len returns how many rows the batch holds.
func (b *Held[T]) Len() int { return len(b.rows) }

// Context is cancelled when the batch ends (commit or rollback, cause
// [ErrBatchDone]), when the transaction is found gone (a ping or
// statement failed: cause matching [dialect.ErrClaimLost]), and at the
// local deadline (cause matching [dialect.ErrClaimLost] and
// [dialect.ErrLocalDeadline]), whether or not the database answers. It
// carries the batch's check for package hold: hold.Check on it compares the
// local deadline with the clock itself, so that right after a freeze it
// reports the loss before the context's own timer has run.
func (b *Held[T]) Context() context.Context {
	if b.ctx == nil {
		return context.Background()
	}
	return b.ctx
}

// keepAlive pings the server every limit/3 while no statement runs, and
// cancels the batch's context at its local deadline, also while a ping
// hangs. The pings keep a ticker's beat: they are due every limit/3 from
// the start, a beat that passes while a statement runs is skipped, and
// one that passes during a ping is taken right after it.
func (b *Held[T]) keepAlive() {
	defer close(b.stopped)
	every := max(b.limit/3, time.Millisecond)
	due := time.Now().Add(every) // the next beat
	_ = loop.Loop{Stop: b.stop}.Run(context.Background(), func(context.Context) loop.Next {
		b.mu.Lock()
		deadline := b.deadlineLocked()
		b.mu.Unlock()
		now := time.Now()
		if !now.Before(deadline) {
			b.lose(context.Background(), heldDeadlineError(), true)
			return loop.End(nil)
		}
		if now.Before(due) {
			return loop.After(min(due.Sub(now), deadline.Sub(now))) // a statement may move the deadline meanwhile
		}
		due = due.Add(every * (now.Sub(due)/every + 1)) // the first beat after now
		return b.ping()
	})
}

// ping pings the server for keepAlive, unless a statement of the batch is
// running (it counts: the next beat pings), and says what keepAlive does
// next: it ends once the batch has ended, and when the ping failed, which
// ends the batch.
func (b *Held[T]) ping() loop.Next {
	if !b.mu.TryLock() {
		return loop.Next{} // a statement of the handler is running: it counts
	}
	if b.ended {
		b.mu.Unlock()
		return loop.End(nil)
	}
	// A ping may not outlast the local deadline: one that hangs (the
	// server stopped answering) is cancelled there, and the batch's
	// context ends at the deadline, not when the ping gives up.
	deadline := b.deadlineLocked()
	t0 := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	stopLate := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			b.lose(context.Background(), heldDeadlineError(), true)
		}
	})
	err := b.h.Ping(ctx)
	stopLate()
	cancel()
	if err == nil {
		b.proved(t0)
		b.mu.Unlock()
		return loop.Next{}
	}
	b.ended = true
	b.mu.Unlock()
	if !time.Now().Before(deadline) {
		err = fmt.Errorf("%w (the ping did not answer in time: %v)", heldDeadlineError(), err)
	}
	b.lose(context.Background(), err, true)
	b.finish()
	return loop.End(nil)
}

// deadlineLocked returns the batch's local deadline, with b.mu held: the
// start of its last statement that succeeded + Limit - SafetyMargin.
func (b *Held[T]) deadlineLocked() time.Time { return b.lastOK.Add(b.limit - b.margin) }

// proved records, with b.mu held (or before the batch is handed out), that
// a statement started at t0 succeeded: the transaction was alive then.
func (b *Held[T]) proved(t0 time.Time) {
	b.lastOK = t0
	due := b.deadlineLocked()
	b.due.Store(&due)
}

// holdErr is the batch's check for package hold (hold.Check): the cause
// the batch's context ended with, or, once the local deadline has passed
// by the clock (also before the keep-alive's timer has run, as after a
// freeze), the deadline's loss, which it reports as the keep-alive would.
// It never waits for a statement of the batch.
func (b *Held[T]) holdErr() error {
	if b.ctx.Err() != nil {
		return context.Cause(b.ctx)
	}
	if due := b.due.Load(); due != nil && !time.Now().Before(*due) {
		b.lose(context.Background(), heldDeadlineError(), true)
		return context.Cause(b.ctx)
	}
	return nil
}

func heldDeadlineError() error {
	return fmt.Errorf("%w: %w", dialect.ErrClaimLost, dialect.ErrLocalDeadline)
}

// lose cancels the batch's context with cause and reports the loss once
// (OpLost; background when the keep-alive found it).
func (b *Held[T]) lose(ctx context.Context, cause error, background bool) {
	b.cancel(cause)
	b.lost.Do(func() {
		e := b.event(OpLost, time.Now(), cause)
		e.Rows = len(b.rows)
		e.Background = background
		b.core.observeHeld(ctx, e)
	})
}

// finish releases the batch's slot once.
func (b *Held[T]) finish() { b.once.Do(b.free) }

// run runs fn, one statement of the batch, with the connection to itself;
// a failure of fn that lost the transaction ends the batch.
func (b *Held[T]) run(ctx context.Context, fn func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return fmt.Errorf("claim: %w: the held batch has ended", dialect.ErrClaimLost)
	}
	if b.failed != nil {
		return fmt.Errorf("claim: a statement of the held batch failed (%w): its writes are rolled back and it takes no more", b.failed)
	}
	t0 := time.Now()
	err := fn()
	if err == nil {
		b.proved(t0)
		return nil
	}
	if r := (*refusedError)(nil); errors.As(err, &r) {
		return r.err // nothing ran: the batch goes on
	}
	if b.sp && !errors.Is(err, dialect.ErrClaimLost) {
		// Under Holder.Run, a statement of the handler that failed on a
		// live transaction fails the batch, not the claim: undo the
		// handler's writes back to the savepoint, keeping the rows held,
		// so that the loop records the rows' failure in this transaction.
		err = b.h.Interpret(err)
		rctx, cancel := context.WithTimeout(context.Background(), b.limit)
		rerr := b.h.RollbackToSavepoint(rctx)
		cancel()
		if rerr == nil {
			b.proved(time.Now())
			b.failed = err
			return fmt.Errorf("claim: %w (the held batch's writes are rolled back; its rows fail when the handler returns)", err)
		}
		b.ended = true
		err = fmt.Errorf("%w (%w)", err, rerr)
		b.lose(ctx, err, false)
		b.finish()
		return err
	}
	// A failed statement ends the batch on every engine: PostgreSQL has
	// aborted the transaction already (its COMMIT would roll back), and a
	// deadlock has on every server. Roll back, so that the rows are
	// pending again at once.
	b.ended = true
	if !errors.Is(err, dialect.ErrClaimLost) {
		_ = b.h.Rollback(context.WithoutCancel(b.ctx))
		err = fmt.Errorf("%w (the held batch is rolled back: %w)", err, dialect.ErrClaimLost)
	}
	b.lose(ctx, err, false)
	b.finish()
	return err
}

// Exec runs one statement of yours in the batch's transaction, with the
// engine's placeholders ($1 on PostgreSQL, ? on MySQL), and returns its
// affected rows: it commits or rolls back with the batch. A statement that
// fails (any statement of the batch: Exec, Query, Ack, Fail) rolls the
// batch back and ends it: its error then also matches
// [dialect.ErrClaimLost], and the rows are pending again.
// Under [Holder.Run], a statement of yours that fails on a live
// transaction instead undoes the batch's writes back to its claim, keeping
// the rows held: its error does not match [dialect.ErrClaimLost], the
// batch refuses further statements, and Run fails its rows when the
// handler returns.
func (b *Held[T]) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := b.run(ctx, func() error {
		var err error
		n, err = b.h.Querier().Exec(ctx, query, args...)
		return err
	})
	return n, err
}

// Query runs one query of yours in the batch's transaction and calls fn
// for each row with a function that scans it.
func (b *Held[T]) Query(ctx context.Context, query string, args []any, fn func(scan func(dest ...any) error) error) error {
	return b.run(ctx, func() error {
		r, err := b.h.Querier().Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer r.Close()
		for r.Next() {
			if err := fn(r.Scan); err != nil {
				return err
			}
		}
		return r.Err()
	})
}

// Ack marks ids done (with [dialect.ClaimTable.DeleteDone], deletes them)
// in the batch's transaction. Keys the batch does not hold, or acked or
// failed already, are refused with an error matching
// [dialect.ErrClaimLost]; the others are acked. A key of the wrong type
// is refused with an error matching [dialect.ErrInvalidConfig], and then
// nothing is written: the batch goes on.
func (b *Held[T]) Ack(ctx context.Context, ids ...any) error {
	return b.write(ctx, "ack", &store.AckParams{IDs: ids, Outcome: store.OutcomeDone})
}

// AckAll acks every held row not acked or failed yet.
func (b *Held[T]) AckAll(ctx context.Context) error {
	ids := b.openIDs()
	if len(ids) == 0 && b.h != nil && !b.isEnded() {
		return nil
	}
	err := b.Ack(ctx, ids...)
	if errors.Is(err, dialect.ErrClaimLost) && b.h != nil && !b.isEnded() {
		return nil // rows acked or failed meanwhile: AckAll takes the rest
	}
	return err
}

// openIDs returns the keys of the rows neither acked nor failed yet, in
// key order.
func (b *Held[T]) openIDs() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.idsOf(b.openIndexes())
}

// holdsLocked reports whether the held claim holds key (normalised) and
// has not acked it yet, with b.mu held: the book's record of the open
// rows, none once the batch has ended.
func (b *Held[T]) holdsLocked(key any) bool { return b.h != nil && !b.ended && b.h.Open(key) }

func (b *Held[T]) isEnded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ended
}

// Fail fails row id with cause in the batch's transaction, as
// [Batch.Fail] does: back to pending with the attempt counted (after
// [RetryAfter]'s delay, or the backoff with a RunAt column), or parked at
// MaxAttempts or with [Park]. A [SnoozeFor] is refused (roll back
// instead: the row is pending as before, no attempt counted), and so is a
// key of the wrong type ([dialect.ErrInvalidConfig]); neither ends the
// batch.
func (b *Held[T]) Fail(ctx context.Context, id any, cause error) error {
	k := b.core
	f, err := k.failureOf(cause)
	if err != nil {
		return fmt.Errorf("claim: fail: %w", err)
	}
	if f.snooze {
		return fmt.Errorf("claim: fail: %w: a held batch does not snooze; roll it back (its rows are pending as before)", dialect.ErrNotSupported)
	}
	// The claim counted no attempt: this failure counts the next.
	p := k.failParams(f, func() time.Duration { return k.retryDelay(b.attempts(id) + 1) })
	p.IDs = []any{id}
	return b.write(ctx, "fail", p)
}

// attempts returns the attempts the claim read for id.
func (b *Held[T]) attempts(id any) int64 {
	i, ok, err := b.find(b.core.spec.IDKind, id)
	if err != nil || !ok {
		return 0
	}
	return b.rows[i].Attempts
}

// refusedError is the error of a held ack the store refused before any
// statement ran (a key of the wrong type, params the table cannot take):
// [Held.run] returns it to the caller and the batch goes on.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }

// write runs one held ack; op names the calling method in errors. What
// the store refuses before it writes (a key of the wrong type, a delay the
// table cannot take: its errors that do not match [dialect.ErrClaimLost],
// which all its failed statements do) fails that call only: the batch goes
// on.
func (b *Held[T]) write(ctx context.Context, op string, p *store.AckParams) error {
	var res store.AckResult
	err := b.run(ctx, func() error {
		t0 := time.Now()
		var err error
		res, err = b.h.Ack(ctx, p)
		b.core.observeHeld(ctx, b.ackEvent(p, res, t0, err))
		switch {
		case err != nil && !errors.Is(err, dialect.ErrClaimLost):
			return &refusedError{storeError(op, err)}
		case err != nil:
			return storeError("ack", err)
		}
		return nil
	})
	if err == nil && len(res.Lost) > 0 {
		// The batch goes on: the other keys were written.
		return fmt.Errorf("claim: ack: %w: %d of %d keys are not held by this batch (or were acked already)", dialect.ErrClaimLost, len(res.Lost), len(p.IDs))
	}
	return err
}

// Commit commits the batch's transaction: its acks, fails and your
// statements take effect together and the row locks are released; rows
// neither acked nor failed are pending as before, with no attempt counted.
// An error matching [dialect.ErrOutcomeUnknown] means the connection broke
// during the COMMIT: the batch may or may not have committed.
func (b *Held[T]) Commit(ctx context.Context) error {
	return b.end(ctx, true)
}

// Rollback rolls the batch's transaction back: every row is pending as it
// was before the claim and your statements are undone. It is a no-op on an
// ended batch.
func (b *Held[T]) Rollback(ctx context.Context) error {
	return b.end(ctx, false)
}

func (b *Held[T]) end(ctx context.Context, commit bool) error {
	b.mu.Lock()
	if b.ended {
		b.mu.Unlock()
		if commit {
			return fmt.Errorf("claim: commit: %w: the held batch has ended", dialect.ErrClaimLost)
		}
		return nil
	}
	b.ended = true
	start := time.Now()
	var err error
	op := OpRollback
	if commit {
		op = OpCommit
		err = b.h.Commit(ctx)
	} else {
		err = b.h.Rollback(ctx)
	}
	b.mu.Unlock()
	if n := len(b.rows) + len(b.unreadable); n > 0 {
		e := b.event(op, start, nil)
		if err != nil {
			e.Err = storeError(op.Name(), err)
		}
		e.Rows = n
		b.core.observeHeld(ctx, e)
	}
	if b.ctx != nil {
		b.cancel(ErrBatchDone)
	}
	if len(b.rows) > 0 {
		close(b.stop)
		<-b.stopped
	}
	b.finish()
	if err != nil {
		return storeError(op.Name(), err)
	}
	return nil
}

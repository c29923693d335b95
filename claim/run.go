package claim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
)

// ShutdownMode says what [Claimer.Run] does with claimed rows when its
// context is cancelled.
type ShutdownMode int

const (
	// ShutdownRelease stops handing rows to the handler, cancels the
	// handler's context, and returns unprocessed rows to pending (a row whose
	// handler returned an error after cancellation is released, not failed).
	ShutdownRelease ShutdownMode = iota
	// ShutdownFinish processes every row already claimed, with a handler
	// context that is not cancelled, then acks them; only new claims stop.
	ShutdownFinish
)

// WorkerConfig configures [Claimer.Run].
type WorkerConfig[T any] struct {
	// Workers is the number of concurrent claim loops; default 1. Their
	// claims run at most Config.ClaimConcurrency at a time; processing and
	// acks run in parallel.
	Workers int
	// Handler processes one row (required). A nil error acks the row (acks
	// are batched: one statement per claimed batch); an error fails it as
	// [Batch.Fail] would ([RetryAfter], [SnoozeFor] and [Park] errors
	// included). A panic is recovered and treated as an error. A handler
	// may complete its row itself in its own transaction ([BatchOf],
	// [Batch.AckTx], [Batch.FailTx]); Run then leaves that row alone.
	//
	// Each call gets a context of its own, derived from Run's
	// ([Batch.RowContext]): cancelled on shutdown (ShutdownRelease), and,
	// with a cause matching [dialect.ErrClaimLost], when a heartbeat or an
	// ack finds its row lost (deleted or reset by an operator, changed by
	// another writer, reaped), and at the batch's local deadline
	// (Config.ReapTimeout). The loss of a row costs that row only: its
	// handler error is not counted as its failure, it is neither acked nor
	// released, and a lost row whose turn has not come is skipped, while
	// the batch's other rows are processed and acked as usual. When every
	// row still held is lost, or at the local deadline, Run hands out no
	// more rows of that batch, acks the rows whose handlers succeeded (the
	// ack skips and reports lost ones), and releases the rest still held. Once the handler has completed its row in its own
	// transaction ([Batch.AckTx], [Batch.FailTx]), neither cancels the context any more, so that
	// the transaction begun on it can commit.
	//
	// A handler error that is a retryable conflict
	// ([dialect.IsRetryable]: a deadlock in the handler's own transaction,
	// which the database rolled back) is not the row's failure: Run calls
	// the handler again after a jittered pause, up to five calls in all.
	// Batches are kept alive with [Batch.KeepAlive]
	// (Config.HeartbeatInterval) while they are processed.
	Handler func(ctx context.Context, row Row[T]) error
	// PollMin and PollMax bound the jittered exponential backoff between
	// claims that find nothing (and after claim errors); defaults 100 ms and
	// 5 s.
	PollMin, PollMax time.Duration
	// ShutdownMode is what happens to claimed rows on cancellation; default
	// [ShutdownRelease].
	ShutdownMode ShutdownMode
	// ShutdownTimeout bounds the acks, fails and release that end each
	// batch, also while an outage makes them try again (see
	// [Claimer.Run]), and so how long Run takes to return after
	// cancellation; default 30 s.
	ShutdownTimeout time.Duration
	// Pipeline says whether a loop acks a processed batch and claims the
	// next in one operation; default
	// [PipelineAuto]: where the engine measured faster with it. A loop
	// pipelines only a batch that ended normally (none lost, no shutdown):
	// it first fails the rows whose handler failed, then acks the rest
	// together with the next claim.
	Pipeline Pipeline
	// Drain makes Run return nil once nothing is left for it: every scope
	// it serves was found empty by a claim that started after the last
	// batch of that scope finished, and no batch is being processed. Rows
	// a failure sent back to pending at once (no RunAt column) are claimed
	// again, until they succeed or park at MaxAttempts; rows waiting for a
	// run_at still in the future (a retry's backoff, [SnoozeFor],
	// [RetryAfter], rows scheduled ahead) are not claimable now and are not
	// waited for: the next drain takes them. Nor are rows processing under
	// other workers' claims waited for, nor rows inserted after the drain
	// found their scope empty. A Drain without ctx's end never polls: it
	// claims until the scopes are empty, then returns. Cancellation still
	// shuts down as ShutdownMode says. A scope found paused
	// (Config.PauseTable) is left for the rest of the drain while the
	// others are drained; a drain that left paused scopes returns an
	// error matching [ErrPaused] once the others are empty (their rows
	// stay pending for the next drain).
	//
	// Without Drain, a paused scope is skipped like an empty one: Run
	// polls it again with the backoff of PollMin and PollMax, so a resume
	// takes effect within PollMax plus Config.PauseRefresh.
	Drain bool
	// Scopes, if not empty, makes Run serve these scopes of the claimer's
	// table instead of its own: each element holds values for the Scope
	// columns, as [Claimer.Scope] takes them. One pool of Workers claims
	// from them in turn: each claim goes to the next scope, in order,
	// that is not known to be empty and is below ScopeInFlight, so that a
	// small scope is served at once next to a large one instead of after
	// it. A scope found empty is skipped until the next poll (or, with
	// Drain, for good unless a batch of its own makes rows pending again).
	// Duplicates are an error.
	Scopes [][]any
	// ScopeInFlight, if positive, bounds the rows of each scope that Run
	// holds at once (claimed and not yet acked, failed or released): a
	// claim takes at most that many less those already held, and a scope
	// at its bound is skipped until one of its batches ends. It bounds
	// what one task may take of a shared pool (and of the service it
	// calls); rows of other processes are not counted. Zero means no
	// bound. With Scopes or ScopeInFlight, loops do not pipeline
	// (PipelineOn is an error): an ack claiming the next batch of the
	// same scope would bypass the turns.
	ScopeInFlight int
}

func (w *WorkerConfig[T]) validate() error {
	if w.Handler == nil {
		return invalid("WorkerConfig.Handler", "is nil")
	}
	if w.Workers < 0 || w.PollMin < 0 || w.PollMax < 0 || w.ShutdownTimeout < 0 || w.ScopeInFlight < 0 {
		return invalid("WorkerConfig", "negative field in %+v", *w)
	}
	if w.ShutdownMode != ShutdownRelease && w.ShutdownMode != ShutdownFinish {
		return invalid("WorkerConfig.ShutdownMode", "unknown mode %d", int(w.ShutdownMode))
	}
	if w.Workers == 0 {
		w.Workers = 1
	}
	if w.PollMin == 0 {
		w.PollMin = 100 * time.Millisecond
	}
	if w.PollMax == 0 {
		w.PollMax = 5 * time.Second
	}
	if w.PollMax < w.PollMin {
		return invalid("WorkerConfig.PollMax", "%v is below PollMin %v", w.PollMax, w.PollMin)
	}
	if w.ShutdownTimeout == 0 {
		w.ShutdownTimeout = 30 * time.Second
	}
	return nil
}

// Run claims and processes rows with w.Workers concurrent loops until ctx is
// cancelled, then shuts down as w.ShutdownMode says and returns nil; with
// w.Drain it returns nil as soon as nothing is left to claim (an error
// matching [ErrPaused] if it left paused scopes). Each loop
// claims a batch, hands its rows to w.Handler one by one, acks the
// successes in one statement, fails the errors, and backs off with jitter
// between PollMin and PollMax while nothing is pending. It serves the
// claimer's scope, or the scopes of w.Scopes in turn.
//
// Run verifies the table against the catalog ([Claimer.Verify]) before its
// first claim. Errors that running the operation again cannot cure (a
// misconfiguration, a missing column, a permission denied, a status value
// the column cannot hold: [dialect.IsPermanent]) stop Run: it shuts down
// as on cancellation and returns the error. Other claim, ack and fail
// errors (a deadlock that outlived its retries, a broken connection, a
// read-only server during a failover) are logged at Error level and
// retried with backoff. A bad w returns an error wrapping
// [dialect.ErrInvalidConfig] at once.
func (c *Claimer[T]) Run(ctx context.Context, w WorkerConfig[T]) error {
	if err := w.validate(); err != nil {
		return err
	}
	if err := c.core.checkPipeline(w.Pipeline); err != nil {
		return err
	}
	lanes, err := c.lanes(&w)
	if err != nil {
		return err
	}
	r := &runner[T]{runState: runState{name: "Run", claims: "claims"}, c: c, w: &w,
		turns: newTurns(lanes, c.core.limit, w.ScopeInFlight, w.Drain),
		pipe:  len(w.Scopes) == 0 && w.ScopeInFlight == 0 && c.core.pipelines(w.Pipeline)}
	scopes := make([]*core, len(lanes))
	for i, l := range lanes {
		scopes[i] = l.core
	}
	ctx, end, err := r.start(ctx, c.core, scopes, c.core.wake.kick)
	if err != nil {
		return err
	}
	defer end()
	// A loop pausing after a failed claim stops pausing when the drain
	// ends (the end of the drain is no shutdown: ctx goes on).
	var endIdle context.CancelFunc
	r.idleCtx, endIdle = context.WithCancel(ctx)
	defer endIdle()
	r.turns.onDrained = endIdle
	var wg sync.WaitGroup
	for i := 0; i < w.Workers; i++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			r.loop(ctx, worker)
		}(i)
	}
	wg.Wait()
	if err := r.err(); err != nil {
		return err
	}
	return r.turns.pausedErr()
}

// lanes returns the claimers of the scopes Run serves: views of c for
// w.Scopes, or c itself.
func (c *Claimer[T]) lanes(w *WorkerConfig[T]) ([]*Claimer[T], error) {
	if w.Pipeline == PipelineOn && (len(w.Scopes) > 0 || w.ScopeInFlight > 0) {
		return nil, invalid("WorkerConfig.Pipeline", "PipelineOn cannot serve Scopes or ScopeInFlight in turn")
	}
	if len(w.Scopes) == 0 {
		return []*Claimer[T]{c}, nil
	}
	if len(c.core.spec.Scope) == 0 {
		return nil, invalid("WorkerConfig.Scopes", "the table has no Scope columns")
	}
	seen := make(map[string]int, len(w.Scopes))
	lanes := make([]*Claimer[T], 0, len(w.Scopes))
	for i, values := range w.Scopes {
		v, err := c.Scope(values...)
		if err != nil {
			return nil, fmt.Errorf("%w (WorkerConfig.Scopes[%d])", err, i)
		}
		key := fmt.Sprintf("%#v", values)
		if j, dup := seen[key]; dup {
			return nil, invalid(fmt.Sprintf("WorkerConfig.Scopes[%d]", i), "repeats Scopes[%d] %v", j, values)
		}
		seen[key] = i
		lanes = append(lanes, v)
	}
	return lanes, nil
}

// runner is one call of [Claimer.Run].
type runner[T any] struct {
	runState
	c     *Claimer[T]
	w     *WorkerConfig[T]
	turns *turns[T] // the scopes served and whose turn it is
	pipe  bool      // loops ack and claim in one operation (pipeline.go)
	// idleCtx is Run's context, ended also when the drain ends: a loop
	// pausing after a failed claim waits on it.
	idleCtx context.Context
}

// loop claims and processes batches until ctx ends (or, with Drain,
// until nothing is left), from the scopes r.turns gives it. While nothing
// is pending it waits in the claimer's waker (see wake.go): one idle loop
// of the claimer polls with backoff, the others wait for a wake-up.
//
// It is not a loop.Loop: none of its waits is a duration (the waker, a
// change of the turns), and a turn hands the next the batch its ack
// claimed (next, whose scope is l), which the shutdown processes after the
// loop; loop.Loop would take over only the test of ctx and the drain.
func (r *runner[T]) loop(ctx context.Context, worker int) {
	c, w, t := r.c, r.w, r.turns
	log := c.core.logger.With("worker", worker)
	wk := &c.core.wake
	done := func() {} // frees the poller slot after the claim it allowed
	defer func() { done() }()
	var next *Batch[T] // claimed together with the last ack (pipeline.go)
	var l *lane[T]     // the scope of next, then of b
	// skip marks the scopes this loop found empty since it last polled
	// (without Drain; see turns).
	skip := make([]bool, len(t.lanes))
	for ctx.Err() == nil && !t.done() {
		b, err := next, error(nil)
		if next = nil; b == nil {
			var n int
			var gen uint64
			var wt wait
			var ch <-chan struct{}
			if l, n, gen, wt, ch = t.pick(skip); l == nil {
				done()
				done = func() {}
				switch wt {
				case waitDrained:
					return
				case waitPoll:
					done = wk.idle(ctx, w.PollMin, w.PollMax)
					clear(skip) // rows may have come since
				default:
					t.await(ctx, ch)
				}
				continue
			}
			b, err = l.c.claimVia(ctx, n, l.c.core.cs.Claim)
			m, got := 0, 0
			if err == nil {
				m, got = b.Len()+len(b.unreadable), b.Len()
			}
			t.claimed(l, n, m, got, gen, err != nil)
		}
		if err == nil && b.Len() > 0 {
			wk.worked(b.Len(), c.core.limit)
		}
		done()
		done = func() {}
		switch {
		case errors.Is(err, ErrPaused):
			// Skipped like an empty scope until the next poll; a drain
			// leaves it for good (see turns).
			if w.Drain {
				t.pause(l)
			} else {
				skip[l.i] = true
			}
		case err != nil:
			if ctx.Err() != nil || r.check(err) {
				return
			}
			log.Error("claimlock: claim failed", "err", err, "retryable", dialect.IsRetryable(err))
			done = wk.idle(r.idleCtx, w.PollMin, w.PollMax)
		case b.Len() == 0:
			// The next pick goes on to another scope, or waits (see
			// turns).
			skip[l.i] = !w.Drain && len(b.unreadable) == 0
		default:
			g := t.gen(l) + 1
			next = r.process(ctx, b, log)
			t.finished(l, b.Len())
			if next != nil {
				t.piped(l, next.Len()+len(next.unreadable), next.Len(), g)
				if next.Len() == 0 {
					next = nil
				}
			}
		}
	}
	if next != nil {
		r.process(ctx, next, log) // shutdown: released or finished as w says
		t.finished(l, next.Len())
	}
}

// process hands b's rows to the handler and ends them; it returns the next
// batch when it claimed one together with the ack (pipeline.go).
func (r *runner[T]) process(ctx context.Context, b *Batch[T], log *slog.Logger) *Batch[T] {
	// The heartbeat ignores shutdown and stops last, after acks and
	// release, when this function returns.
	stop := b.KeepAlive(context.WithoutCancel(ctx))
	defer stop()

	ok, failed, causes := r.handleRows(ctx, b, log)
	if b.lost() {
		log.Warn("claimlock: stopped processing a lost batch; acking the rows done, releasing the rest still held",
			"token", b.token, "done", len(ok), "err", b.Err())
	} else if lost := b.Lost(); len(lost) > 0 {
		log.Warn("claimlock: rows of the batch were lost; the others were processed", "token", b.token, "lost", keyList(lost))
	}
	return r.finish(ctx, b, ok, failed, causes, log)
}

// handleRows calls the handler for b's rows in order, until shutdown (with
// ShutdownRelease) or the batch's loss, and returns the indexes of the rows
// to ack and of those to fail, with their causes. A row found lost, or
// completed by its handler (Batch.Ack, Fail, AckTx, FailTx), is in neither.
func (r *runner[T]) handleRows(ctx context.Context, b *Batch[T], log *slog.Logger) (ok, failed []int, causes []error) {
	release := r.w.ShutdownMode == ShutdownRelease
	parent := ctx
	if !release {
		parent = context.WithoutCancel(ctx)
	}
	for i, row := range b.rows {
		if release && ctx.Err() != nil {
			break
		}
		if b.lost() {
			break // the rest is released, if still held
		}
		if b.rowLost(i) {
			continue // found lost before its turn: not this batch's any more
		}
		err := r.handle(parent, b, i)
		if err == nil {
			ok = append(ok, i)
			continue
		}
		if release && ctx.Err() != nil {
			break // interrupted by shutdown: release it, do not count a failure
		}
		if b.lost() {
			break // interrupted by the loss: not the row's failure
		}
		if b.rowLost(i) {
			continue // interrupted by the row's loss: not its failure
		}
		if b.settledRow(i) {
			// The handler completed its row itself (Batch.Ack, Fail,
			// AckTx, FailTx) and then failed: a completion that found the
			// row lost, or a commit that did not happen. The row is
			// released when the batch ends if it is still held.
			level := slog.LevelError
			if errors.Is(err, dialect.ErrClaimLost) {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "claimlock: handler returned an error after completing its row", "token", b.token, "id", row.ID, "err", err)
			continue
		}
		failed = append(failed, i)
		causes = append(causes, err)
	}
	return ok, failed, causes
}

// finish acks the rows ok of b and fails the rows failed (with causes),
// leaving alone those a handler completed meanwhile, then releases what b
// still holds. Acks and fails outlast an outage while b holds its rows
// (outage.go), up to ShutdownTimeout. It returns the next batch when the
// ack claimed one (pipeline.go).
func (r *runner[T]) finish(ctx context.Context, b *Batch[T], ok, failed []int, causes []error, log *slog.Logger) *Batch[T] {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.w.ShutdownTimeout)
	defer cancel()
	b.mu.Lock()
	// A handler may have completed its row itself (Batch.Ack, Fail, AckTx,
	// FailTx): only rows still open are acked or failed here.
	settled := b.settledLocked
	ok = slices.DeleteFunc(ok, settled)
	for j := len(failed) - 1; j >= 0; j-- {
		if settled(failed[j]) {
			failed = slices.Delete(failed, j, j+1)
			causes = slices.Delete(causes, j, j+1)
		}
	}
	next, piped := r.pipelineFinish(ctx, fctx, b, ok, failed, causes, log)
	if !piped {
		// An ack or fail an outage fails is tried again while the batch
		// holds its rows (outage.go), heartbeats running.
		err := b.outlast(fctx, "ack", false, func() error {
			ok = slices.DeleteFunc(ok, b.settledLocked)
			return b.ackLocked(fctx, ok)
		})
		if err != nil && !errors.Is(err, dialect.ErrClaimLost) {
			r.check(err)
			log.Error("claimlock: ack failed; rows stay processing until reaped", "token", b.token, "ids", b.idsOf(ok), "err", err)
		}
		r.failRows(fctx, b, failed, causes, log)
	}
	// Rows still open now were not processed (shutdown, or a lost batch);
	// the others Release may find held are rows whose transactional ack
	// (AckTx, FailTx) rolled back with the caller's transaction.
	unprocessed := int64(len(slices.DeleteFunc(b.openIndexes(), b.writing)))
	b.mu.Unlock()
	r.release(fctx, b, unprocessed, log)
	return next
}

// release returns the rows b still holds to pending and says why, given
// how many of them were left unprocessed.
func (r *runner[T]) release(fctx context.Context, b *Batch[T], unprocessed int64, log *slog.Logger) {
	n, err := b.releaseOutlasting(fctx)
	switch {
	case err != nil:
		log.Error("claimlock: release failed; rows stay processing until reaped", "token", b.token, "err", err)
	case n > 0:
		if u := min(n, unprocessed); u > 0 {
			log.Warn("claimlock: released unprocessed rows (shutdown or a lost batch)", "token", b.token, "rows", u)
		}
		if rolled := n - unprocessed; rolled > 0 {
			log.Warn("claimlock: released rows whose transactional ack rolled back; they will be claimed again", "token", b.token, "rows", rolled)
		}
	}
}

// handlerCalls bounds the calls of a handler whose own transaction keeps
// failing with a retryable conflict (see runner.handle).
const handlerCalls = 5

// handle calls the handler for row i of b. Each call runs on a context of
// its own (see handlerContext), which sees shutdown (through ctx, with
// ShutdownRelease) and the batch's loss. A call that fails with a retryable
// conflict ([dialect.IsRetryable]: a deadlock or serialization failure in
// the handler's own transaction, which the database rolled back) is not the
// row's failure: the handler is called again after a jittered pause, up to
// handlerCalls calls in all, while the batch holds the row.
func (r *runner[T]) handle(ctx context.Context, b *Batch[T], i int) error {
	for n := 0; ; n++ {
		hctx, end := b.handlerContext(ctx, i)
		err := callHandler(func() error { return r.w.Handler(hctx, b.rows[i]) })
		end()
		if err == nil || n+1 >= handlerCalls || !dialect.IsRetryable(err) || ctx.Err() != nil || b.lost() || b.settledRow(i) {
			return err
		}
		if !loop.Sleep(ctx, loop.Backoff(n, 5*time.Millisecond, 500*time.Millisecond), b.Done()) || b.ctx.Err() != nil {
			return err // shutdown, or the batch ended during the pause
		}
		if b.settledRow(i) {
			return err // lost (or completed) during the pause
		}
	}
}

// settledRow reports whether row i was completed (or deferred) through the
// batch, by a handler or otherwise.
func (b *Batch[T]) settledRow(i int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.settledLocked(i)
}

// settledLocked is settledRow with b.mu held.
func (b *Batch[T]) settledLocked(i int) bool { return !b.isOpen(i) || b.writing(i) }

// failRows records the handler failures of rows failed (with causes, in
// order) in batch b, each tried again after an outage while the batch holds
// its rows; a row already settled is left alone. A failure that cannot be
// written leaves the row processing for the reaper. b.mu is held.
func (r *runner[T]) failRows(fctx context.Context, b *Batch[T], failed []int, causes []error, log *slog.Logger) {
	for j, i := range failed {
		err := b.outlast(fctx, "fail", false, func() error {
			if b.settledLocked(i) {
				return nil
			}
			return b.settleFailure(fctx, i, causes[j], log)
		})
		if err != nil && !errors.Is(err, dialect.ErrClaimLost) {
			r.check(err)
			log.Error("claimlock: fail failed; row stays processing until reaped", "token", b.token, "id", b.rows[i].ID, "err", err)
		}
	}
}

package store

// This file runs statements: under the retrier, which classifies engine
// errors and re-runs conflicts; in transactions; with a call's values bound
// to a rendered statement's placeholders.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store/render"
)

// Do runs fn under the retrier: retryable conflicts re-run the whole of fn.
// An idempotent fn (one whose re-run does no harm and reports the same
// thing) is also re-run once after a broken connection; a write that may
// have been applied never is.
//
// A write (not idempotent) that fails with a broken connection, or because
// ctx ended while it ran, may have taken effect: its error wraps
// [dialect.ErrOutcomeUnknown]. One that never reached the server
// ([errclass.Unreachable]: a refused connect, a pool that handed out no
// connection) did not, and is retried like a conflict.
func (b *Backend) Do(ctx context.Context, op string, idempotent bool, fn func() error) error {
	connRetried := false
	return b.retry.Do(ctx, op, func() error {
		live := ctx.Err() == nil
		err := b.interpret(fn())
		if idempotent && !connRetried && classOf(err) == errclass.Connection && ctx.Err() == nil {
			connRetried = true
			err = b.interpret(fn())
		}
		if !idempotent && live && err != nil && !errors.Is(err, dialect.ErrOutcomeUnknown) &&
			classOf(err) != errclass.Unreachable &&
			(classOf(err) == errclass.Connection || ctx.Err() != nil && isContextErr(err)) {
			err = &unknownErr{err}
		}
		return err
	})
}

// InTx runs fn in a transaction from [DB.Begin], committing when fn returns
// nil and rolling back otherwise. The rollback does not use the caller's
// context, so a cancelled context never leaves a connection inside the
// transaction; a rollback that fails closes the connection.
func (b *Backend) InTx(ctx context.Context, fn func(Querier) error) (err error) {
	tx, err := b.db.Begin(ctx)
	if err != nil {
		return b.interpret(err)
	}
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tx.Rollback(rctx)
		}
	}()
	if err := fn(tx); err != nil {
		return b.interpret(err)
	}
	if err := b.interpret(tx.Commit(ctx)); err != nil {
		// Only a refusal the engine names (a deadlock or serialization
		// failure at COMMIT) says the transaction did not commit; anything
		// else may have come after the commit was applied.
		if c := classOf(err); c == errclass.Other || c == errclass.Connection {
			return &unknownErr{err}
		}
		return err
	}
	return nil
}

// Exec runs one statement and returns its affected rows.
func Exec(ctx context.Context, q Querier, d render.Style, st render.Stmt, a *render.Args) (int64, error) {
	sqlText, args := st.Bind(d, a)
	return q.Exec(ctx, sqlText, args...)
}

// Query runs one statement and calls fn for each row.
func Query(ctx context.Context, q Querier, d render.Style, st render.Stmt, a *render.Args, fn func(Rows) error) error {
	sqlText, args := st.Bind(d, a)
	r, err := q.Query(ctx, sqlText, args...)
	if err != nil {
		return err
	}
	defer r.Close()
	for r.Next() {
		if err := fn(r); err != nil {
			return err
		}
	}
	return r.Err()
}

// QueryRow runs one statement and scans its first row into dest, reporting
// whether there was one. It never returns a "no rows" error.
func QueryRow(ctx context.Context, q Querier, d render.Style, st render.Stmt, a *render.Args, dest ...any) (bool, error) {
	found := false
	err := Query(ctx, q, d, st, a, func(r Rows) error {
		if found {
			return nil
		}
		found = true
		return r.Scan(dest...)
	})
	return found, err
}

// exec is [Exec] in the engine's style.
func (b *Backend) exec(ctx context.Context, q Querier, st render.Stmt, a *render.Args) (int64, error) {
	return Exec(ctx, q, b.style, st, a)
}

// query is [Query] in the engine's style.
func (b *Backend) query(ctx context.Context, q Querier, st render.Stmt, a *render.Args, fn func(Rows) error) error {
	return Query(ctx, q, b.style, st, a, fn)
}

// queryRow is [QueryRow] in the engine's style.
func (b *Backend) queryRow(ctx context.Context, q Querier, st render.Stmt, a *render.Args, dest ...any) (bool, error) {
	return QueryRow(ctx, q, b.style, st, a, dest...)
}

// wrapStep prefixes err, if not nil, with the step of an operation that
// failed ("read back"). The store never names the operation itself: the
// public package that runs it names its package and operation once
// ("claim: ack: ...", "tasklock: renew 7: ...").
func wrapStep(step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", step, err)
}

// interpret classifies err once; errors that are already classified or
// belong to the library pass through.
func (b *Backend) interpret(err error) error {
	if err == nil {
		return nil
	}
	var ce *classErr
	if errors.As(err, &ce) {
		return err
	}
	if c := b.drv.Classify(err); c != errclass.Other {
		return &classErr{class: c, err: err}
	}
	return err
}

// classOf returns the class of an error returned by this store's operations.
func classOf(err error) errclass.Class {
	var ce *classErr
	if errors.As(err, &ce) {
		return ce.class
	}
	return errclass.Other
}

// classErr marks an engine error with its class, so that errors.Is finds
// [dialect.ErrRetryable] for the retryable ones, while errors.As still
// reaches the driver's error.
type classErr struct {
	class errclass.Class
	err   error
}

func (e *classErr) Error() string { return e.err.Error() }

func (e *classErr) ErrorClass() errclass.Class { return e.class }

func (e *classErr) Unwrap() error { return e.err }

func (e *classErr) Is(target error) bool {
	return target == dialect.ErrRetryable && e.class.Retryable() ||
		target == dialect.ErrReadOnly && e.class == errclass.ReadOnly
}

// unknownErr marks a write of unknown outcome; the cause stays reachable.
type unknownErr struct{ err error }

func (e *unknownErr) Error() string { return "outcome unknown: " + e.err.Error() }

func (e *unknownErr) Unwrap() error { return e.err }

func (e *unknownErr) Is(target error) bool { return target == dialect.ErrOutcomeUnknown }

// isContextErr reports an error caused by a context's end.
func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// retrier runs operations under a [dialect.RetryPolicy] and counts the
// retries it made, for [Retries]. It is safe for concurrent use; each
// Backend holds one.
type retrier struct {
	policy  dialect.RetryPolicy
	retries atomic.Int64
}

// Retries returns how many times an operation was re-run so far.
func (r *retrier) Retries() int64 { return r.retries.Load() }

// Do runs fn with [dialect.Retry] under the policy.
func (r *retrier) Do(ctx context.Context, op string, fn func() error) error {
	return dialect.Retry(ctx, r.policy, op, fn)
}

// newRetrier returns a retrier for p.
func newRetrier(p dialect.RetryPolicy) *retrier {
	r := &retrier{policy: p}
	onRetry := p.OnRetry
	r.policy.OnRetry = func(op string, attempt int, err error) {
		r.retries.Add(1)
		if onRetry != nil {
			onRetry(op, attempt, err)
		}
	}
	return r
}

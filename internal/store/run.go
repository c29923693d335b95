package store

// This file runs statements: under the retrier, which classifies engine
// errors and re-runs conflicts; in transactions; with a call's values bound
// to a rendered statement's placeholders.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
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
func (e *Engine) Do(ctx context.Context, op string, idempotent bool, fn func() error) error {
	connRetried := false
	return e.Retry.Do(ctx, op, func() error {
		live := ctx.Err() == nil
		err := e.interpret(fn())
		if idempotent && !connRetried && ClassOf(err) == errclass.Connection && ctx.Err() == nil {
			connRetried = true
			err = e.interpret(fn())
		}
		if !idempotent && live && err != nil && !errors.Is(err, dialect.ErrOutcomeUnknown) &&
			ClassOf(err) != errclass.Unreachable &&
			(ClassOf(err) == errclass.Connection || ctx.Err() != nil && isContextErr(err)) {
			err = &unknownErr{err}
		}
		return err
	})
}

// InTx runs fn in a transaction from [DB.Begin], committing when fn returns
// nil and rolling back otherwise. The rollback does not use the caller's
// context, so a cancelled context never leaves a connection inside the
// transaction; a rollback that fails closes the connection.
func (e *Engine) InTx(ctx context.Context, fn func(Querier) error) (err error) {
	tx, err := e.DB.Begin(ctx)
	if err != nil {
		return e.interpret(err)
	}
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tx.Rollback(rctx)
		}
	}()
	if err := fn(tx); err != nil {
		return e.interpret(err)
	}
	if err := e.interpret(tx.Commit(ctx)); err != nil {
		// Only a refusal the engine names (a deadlock or serialization
		// failure at COMMIT) says the transaction did not commit; anything
		// else may have come after the commit was applied.
		if c := ClassOf(err); c == errclass.Other || c == errclass.Connection {
			return &unknownErr{err}
		}
		return err
	}
	return nil
}

// Exec runs one statement and returns its affected rows.
func Exec(ctx context.Context, q Querier, d Dialect, st Stmt, a *Args) (int64, error) {
	sqlText, args := st.Bind(d, a)
	return q.Exec(ctx, sqlText, args...)
}

// Query runs one statement and calls fn for each row.
func Query(ctx context.Context, q Querier, d Dialect, st Stmt, a *Args, fn func(Rows) error) error {
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
func QueryRow(ctx context.Context, q Querier, d Dialect, st Stmt, a *Args, dest ...any) (bool, error) {
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

// Bind returns the statement's SQL and its arguments taken from a, in the
// order of its placeholders.
func (s Stmt) Bind(d Dialect, a *Args) (string, []any) {
	q := s.SQL
	out := make([]any, 0, len(s.binds)+len(a.Keys))
	for _, b := range s.binds {
		if b != nil {
			out = append(out, b(d.TimeUnit, a))
			continue
		}
		out = append(out, a.Keys...) // the expanded key list
		q = strings.Replace(q, keysMarker, placeholders(len(a.Keys)), 1)
	}
	return q, out
}

// placeholders renders n question marks separated by commas.
func placeholders(n int) string {
	if n == 0 {
		return "NULL" // IN (NULL) matches nothing
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// typedKeys turns normalised keys into one typed slice, []int64 or
// []string, for engines that take a key list as an array.
func typedKeys(keys []any) any {
	if len(keys) > 0 {
		if _, ok := keys[0].(string); ok {
			out := make([]string, len(keys))
			for i, k := range keys {
				out[i] = k.(string)
			}
			return out
		}
	}
	out := make([]int64, len(keys))
	for i, k := range keys {
		out[i] = k.(int64)
	}
	return out
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
func (e *Engine) interpret(err error) error {
	if err == nil {
		return nil
	}
	var ce *classErr
	if errors.As(err, &ce) {
		return err
	}
	if c := e.Classify(err); c != errclass.Other {
		return &classErr{class: c, err: err}
	}
	return err
}

// ClassOf returns the class of an error returned by this store's operations.
func ClassOf(err error) errclass.Class {
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

// Retrier runs operations under a [dialect.RetryPolicy] and counts the
// retries it made, for [Retries]. It is safe for concurrent
// use; each dialect holds one.
type Retrier struct {
	policy  dialect.RetryPolicy
	retries atomic.Int64
}

// Retries returns how many times an operation was re-run so far.
func (r *Retrier) Retries() int64 { return r.retries.Load() }

// Do runs fn with [dialect.Retry] under the policy.
func (r *Retrier) Do(ctx context.Context, op string, fn func() error) error {
	return dialect.Retry(ctx, r.policy, op, fn)
}

// NewRetrier returns a Retrier for p.
func NewRetrier(p dialect.RetryPolicy) *Retrier {
	r := &Retrier{policy: p}
	onRetry := p.OnRetry
	r.policy.OnRetry = func(op string, attempt int, err error) {
		r.retries.Add(1)
		if onRetry != nil {
			onRetry(op, attempt, err)
		}
	}
	return r
}

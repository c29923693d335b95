package store

import (
	"context"
	"sync/atomic"

	"github.com/claimlock/claimlock/dialect"
)

// Retrier runs operations under a [dialect.RetryPolicy] and counts the
// retries it made, for [dialect.Dialect.Retries]. It is safe for concurrent
// use; each dialect holds one.
type Retrier struct {
	policy  dialect.RetryPolicy
	retries atomic.Int64
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

// Retries returns how many times an operation was re-run so far.
func (r *Retrier) Retries() int64 { return r.retries.Load() }

// Do runs fn with [dialect.Retry] under the policy.
func (r *Retrier) Do(ctx context.Context, op string, fn func() error) error {
	return dialect.Retry(ctx, r.policy, op, fn)
}

package dialect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// RetryPolicy bounds the retries of deadlocks and serialization failures.
// The zero value means the defaults: 8 attempts, 2 ms base delay, 250 ms cap.
type RetryPolicy struct {
	// MaxAttempts is the total number of tries, the first included.
	// 1 disables retries. Zero means 8.
	MaxAttempts int
	// BaseDelay is the first backoff; each later one doubles, capped at
	// MaxDelay, and the actual sleep is drawn uniformly from [d/2, d]
	// ("equal jitter"). Zero means 2 ms.
	BaseDelay time.Duration
	// MaxDelay caps one backoff. Zero means 250 ms.
	MaxDelay time.Duration
	// OnRetry, if set, is called before each backoff with the operation name,
	// the attempt that failed (1-based) and its error. It must be cheap and
	// safe for concurrent use; metrics hooks go here.
	OnRetry func(op string, attempt int, err error)
}

// Validate reports a policy with negative fields.
func (p RetryPolicy) Validate() error {
	if p.MaxAttempts < 0 || p.BaseDelay < 0 || p.MaxDelay < 0 {
		return fmt.Errorf("%w: RetryPolicy: negative field in %+v", ErrInvalidConfig, p)
	}
	return nil
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 8
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = 2 * time.Millisecond
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = 250 * time.Millisecond
	}
	if p.MaxDelay < p.BaseDelay {
		p.MaxDelay = p.BaseDelay
	}
	return p
}

// Retrier runs operations under a [RetryPolicy] and counts the retries it
// made. It is safe for concurrent use; engine packages hold one per dialect.
type Retrier struct {
	policy  RetryPolicy
	retries atomic.Int64
}

// NewRetrier returns a Retrier for p (zero fields take their defaults).
func NewRetrier(p RetryPolicy) *Retrier {
	return &Retrier{policy: p.withDefaults()}
}

// Retries returns how many times an operation was re-run so far.
func (r *Retrier) Retries() int64 { return r.retries.Load() }

// Do runs fn until it returns nil, a non-retryable error ([IsRetryable] is
// false), the attempts are exhausted, or ctx ends. fn must re-run its whole
// statement or transaction: a retryable error means the engine rolled it
// back. The error of the last attempt is returned as is.
func (r *Retrier) Do(ctx context.Context, op string, fn func() error) error {
	p := r.policy
	delay := p.BaseDelay
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !IsRetryable(err) || attempt >= p.MaxAttempts {
			return err
		}
		if p.OnRetry != nil {
			p.OnRetry(op, attempt, err)
		}
		r.retries.Add(1)
		sleep := delay/2 + rand.N(delay/2+1)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay *= 2
		if delay > p.MaxDelay {
			delay = p.MaxDelay
		}
	}
}

// Backoff returns the jittered delay before poll number n (0-based): base
// doubled n times, capped at max, drawn uniformly from [d/2, d]. Pollers in
// the orchestration packages use it so that a fleet does not wake in step.
func Backoff(n int, base, max time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	if max > 0 && d > max {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}

package dialect

import (
	"context"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/internal/loop"
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

// Retry runs fn until it returns nil, an error that is not retryable
// ([IsRetryable]: deadlocks, lock-wait timeouts, serialization failures,
// busy errors and statements that never reached the server, raw driver
// errors of every engine package linked into the program included), the attempts of p are exhausted, or ctx ends. Between
// attempts it sleeps a capped, jittered, doubling backoff. fn must re-run
// its whole statement or transaction: a retryable error means the engine
// rolled it back. The error of the last attempt is returned as is. op names
// the operation for [RetryPolicy.OnRetry].
//
// Use it for the application's own transactions next to claimlock's, which
// retry themselves under the dialect's [Options.Retry]:
//
//	err := dialect.Retry(ctx, dialect.RetryPolicy{}, "write snapshot", func() error {
//		return writeSnapshot(ctx, db, userID)
//	})
func Retry(ctx context.Context, p RetryPolicy, op string, fn func() error) error {
	p = p.withDefaults()
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !IsRetryable(err) || attempt >= p.MaxAttempts {
			return err
		}
		if p.OnRetry != nil {
			p.OnRetry(op, attempt, err)
		}
		if !loop.Sleep(ctx, loop.Backoff(attempt-1, p.BaseDelay, p.MaxDelay), nil) {
			return err
		}
	}
}

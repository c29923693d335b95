package claim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// Default retry backoff of [DefaultBackoff].
const (
	// DefaultBackoffBase is the delay after a row's first failed attempt.
	DefaultBackoffBase = time.Second
	// DefaultBackoffMax caps the delay.
	DefaultBackoffMax = time.Hour
)

// DefaultBackoff is the retry delay of a row failed after attempts claims
// when Config.Backoff is nil: [ExponentialBackoff] from
// [DefaultBackoffBase] (1 s, 2 s, 4 s, ... with ±25% jitter) up to
// [DefaultBackoffMax].
func DefaultBackoff(attempts int) time.Duration {
	return exponential(DefaultBackoffBase, DefaultBackoffMax, attempts)
}

// ExponentialBackoff returns a backoff for Config.Backoff: base after the
// first attempt, doubling with every further attempt up to max, each delay
// spread by ±25% of jitter so that rows failed together (an outage of the
// service they call) do not come back together. It returns nil (use
// [DefaultBackoff]) when base or max is not positive or max < base.
func ExponentialBackoff(base, max time.Duration) func(attempts int) time.Duration {
	if base <= 0 || max < base {
		return nil
	}
	return func(attempts int) time.Duration { return exponential(base, max, attempts) }
}

func exponential(base, limit time.Duration, attempts int) time.Duration {
	d := base
	for i := 1; i < attempts && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	// ±25%: d * [0.75, 1.25), capped again.
	j := time.Duration(rand.Int64N(int64(d)/2 + 1))
	return min(d-d/4+j, limit)
}

// backoff returns the configured retry backoff, or nil without a RunAt
// column (a retried row is then claimable at once).
func (c Config) backoff(spec dialect.ClaimTable) func(int) time.Duration {
	if spec.RunAt == "" {
		return nil
	}
	if c.Backoff != nil {
		return c.Backoff
	}
	return DefaultBackoff
}

// retryDelay is the delay of a retried row claimed attempts times.
func (k *core) retryDelay(attempts int64) time.Duration {
	if k.backoff == nil {
		return 0
	}
	return max(k.backoff(int(max(attempts, 1))), 0)
}

// checkDelay refuses a delay the table cannot hold.
func (k *core) checkDelay(op string, delay time.Duration) error {
	if k.spec.RunAt == "" {
		return fmt.Errorf("claim: %s: %w: needs a RunAt column", op, ErrInvalidConfig)
	}
	if op == "fail after" && k.spec.Attempts == "" {
		return fmt.Errorf("claim: %s: %w: needs an Attempts column (a retried row must be counted, so that one that keeps failing is parked)", op, ErrInvalidConfig)
	}
	if delay < 0 {
		return fmt.Errorf("claim: %s: %w: negative delay %v", op, ErrInvalidConfig, delay)
	}
	return nil
}

// failParams builds the ack that fails ids: retried after delay (parked at
// MaxAttempts) or parked at once, as mode says, storing cause's text.
func (k *core) failParams(token string, ids []any, cause error, delay time.Duration, mode FailMode) *store.AckParams {
	p := &store.AckParams{Token: token, IDs: ids, Outcome: store.OutcomeRetry, MaxAttempts: k.maxAttempts}
	if k.spec.RunAt != "" {
		p.Delay = delay
	}
	if cause != nil {
		p.Error = cause.Error()
	}
	if mode == FailPark {
		p.Outcome, p.MaxAttempts, p.Delay = store.OutcomeFailed, 0, 0
	}
	return p
}

// logFailed logs a committed fail p of the batch token: the rows failed
// (their keys, up to ten), which of them were parked, and the delay of those
// retried.
func (k *core) logFailed(token string, p *store.AckParams, res store.AckResult, cause error) {
	lost := make(map[int]bool, len(res.Lost))
	for _, j := range res.Lost {
		lost[j] = true
	}
	parkedAt := make(map[int]bool, len(res.Parked))
	for _, j := range res.Parked {
		parkedAt[j] = true
	}
	var retried, parked []any
	for j, id := range p.IDs {
		switch {
		case lost[j]:
		case p.Outcome == store.OutcomeFailed || parkedAt[j]:
			parked = append(parked, id)
		default:
			retried = append(retried, id)
		}
	}
	attrs := []any{"token", token}
	if len(parked) > 0 {
		attrs = append(attrs, "parked", keyList(parked))
	}
	if len(retried) > 0 {
		attrs = append(attrs, "retried", keyList(retried), "retry_in", p.Delay)
	}
	attrs = append(attrs, "err", cause)
	msg := "claimlock: processing failed; retrying"
	if len(retried) == 0 {
		msg = "claimlock: processing failed; parked"
	}
	k.logger.Warn(msg, attrs...)
}

// keyList shows at most ten keys, and how many more there are.
func keyList(ids []any) any {
	if len(ids) <= 10 {
		return ids
	}
	return fmt.Sprintf("%v and %d more", ids[:10], len(ids)-10)
}

// RetryAfterError is a handler error that asks [Claimer.Run] to retry the
// row after Delay ([Batch.FailAfter]) instead of after the backoff.
type RetryAfterError struct {
	// Delay is how long the row waits, on the database clock.
	Delay time.Duration
	// Err is the failure, stored in the Error column.
	Err error
}

// RetryAfter returns a handler error that fails the row with err and has
// it retried after delay ([Batch.FailAfter]). It needs RunAt and Attempts
// columns; without them Run logs a warning and fails the row as any other
// error (retried at once without RunAt; parked at once without Attempts).
func RetryAfter(delay time.Duration, err error) error {
	return &RetryAfterError{Delay: delay, Err: err}
}

// Error implements error.
func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %v: %v", e.Delay, e.Err)
}

// Unwrap returns the failure.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// SnoozeError is a handler error that asks [Claimer.Run] to snooze the row
// ([Batch.Snooze]): not a failure, no attempt counted.
type SnoozeError struct {
	// Delay is how long the row waits, on the database clock.
	Delay time.Duration
}

// SnoozeFor returns a handler error that snoozes the row for delay. It
// needs a RunAt column; without one Run logs a warning and fails the row as
// any other error (a snooze that cannot wait would be claimed again at
// once, forever).
func SnoozeFor(delay time.Duration) error { return &SnoozeError{Delay: delay} }

// Error implements error.
func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %v", e.Delay) }

// settleFailure ends row i after its handler returned err, with b.mu held:
// a snooze, a retry after an explicit delay, or a failure. A snooze or a
// delay the table cannot hold is logged and the row failed as for any
// error, never dropped silently.
func (b *Batch[T]) settleFailure(ctx context.Context, i int, err error, log *slog.Logger) error {
	k := b.core
	var sn *SnoozeError
	var ra *RetryAfterError
	switch {
	case errors.As(err, &sn):
		if k.spec.RunAt != "" && sn.Delay >= 0 {
			return b.snoozeLocked(ctx, i, sn.Delay)
		}
		log.Warn("claimlock: the handler asked for a snooze, which needs a RunAt column; failing the row instead",
			"token", b.token, "id", b.rows[i].ID, "delay", sn.Delay)
	case errors.As(err, &ra):
		if k.spec.RunAt != "" && k.spec.Attempts != "" && ra.Delay >= 0 {
			return b.failLocked(ctx, []int{i}, err, ra.Delay, FailRetry)
		}
		log.Warn("claimlock: the handler asked for a retry after a delay, which needs RunAt and Attempts columns; failing the row as for any error",
			"token", b.token, "id", b.rows[i].ID, "delay", ra.Delay)
	}
	return b.failLocked(ctx, []int{i}, err, k.retryDelay(b.rows[i].Attempts), k.failMode)
}

// Unpark returns parked rows of the claimer's scope (all of them, or only
// ids when given) to pending: token, error and RunAt cleared, and attempts
// reset to zero with resetAttempts (so that they get Config.MaxAttempts
// fresh attempts). It returns how many it unparked. Use it after an outage
// that parked rows which would now succeed. Large scopes are unparked in
// bounded statements, not atomically.
func (c *Claimer[T]) Unpark(ctx context.Context, resetAttempts bool, ids ...any) (int64, error) {
	p := &store.UnparkParams{RowFilter: c.filter(ids), ResetAttempts: resetAttempts}
	n, err := c.core.cs.Unpark(ctx, p)
	if err != nil {
		return n, storeError("unpark", err)
	}
	return n, nil
}

// RetryNow makes pending rows of the claimer's scope that wait for a
// future RunAt (a backoff or a snooze) claimable at once: all of them, or
// only ids when given. It returns how many it changed. It needs a RunAt
// column.
func (c *Claimer[T]) RetryNow(ctx context.Context, ids ...any) (int64, error) {
	n, err := c.core.cs.RetryNow(ctx, c.filter(ids))
	if err != nil {
		return n, storeError("retry now", err)
	}
	return n, nil
}

// List returns up to limit rows of the claimer's scope in set: parked rows
// with their attempts and stored error, stuck rows (processing for longer
// than olderThan, oldest first) or rows scheduled for later. Ages are on
// the database clock. It is for operators and reports.
func (c *Claimer[T]) List(ctx context.Context, set store.RowSet, olderThan time.Duration, limit int) ([]store.RowInfo, error) {
	rows, err := c.core.cs.List(ctx, &store.ListParams{Set: set, ScopeValues: c.core.scopeValues(), OlderThan: olderThan, Limit: limit})
	if err != nil {
		return nil, storeError("list", err)
	}
	return rows, nil
}

func (c *Claimer[T]) filter(ids []any) store.RowFilter {
	f := store.RowFilter{ScopeValues: c.core.scopeValues()}
	if len(ids) > 0 {
		f.IDs = ids
	}
	return f
}

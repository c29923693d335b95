package claim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
)

// Fail records that processing a row failed with err, in one statement
// conditioned on the batch's token. What happens to the row depends on the
// table and on err:
//
//   - By default the row goes back to pending to be claimed again (with a
//     RunAt column, after Config.Backoff of its attempts on the database
//     clock), or is parked with the failed status once its attempts
//     reached Config.MaxAttempts. Without an Attempts column claims are not
//     counted, so the row is parked at once.
//   - err made by [RetryAfter]: retried after its delay instead of the
//     backoff (still parked at MaxAttempts). Needs RunAt and Attempts.
//   - err made by [SnoozeFor]: not a failure. The row goes back to pending
//     for later, its claim's attempt undone and no error stored. Needs
//     RunAt.
//   - err made by [Park]: parked at once.
//
// With an Error column the error's text is stored (a parked row keeps the
// error that parked it). A [RetryAfter] or [SnoozeFor] the table cannot
// honour is an error wrapping [dialect.ErrInvalidConfig], and nothing is
// written. Fail normalises id as [Batch.Ack] does, and reports a row the
// token no longer held with a [*LostError] (it was left untouched). A
// [Claimer.Run] handler fails its row by returning err.
func (b *Batch[T]) Fail(ctx context.Context, id any, err error) error {
	return b.fail(ctx, nil, id, err)
}

// fail is [Batch.Fail], or with tx [Batch.FailTx].
func (b *Batch[T]) fail(ctx context.Context, tx *dialect.Tx, id any, err error) error {
	f, ferr := b.core.failureOf(err)
	if ferr == nil && f.snooze && tx != nil {
		ferr = fmt.Errorf("%w: a snooze cannot run in the caller's transaction (fail the row with Batch.Fail instead)", dialect.ErrInvalidConfig)
	}
	if ferr != nil {
		return fmt.Errorf("claim: fail: %w", ferr)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, lost, lerr := b.lookup("fail", []any{id})
	if lerr != nil {
		return lerr
	}
	if len(lost) > 0 {
		return lostError("fail", lost) // a heartbeat or an ack found it lost
	}
	if tx == nil {
		return b.failLocked(ctx, idx[0], f, b.core.cs.Ack)
	}
	err = b.failLocked(ctx, idx[0], f, func(ctx context.Context, p *store.AckParams) (store.AckResult, error) {
		return b.core.cs.AckTx(ctx, *tx, p)
	})
	if err == nil {
		b.rememberTx(idx, nil)
		b.detachHandler(ctx)
	}
	return err
}

// failure is how a row fails, decided from the error by failureOf.
type failure struct {
	cause  error
	snooze bool          // back to pending without counting an attempt
	park   bool          // parked at once
	delay  time.Duration // retry or snooze delay; negative: the backoff
}

// failureOf decides how err fails a row, refusing (with an error wrapping
// dialect.ErrInvalidConfig) a delay the table cannot hold.
func (k *core) failureOf(err error) (failure, error) {
	f := failure{cause: err, delay: -1, park: k.spec.Attempts == ""}
	var sn *SnoozeError
	var ra *RetryAfterError
	var pk *ParkError
	switch {
	case errors.As(err, &pk):
		f.park = true
		if err == error(pk) && pk.Err != nil {
			f.cause = pk.Err // the failure's own text is stored, not "parked: ..."
		}
	case errors.As(err, &sn):
		if k.spec.RunAt == "" {
			return failure{}, fmt.Errorf("%w: a snooze needs a RunAt column", dialect.ErrInvalidConfig)
		}
		if sn.Delay < 0 {
			return failure{}, fmt.Errorf("%w: negative snooze %v", dialect.ErrInvalidConfig, sn.Delay)
		}
		f.snooze, f.park, f.delay, f.cause = true, false, sn.Delay, nil
	case errors.As(err, &ra):
		if k.spec.RunAt == "" || k.spec.Attempts == "" {
			return failure{}, fmt.Errorf("%w: a retry after a delay needs RunAt and Attempts columns (a retried row must be counted, so that one that keeps failing is parked)", dialect.ErrInvalidConfig)
		}
		if ra.Delay < 0 {
			return failure{}, fmt.Errorf("%w: negative retry delay %v", dialect.ErrInvalidConfig, ra.Delay)
		}
		f.delay = ra.Delay
		if err == error(ra) && ra.Err != nil {
			f.cause = ra.Err
		}
	}
	return f, nil
}

// failParams returns the params of a fail as f says, for the caller to add
// the keys (and a batch's token): the failure's text for the Error column,
// the row parked at once or counted towards MaxAttempts, and with a RunAt
// column the retry's delay: f's own, or else (see backsOff) backoff's. The
// one place these rules are written, for [Batch] and [Held] alike.
func (k *core) failParams(f failure, backoff func() time.Duration) *store.AckParams {
	p := &store.AckParams{Outcome: store.OutcomeRetry, MaxAttempts: k.maxAttempts}
	if f.cause != nil {
		p.Error = f.cause.Error()
	}
	switch {
	case f.park:
		p.Outcome, p.MaxAttempts = store.OutcomeFailed, 0
	case k.spec.RunAt != "" && f.delay >= 0:
		p.Delay = f.delay
	case k.backsOff(f):
		p.Delay = backoff()
	}
	return p
}

// backsOff reports whether a retry as f says waits for Config.Backoff: with
// a RunAt column, when the failure has no delay of its own. Which attempt
// the backoff is given is the caller's to say: a batch's claim counted one,
// a held claim none.
func (k *core) backsOff(f failure) bool {
	return !f.park && f.delay < 0 && k.spec.RunAt != "" && k.backoff != nil
}

// failLocked fails row i as f says with ack (the store's Ack, or its AckTx
// in a caller's transaction), with b.mu held, and records the outcome. A
// snooze in a caller's transaction is refused: the store snoozes on its
// own connection.
func (b *Batch[T]) failLocked(ctx context.Context, i int, f failure, ack func(context.Context, *store.AckParams) (store.AckResult, error)) error {
	k := b.core
	idx := []int{i}
	ids := b.idsOf(idx)
	if f.snooze {
		n, err := k.cs.Snooze(ctx, b.token, ids, f.delay)
		if err != nil {
			return storeError("snooze", b.noteUnknown(err))
		}
		res := store.AckResult{}
		if n == 0 && !b.writtenBefore() {
			res.Lost = []int{0}
		}
		return b.recordFail("snooze", idx, nil, res)
	}
	p := k.failParams(f, func() time.Duration { return k.retryDelay(b.rows[i].Attempts) })
	p.Token, p.IDs = b.token, ids
	res, err := ack(ctx, p)
	if err != nil {
		return storeError("fail", b.noteUnknown(err))
	}
	if len(res.Lost) > 0 && b.writtenBefore() {
		res.Lost = nil // completed by an earlier write of unknown outcome
	}
	if len(res.Lost) == 0 {
		k.logFailed(b.token, p, res, f.cause)
	}
	return b.recordFail("fail", idx, p, res)
}

// recordFail records, with b.mu held, the committed fail or snooze of rows
// idx: they are closed, and those the token no longer held are lost (only
// they, see rowloss.go) and returned in a [*LostError].
func (b *Batch[T]) recordFail(op string, idx []int, p *store.AckParams, res store.AckResult) error {
	err := b.closeWritten(op, idx, res.Lost)
	if err == nil {
		return nil
	}
	lost := err.(*LostError).IDs
	b.core.logger.Warn("claimlock: claim lost: rows were reaped or released before "+op, "token", b.token, "ids", keyList(lost))
	return err
}

// settleFailure ends row i after its Run handler returned err, with b.mu
// held, as [Batch.Fail] would. A [RetryAfter] or [SnoozeFor] the table
// cannot honour is logged and the row failed as for any error, never
// dropped silently.
func (b *Batch[T]) settleFailure(ctx context.Context, i int, err error, log *slog.Logger) error {
	f, ferr := b.core.failureOf(err)
	if ferr != nil {
		log.Warn("claimlock: the handler's error asks for what the table cannot do; failing the row as for any error",
			"token", b.token, "id", b.rows[i].ID, "why", ferr)
		f, _ = b.core.failureOf(errors.Unwrap(err))
		f.cause = err
	}
	return b.failLocked(ctx, i, f, b.core.cs.Ack)
}

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
	d := loop.Doubled(max(attempts, 1)-1, base, limit)
	// ±25%: d * [0.75, 1.25], capped again.
	return min(loop.Spread(d, d/2), limit)
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

// retryDelay is the delay of a retried row claimed attempts times: the
// backoff's, never negative (a negative one retries the row at once), for
// Batch and Held alike.
func (k *core) retryDelay(attempts int64) time.Duration {
	if k.backoff == nil {
		return 0
	}
	return max(k.backoff(int(max(attempts, 1))), 0)
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

// RetryAfterError is a failure that asks for a retry after Delay instead of
// after the backoff: [RetryAfter] makes it.
type RetryAfterError struct {
	// Delay is how long the row waits, on the database clock.
	Delay time.Duration
	// Err is the failure, stored in the Error column.
	Err error
}

// RetryAfter returns an error that fails a row with err and has it retried
// after delay (an HTTP 429's Retry-After, say), for [Batch.Fail] or as a
// Run handler's error. It needs RunAt and Attempts columns.
func RetryAfter(delay time.Duration, err error) error {
	return &RetryAfterError{Delay: delay, Err: err}
}

// Error implements error.
func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %v: %v", e.Delay, e.Err)
}

// Unwrap returns the failure.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// SnoozeError asks for a row to be put back for later without counting a
// failure: [SnoozeFor] makes it.
type SnoozeError struct {
	// Delay is how long the row waits, on the database clock.
	Delay time.Duration
}

// SnoozeFor returns an error that puts a row back to pending for delay
// without counting a failure (work that is not ready yet), for
// [Batch.Fail] or as a Run handler's error. It needs a RunAt column.
func SnoozeFor(delay time.Duration) error { return &SnoozeError{Delay: delay} }

// Error implements error.
func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %v", e.Delay) }

// ParkError is a failure that parks its row at once: [Park] makes it.
type ParkError struct {
	// Err is the failure, stored in the Error column.
	Err error
}

// Park returns an error that parks a row at once with err (a failure that
// retrying cannot cure: a malformed address, a refused request), for
// [Batch.Fail] or as a Run handler's error, whatever MaxAttempts says.
func Park(err error) error { return &ParkError{Err: err} }

// Error implements error.
func (e *ParkError) Error() string { return fmt.Sprintf("parked: %v", e.Err) }

// Unwrap returns the failure.
func (e *ParkError) Unwrap() error { return e.Err }

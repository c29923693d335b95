package tasklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/claimlock/claimlock/dialect"
)

// Do runs fn while holding the lease on key: it acquires once (returning
// [dialect.ErrLeaseHeld] at once if the key is held; use [Locker.AcquireWait] and
// the Lease methods to wait instead), keeps the lease alive, and calls fn
// with a context derived from ctx that is cancelled if the lease is lost or
// passes its local deadline. When fn returns, or panics, the keep-alive
// stops and the lease is released (with a context that ignores ctx's
// cancellation, for at most a few seconds).
//
// Do returns fn's error; when the lease was lost while fn ran, that error
// is joined with the lease's error (matching [dialect.ErrLeaseLost]), so
// errors.Is(err, dialect.ErrLeaseLost) tells a caller its work may have overlapped
// another holder's. A failed release is joined too.
func (k *Locker) Do(ctx context.Context, key any, fn func(ctx context.Context, l *Lease) error) (err error) {
	if fn == nil {
		return fmt.Errorf("tasklock: do: %w: nil fn", dialect.ErrInvalidConfig)
	}
	l, err := k.Acquire(ctx, key)
	if err != nil {
		return err
	}
	// The renewals run until the release below stops them, whatever ctx
	// does meanwhile.
	l.KeepAlive(context.WithoutCancel(ctx))
	fctx, cancel := l.Context(ctx)
	defer func() {
		cancel()
		// Read the lease's fate before Release replaces it with ErrReleased.
		lost := l.Err()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer rcancel()
		_, relErr := l.Release(rctx)
		if lost != nil && isLost(lost) {
			err = errors.Join(err, lost)
		}
		if relErr != nil {
			err = errors.Join(err, relErr)
		}
	}()
	return fn(fctx, l)
}

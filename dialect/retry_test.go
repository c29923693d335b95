package dialect_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/loop"
)

// deadlockErr is an error that carries its class, as the errors returned by
// claimlock's stores do.
type deadlockErr struct{}

func (deadlockErr) Error() string              { return "deadlock found" }
func (deadlockErr) ErrorClass() errclass.Class { return errclass.Deadlock }

var errDeadlock error = deadlockErr{}

func TestRetrierRetriesOnlyRetryable(t *testing.T) {
	t.Parallel()
	var seen []int
	p := dialect.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Microsecond,
		OnRetry: func(op string, attempt int, err error) { seen = append(seen, attempt) }}
	calls := 0
	err := dialect.Retry(context.Background(), p, "op", func() error {
		calls++
		if calls < 3 {
			return errDeadlock
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls)
	require.Equal(t, []int{1, 2}, seen)

	calls = 0
	err = dialect.Retry(context.Background(), p, "op", func() error { calls++; return errDeadlock })
	require.True(t, dialect.IsRetryable(err))
	require.Equal(t, 4, calls, "bounded")

	calls = 0
	other := errors.New("syntax error")
	err = dialect.Retry(context.Background(), p, "op", func() error { calls++; return other })
	require.Equal(t, other, err)
	require.Equal(t, 1, calls, "other errors are not retried")
}

// TestRetrierStopsWithContext: a Retry whose context ends during a backoff
// of an hour returns the last attempt's error at once. Retry runs on its own
// goroutine, so a Retry that ignored its context fails the test (after ten
// seconds, far below the backoff) instead of hanging it.
func TestRetrierStopsWithContext(t *testing.T) {
	t.Parallel()
	p := dialect.RetryPolicy{MaxAttempts: 100, BaseDelay: time.Hour, MaxDelay: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var calls atomic.Int32
	done := make(chan error, 1)
	go func() { done <- dialect.Retry(ctx, p, "op", func() error { calls.Add(1); return errDeadlock }) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, errDeadlock, "the last attempt's error")
		require.EqualValues(t, 1, calls.Load(), "no attempt after the context ended")
	case <-time.After(10 * time.Second):
		t.Fatal("Retry is still sleeping out its backoff after its context ended")
	}
}

// driverErr stands for a raw driver error that only a registered
// classifier recognises.
type driverErr struct{ code int }

func (e driverErr) Error() string { return "driver error" }

func TestClassifyRawDriverErrors(t *testing.T) {
	t.Parallel()
	errclass.Register(func(err error) errclass.Class {
		var d driverErr
		if errors.As(err, &d) && d.code == 4242 {
			return errclass.Serialization
		}
		return errclass.Other
	})
	raw := fmt.Errorf("my own statement: %w", driverErr{4242})
	require.Equal(t, errclass.Serialization, errclass.Of(raw))
	require.True(t, dialect.IsRetryable(raw), "the caller's own raw driver errors are recognised")
	require.False(t, dialect.IsRetryable(driverErr{1}))
	calls := 0
	err := dialect.Retry(context.Background(), dialect.RetryPolicy{BaseDelay: time.Microsecond}, "own tx", func() error {
		calls++
		if calls < 3 {
			return raw
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls, "Retry re-runs the caller's transaction on a raw driver error")
	require.False(t, dialect.IsRetryable(nil))
	require.Equal(t, errclass.Other, errclass.Of(errors.New("plain")))
	for c, want := range map[errclass.Class]bool{
		errclass.Deadlock: true, errclass.LockTimeout: true, errclass.Serialization: true, errclass.Busy: true,
		errclass.Unreachable: true, errclass.Unavailable: true,
		errclass.ReadOnly: false, errclass.Duplicate: false, errclass.Connection: false, errclass.Other: false,
	} {
		require.Equal(t, want, c.Retryable(), "%d", c)
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	for n := 0; n < 20; n++ {
		d := loop.Backoff(n, 10*time.Millisecond, 80*time.Millisecond)
		require.GreaterOrEqual(t, d, 5*time.Millisecond)
		require.LessOrEqual(t, d, 80*time.Millisecond)
	}
	require.Zero(t, loop.Backoff(3, 0, time.Second))
	require.ErrorIs(t, dialect.RetryPolicy{MaxAttempts: -1}.Validate(), dialect.ErrInvalidConfig)
}

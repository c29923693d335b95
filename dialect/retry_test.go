package dialect_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
)

var errDeadlock = &dialect.RetryableError{Err: errors.New("deadlock found")}

func TestRetrierRetriesOnlyRetryable(t *testing.T) {
	t.Parallel()
	var seen []int
	r := dialect.NewRetrier(dialect.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Microsecond,
		OnRetry: func(op string, attempt int, err error) { seen = append(seen, attempt) }})
	calls := 0
	err := r.Do(context.Background(), "op", func() error {
		calls++
		if calls < 3 {
			return errDeadlock
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls)
	require.Equal(t, []int{1, 2}, seen)
	require.EqualValues(t, 2, r.Retries())

	calls = 0
	err = r.Do(context.Background(), "op", func() error { calls++; return errDeadlock })
	require.True(t, dialect.IsRetryable(err))
	require.Equal(t, 4, calls, "bounded")

	calls = 0
	other := errors.New("syntax error")
	err = r.Do(context.Background(), "op", func() error { calls++; return other })
	require.Equal(t, other, err)
	require.Equal(t, 1, calls, "other errors are not retried")
}

func TestRetrierStopsWithContext(t *testing.T) {
	t.Parallel()
	r := dialect.NewRetrier(dialect.RetryPolicy{MaxAttempts: 100, BaseDelay: time.Hour, MaxDelay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := r.Do(ctx, "op", func() error { return errDeadlock })
	require.True(t, dialect.IsRetryable(err))
}

func TestRetryableErrorUnwraps(t *testing.T) {
	t.Parallel()
	type engineErr struct{ error }
	e := &dialect.RetryableError{Err: engineErr{errors.New("1213")}}
	var target engineErr
	require.ErrorAs(t, e, &target)
	require.ErrorIs(t, e, dialect.ErrRetryable)
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	for n := 0; n < 20; n++ {
		d := dialect.Backoff(n, 10*time.Millisecond, 80*time.Millisecond)
		require.GreaterOrEqual(t, d, 5*time.Millisecond)
		require.LessOrEqual(t, d, 80*time.Millisecond)
	}
	require.Zero(t, dialect.Backoff(3, 0, time.Second))
	require.ErrorIs(t, dialect.RetryPolicy{MaxAttempts: -1}.Validate(), dialect.ErrInvalidConfig)
}

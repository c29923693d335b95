package claim_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestMain keeps the claimers the tests build without a Logger (which log
// to slog.Default) quiet; TestNilLoggerLogsToDefault sets its own default.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	dbtest.Main(m)
}

// runFor runs Run until it returns or d passes (then it cancels it).
func runFor(t *testing.T, c *claim.Claimer[job], w claim.WorkerConfig[job], d time.Duration) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	err := c.Run(ctx, w)
	return time.Since(start), err
}

// A misspelt column never lets Run start polling: it verifies the table
// before its first claim and returns the error, instead of logging
// "claim failed" at every poll and returning nil at shutdown.
func TestRunStopsOnMisconfiguration(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		c, cfg := jobSetup(t, e, s, 5, nil)
		_ = c
		cfg.Columns = []string{"paylod"} // misspelt
		bad, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err, "New does not touch the database")
		took, err := runFor(t, bad, claim.WorkerConfig[job]{
			Handler: func(context.Context, claim.Row[job]) error { return nil },
			PollMin: time.Millisecond, PollMax: 5 * time.Millisecond,
		}, 30*time.Second)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		require.ErrorContains(t, err, "paylod")
		require.Less(t, took, 20*time.Second, "Run returned on its own, not at the deadline")
	})
}

// A column dropped while Run works (a migration gone wrong) makes every
// claim fail the same way: Run stops and returns the engine's error,
// releasing nothing it should not. A transient error does not stop it.
func TestRunStopsOnPermanentError(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		c, cfg := jobSetup(t, e, s, 20, func(cfg *claim.Config) { cfg.BatchSize = 5 })
		handled := make(chan struct{}, 100)
		logs := &recordingHandler{}
		c2, err := claim.New(e.d, func() claim.Config { cfg.Logger = slog.New(logs); return cfg }(), jobFields)
		require.NoError(t, err)
		_ = c
		runCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- c2.Run(runCtx, claim.WorkerConfig[job]{Workers: 2, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond,
				Handler: func(ctx context.Context, r claim.Row[job]) error {
					handled <- struct{}{}
					return nil
				}})
		}()
		// Wait until Run has processed every row, then drop a column the
		// claim reads and give it new rows.
		awaitStats(t, "every row done", c2.Stats, func(st claim.Stats) bool { return st.Done == 20 }, nil)
		e.exec(t, fmt.Sprintf("ALTER TABLE %s DROP COLUMN payload", cfg.Table))
		e.exec(t, fmt.Sprintf("INSERT INTO %s (task_id) VALUES (42)", cfg.Table))
		select {
		case err := <-done:
			require.Error(t, err)
			require.True(t, dialect.IsPermanent(err), "%v", err)
			require.Equal(t, errclass.Permanent, errclass.Of(err), "%v", err)
			require.Contains(t, err.Error(), "Run stopped")
			require.Equal(t, 1, strings.Count(err.Error(), "claim: "), "the package is named once: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("Run did not stop on a permanent error; logged: %v", logs.atLeast(slog.LevelWarn))
		}
		require.Len(t, logs.matching("Run stops"), 1, "logged once, at Error level")
	})
}

// A Logger left nil logs to slog.Default, the ecosystem's convention: an
// error must never be silent because nobody configured a logger.
func TestNilLoggerLogsToDefault(t *testing.T) {
	prev := slog.Default()
	logs := &recordingHandler{}
	slog.SetDefault(slog.New(logs))
	defer slog.SetDefault(prev)
	en := engines[0]
	require.Equal(t, testengine.SQLite, en.kind)
	e := open(t, en)
	c, cfg := jobSetup(t, e, dialect.StrategyTokenUpdate, 3, nil)
	_ = c
	cfg.Columns = []string{"nope"}
	bad, err := claim.New(e.d, cfg, jobFields)
	require.NoError(t, err)
	_, err = bad.Claim(context.Background())
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	// A lost batch is logged by the claimer through the default logger.
	b, err := c.Claim(context.Background())
	require.NoError(t, err)
	e.exec(t, fmt.Sprintf("UPDATE %s SET token = 'stolen'", cfg.Table))
	require.True(t, errors.Is(b.AckAll(context.Background()), dialect.ErrClaimLost))
	require.NotEmpty(t, logs.matching("claim lost"), "the loss reached slog.Default")
}

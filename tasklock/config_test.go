package tasklock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	d := engines[0].open(t)
	good := func() tasklock.Config {
		return tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: time.Second}
	}
	cases := []struct {
		name  string
		edit  func(c *tasklock.Config)
		field string
	}{
		{"zero TTL", func(c *tasklock.Config) { c.TTL = 0 }, "TTL"},
		{"negative TTL", func(c *tasklock.Config) { c.TTL = -time.Second }, "TTL"},
		{"sub-millisecond TTL", func(c *tasklock.Config) { c.TTL = time.Microsecond }, "TTL"},
		{"negative renew interval", func(c *tasklock.Config) { c.RenewInterval = -1 }, "RenewInterval"},
		{"renew interval not below TTL", func(c *tasklock.Config) { c.RenewInterval = time.Second }, "RenewInterval"},
		{"negative margin", func(c *tasklock.Config) { c.SafetyMargin = -1 }, "SafetyMargin"},
		{"margin eats the slack", func(c *tasklock.Config) {
			c.RenewInterval = 700 * time.Millisecond
			c.SafetyMargin = 300 * time.Millisecond
		}, "SafetyMargin"},
		{"negative poll", func(c *tasklock.Config) { c.PollInterval = -1 }, "PollInterval"},
		{"max poll below poll", func(c *tasklock.Config) {
			c.PollInterval = 100 * time.Millisecond
			c.MaxPollInterval = 10 * time.Millisecond
		}, "MaxPollInterval"},
		{"negative min hold", func(c *tasklock.Config) { c.MinHold = -time.Second }, "MinHold"},
		{"min hold without expires_at", func(c *tasklock.Config) {
			c.MinHold = time.Minute
			c.Table = tasklock.TaskTable("xxx_task")
		}, "MinHold"},
		{"injected table name", func(c *tasklock.Config) { c.Table.Table = "leases; DROP TABLE x" }, "Table"},
		{"empty owner column", func(c *tasklock.Config) { c.Table.Owner = "" }, "Owner"},
		{"quoted fence column", func(c *tasklock.Config) { c.Table.Fence = `fence"` }, "Fence"},
		{"qualified key column", func(c *tasklock.Config) { c.Table.Key = "a.b" }, "Key"},
		{"negative key length", func(c *tasklock.Config) { c.Table.KeyMaxLen = -1 }, "KeyMaxLen"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := good()
			tc.edit(&cfg)
			k, err := tasklock.New(d, cfg)
			require.Nil(t, k)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig)
			require.Contains(t, err.Error(), tc.field)
		})
	}

	t.Run("nil dialect", func(t *testing.T) {
		t.Parallel()
		_, err := tasklock.New(nil, good())
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		require.Contains(t, err.Error(), "dialect")
	})

	t.Run("defaults are valid", func(t *testing.T) {
		t.Parallel()
		k, err := tasklock.New(d, good())
		require.NoError(t, err)
		require.Equal(t, time.Second, k.TTL())
	})
}

func TestBadKeys(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		k, _ := setup(t, e, tasklock.Config{})
		ctx := ctxT(t)
		for name, key := range map[string]any{
			"empty":      "",
			"too long":   strings.Repeat("k", 256),
			"wrong type": 42,
			"nil":        nil,
		} {
			_, err := k.Acquire(ctx, key)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, name)
			require.Contains(t, err.Error(), "key", name)
			_, err = k.AcquireWait(ctx, key)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, name)
			_, err = k.ForceRelease(ctx, key)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, name)
			_, err = k.Inspect(ctx, key)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, name)
			require.ErrorIs(t, k.Do(ctx, key, func(context.Context, *tasklock.Lease) error { return nil }), dialect.ErrInvalidConfig, name)
		}
		// The longest key the column holds is fine.
		l, err := k.Acquire(ctx, strings.Repeat("k", 255))
		require.NoError(t, err)
		ok, err := l.Release(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	})
}

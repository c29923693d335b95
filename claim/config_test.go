package claim_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

func TestConfigRejectsBadInput(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	good := func() claim.Config {
		return claim.Config{Table: "jobs", Scope: []claim.Cond{{Column: "task_id", Value: 42}}, Columns: []string{"payload"}}
	}
	cases := []struct {
		name  string
		mod   func(*claim.Config)
		field string // the error must name it
	}{
		{"batch size negative", func(c *claim.Config) { c.BatchSize = -1 }, "BatchSize"},
		{"batch size above max", func(c *claim.Config) { c.BatchSize = claim.MaxBatchSize + 1 }, "BatchSize"},
		{"empty scope with RequireScope", func(c *claim.Config) { c.Scope = nil; c.RequireScope = true }, "Scope"},
		{"nil scope value", func(c *claim.Config) { c.Scope[0].Value = nil }, "Scope[0]"},
		{"repeated scope column", func(c *claim.Config) { c.Scope = append(c.Scope, claim.Cond{Column: "task_id", Value: 1}) }, "Scope[1]"},
		{"status of wrong type", func(c *claim.Config) { c.Pending = 1.5 }, "Pending"},
		{"bool status", func(c *claim.Config) { c.Done = true }, "Done"},
		{"empty status string", func(c *claim.Config) { c.Processing = "" }, "Processing"},
		{"status with a quote", func(c *claim.Config) { c.Pending = "PEND'ING" }, "Pending"},
		{"mixed string and int statuses", func(c *claim.Config) { c.Pending = 0 }, "Processing"},
		{"mixed explicit statuses", func(c *claim.Config) { c.Pending, c.Processing, c.Done = 0, 1, "DONE" }, "mix"},
		{"duplicate status", func(c *claim.Config) { c.Done = "PENDING" }, "used twice"},
		{"table injection", func(c *claim.Config) { c.Table = "t; DROP TABLE x" }, "Table"},
		{"double quote", func(c *claim.Config) { c.Table = `a"b` }, "Table"},
		{"backtick", func(c *claim.Config) { c.StatusColumn = "a`b" }, "Status"},
		{"empty table", func(c *claim.Config) { c.Table = "" }, "Table"},
		{"too long", func(c *claim.Config) { c.IDColumn = strings.Repeat("x", dialect.MaxIdentLen+1) }, "ID"},
		{"qualified column", func(c *claim.Config) { c.TokenColumn = "s.token" }, "Token"},
		{"bad extra column", func(c *claim.Config) { c.Columns = []string{"ok", "no pe"} }, "Columns[1]"},
		{"bad scope column", func(c *claim.Config) { c.Scope[0].Column = "task-id" }, "Scope[0]"},
		{"same column twice", func(c *claim.Config) { c.TokenColumn = "status" }, "Token"},
		{"max attempts without column", func(c *claim.Config) { c.MaxAttempts = 3 }, "MaxAttempts"},
		{"negative max attempts", func(c *claim.Config) { c.MaxAttempts = -1 }, "MaxAttempts"},
		{"park without failed status", func(c *claim.Config) {
			c.Pending, c.Processing, c.Done, c.FailMode = 0, 1, 2, claim.FailPark
		}, "FailMode"},
		{"unknown strategy", func(c *claim.Config) { c.Strategy = 9 }, "Strategy"},
		{"unknown id kind", func(c *claim.Config) { c.IDKind = 5 }, "IDKind"},
		{"claim concurrency too large", func(c *claim.Config) { c.ClaimConcurrency = 1 << 20 }, "ClaimConcurrency"},
	}
	for _, tc := range cases {
		cfg := good()
		tc.mod(&cfg)
		_, _, err := cfg.ClaimTable()
		require.ErrorIs(t, err, claim.ErrInvalidConfig, tc.name)
		require.Contains(t, err.Error(), tc.field, tc.name)
		_, err = claim.New(e.d, cfg, jobFields)
		require.ErrorIs(t, err, claim.ErrInvalidConfig, tc.name)
	}

	// The fields function must match Columns.
	_, err := claim.New[job](e.d, good(), nil)
	require.ErrorIs(t, err, claim.ErrInvalidConfig)
	_, err = claim.New(e.d, good(), func(j *job) []any { return nil })
	require.ErrorIs(t, err, claim.ErrInvalidConfig)
	_, err = claim.New[job](nil, good(), jobFields)
	require.ErrorIs(t, err, claim.ErrInvalidConfig)

	// SQLite has no SKIP LOCKED.
	cfg := good()
	cfg.Strategy = dialect.StrategySkipLocked
	_, err = claim.New(e.d, cfg, jobFields)
	require.ErrorIs(t, err, claim.ErrNotSupported)
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	spec, scope, err := claim.Config{Table: "s.jobs", Scope: []claim.Cond{{Column: "task_id", Value: 42}}}.ClaimTable()
	require.NoError(t, err)
	require.Equal(t, []any{42}, scope)
	require.Equal(t, "s.jobs", spec.Table)
	require.Equal(t, [4]string{"id", "status", "token", "claimed_at"}, [4]string{spec.ID, spec.Status, spec.Token, spec.ClaimedAt})
	require.Equal(t, [4]string{"PENDING", "PROCESSING", "DONE", "FAILED"},
		[4]string{spec.Pending.String(), spec.Processing.String(), spec.Done.String(), spec.Failed.String()})

	// Integer statuses: Failed is optional.
	spec, _, err = claim.Config{Table: "jobs", Pending: 0, Processing: int8(1), Done: uint16(2)}.ClaimTable()
	require.NoError(t, err)
	require.True(t, spec.Pending.IsNumeric())
	require.False(t, spec.Failed.IsSet())
}

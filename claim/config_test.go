package claim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/ident"
)

func TestConfigRejectsBadInput(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	good := func() claim.Config {
		return claim.Config{
			ClaimTable:  dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}, Columns: []string{"payload"}},
			ScopeValues: []any{42},
		}
	}
	str, num := dialect.StatusString, dialect.StatusInt
	cases := []struct {
		name  string
		mod   func(*claim.Config)
		field string // the error must name it
	}{
		{"batch size negative", func(c *claim.Config) { c.BatchSize = -1 }, "BatchSize"},
		{"batch size above max", func(c *claim.Config) { c.BatchSize = claim.MaxBatchSize + 1 }, "BatchSize"},
		{"empty scope with RequireScope", func(c *claim.Config) { c.Scope, c.ScopeValues, c.RequireScope = nil, nil, true }, "Scope"},
		{"nil scope value", func(c *claim.Config) { c.ScopeValues[0] = nil }, "ScopeValues[0]"},
		{"missing scope value", func(c *claim.Config) { c.ScopeValues = nil }, "ScopeValues"},
		{"scope value without column", func(c *claim.Config) { c.ScopeValues = append(c.ScopeValues, 7) }, "ScopeValues"},
		{"repeated scope column", func(c *claim.Config) {
			c.Scope, c.ScopeValues = append(c.Scope, "task_id"), append(c.ScopeValues, 1)
		}, "Scope[1]"},
		{"empty status string", func(c *claim.Config) { c.Processing = str("") }, "Processing"},
		{"status with a quote", func(c *claim.Config) { c.Pending = str("PEND'ING") }, "Pending"},
		{"status with a space", func(c *claim.Config) { c.Failed = str("NOT SENT") }, "Failed"},
		{"long status", func(c *claim.Config) { c.Done = str(strings.Repeat("D", 65)) }, "Done"},
		{"mixed string and int statuses", func(c *claim.Config) { c.Pending = num(0) }, "Processing"},
		{"integer statuses need Done", func(c *claim.Config) { c.Pending, c.Processing = num(0), num(1) }, "Done"},
		{"integer statuses need Failed", func(c *claim.Config) { c.Pending, c.Processing, c.Done = num(0), num(1), num(2) }, "Failed"},
		{"mixed explicit statuses", func(c *claim.Config) {
			c.Pending, c.Processing, c.Done, c.Failed = num(0), num(1), str("DONE"), num(3)
		}, "mix"},
		{"duplicate status", func(c *claim.Config) { c.Done = str("PENDING") }, "used twice"},
		{"table injection", func(c *claim.Config) { c.Table = "t; DROP TABLE x" }, "Table"},
		{"double quote", func(c *claim.Config) { c.Table = `a"b` }, "Table"},
		{"backtick", func(c *claim.Config) { c.Status = "a`b" }, "Status"},
		{"empty table", func(c *claim.Config) { c.Table = "" }, "Table"},
		{"too long", func(c *claim.Config) { c.ID = strings.Repeat("x", ident.MaxLen+1) }, "ID"},
		{"qualified column", func(c *claim.Config) { c.Token = "s.token" }, "Token"},
		{"bad extra column", func(c *claim.Config) { c.Columns = []string{"ok", "no pe"} }, "Columns[1]"},
		{"bad scope column", func(c *claim.Config) { c.Scope[0] = "task-id" }, "Scope[0]"},
		{"same column twice", func(c *claim.Config) { c.Token = "status" }, "Token"},
		{"max attempts without column", func(c *claim.Config) { c.MaxAttempts = 3 }, "MaxAttempts"},
		{"negative max attempts", func(c *claim.Config) { c.MaxAttempts = -1 }, "MaxAttempts"},
		{"negative heartbeat interval", func(c *claim.Config) { c.HeartbeatInterval = -time.Second }, "HeartbeatInterval"},
		{"heartbeats slower than the deadline", func(c *claim.Config) { c.ReapTimeout, c.HeartbeatInterval = time.Minute, 58*time.Second }, "HeartbeatInterval"},
		{"unknown strategy", func(c *claim.Config) { c.Strategy = 9 }, "Strategy"},
		{"unknown id kind", func(c *claim.Config) { c.IDKind = 5 }, "IDKind"},
		{"claim concurrency too large", func(c *claim.Config) { c.ClaimConcurrency = 1 << 20 }, "ClaimConcurrency"},
	}
	for _, tc := range cases {
		cfg := good()
		tc.mod(&cfg)
		_, err := cfg.Resolve()
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, tc.name)
		require.Contains(t, err.Error(), tc.field, tc.name)
		require.Equal(t, 1, strings.Count(err.Error(), "claim: "), "%s: the package is named once: %v", tc.name, err)
		require.Equal(t, err.Error(), cfg.Validate().Error(), tc.name)
		_, err = claim.New(e.d, cfg, jobFields)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, tc.name)
	}

	// The fields function must match Columns.
	_, err := claim.New[job](e.d, good(), nil)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = claim.New(e.d, good(), func(j *job) []any { return nil })
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = claim.New[job](nil, good(), jobFields)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)

	// SQLite has no SKIP LOCKED.
	cfg := good()
	cfg.Strategy = dialect.StrategySkipLocked
	_, err = claim.New(e.d, cfg, jobFields)
	require.ErrorIs(t, err, dialect.ErrNotSupported)
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "s.jobs", Scope: []string{"task_id"}}, ScopeValues: []any{42}}
	spec, err := cfg.Resolve()
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	require.Equal(t, "s.jobs", spec.Table)
	require.Equal(t, []string{"task_id"}, spec.Scope)
	require.Equal(t, [4]string{"id", "status", "token", "claimed_at"}, [4]string{spec.ID, spec.Status, spec.Token, spec.ClaimedAt})
	require.Equal(t, [4]string{"PENDING", "PROCESSING", "DONE", "FAILED"},
		[4]string{spec.Pending.String(), spec.Processing.String(), spec.Done.String(), spec.Failed.String()})
	require.Equal(t, cfg.WithDefaults(), spec, "the claim config's defaults are the table's")

	// Set names and values are kept; the others are defaulted.
	cfg = claim.Config{ClaimTable: dialect.ClaimTable{Table: "t", Token: "cron_token", Done: dialect.StatusString("SENT")}}
	spec, err = cfg.Resolve()
	require.NoError(t, err)
	require.Equal(t, [2]string{"cron_token", "SENT"}, [2]string{spec.Token, spec.Done.String()})
	require.Equal(t, "PENDING", spec.Pending.String())

	// Integer statuses have no defaults: all four are set.
	spec, err = claim.Config{ClaimTable: dialect.ClaimTable{
		Table: "jobs", Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2), Failed: dialect.StatusInt(3),
	}}.Resolve()
	require.NoError(t, err)
	require.True(t, spec.Pending.IsNumeric())
	require.True(t, spec.Failed.IsSet())
}

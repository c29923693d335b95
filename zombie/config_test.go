package zombie_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

func memDialect(t *testing.T) dialect.Dialect {
	t.Helper()
	db, err := sqlite.Open(":memory:")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := sqlite.New(context.Background(), db, dialect.Options{})
	require.NoError(t, err)
	return d
}

// withMax returns cc with MaxAttempts n.
func withMax(cc claim.Config, n int) claim.Config {
	cc.MaxAttempts = n
	return cc
}

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	d := memDialect(t)
	lk, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: time.Second})
	require.NoError(t, err)
	good := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Attempts: "attempts"}}
	noAttempts := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs"}}
	intNoFailed := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Attempts: "attempts",
		Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2)}}
	scoped := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}}, ScopeValues: []any{1}}
	noScopeValue := scoped
	noScopeValue.ScopeValues = nil
	cases := []struct {
		name string
		d    dialect.Dialect
		cc   claim.Config
		cfg  zombie.Config
		want string
	}{
		{"zero timeout", d, good, zombie.Config{}, "Config.Timeout: must be positive"},
		{"negative timeout", d, good, zombie.Config{Timeout: -time.Second}, "Config.Timeout: must be positive"},
		{"negative batch limit", d, good, zombie.Config{Timeout: time.Second, BatchLimit: -1}, "Config.BatchLimit: -1 is negative"},
		{"negative max attempts", d, withMax(good, -2), zombie.Config{Timeout: time.Second}, "MaxAttempts: -2 is negative"},
		{"max attempts without attempts column", d, withMax(noAttempts, 3), zombie.Config{Timeout: time.Second}, "MaxAttempts: parking rows after a number of attempts needs an Attempts column"},
		{"integer statuses without failed status", d, intNoFailed, zombie.Config{Timeout: time.Second}, "Failed: status value is not set"},
		{"locker without key", d, good, zombie.Config{Timeout: time.Second, Locker: lk}, "Config.LockKey: is required with Locker"},
		{"key without locker", d, good, zombie.Config{Timeout: time.Second, LockKey: "k"}, "Config.LockKey: is set but Locker is nil"},
		{"key of the wrong type", d, good, zombie.Config{Timeout: time.Second, Locker: lk, LockKey: 42}, "Config.LockKey"},
		{"scope without values", d, noScopeValue, zombie.Config{Timeout: time.Second}, "ScopeValues"},
		{"bad claim table", d, claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs; drop"}}, zombie.Config{Timeout: time.Second}, "Table"},
		{"nil dialect", nil, good, zombie.Config{Timeout: time.Second}, "Dialect: is nil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := zombie.New(c.d, c.cc, c.cfg)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig)
			require.ErrorContains(t, err, c.want)
			require.Equal(t, 1, strings.Count(err.Error(), "zombie: "), "the package is named once: %v", err)
			require.Nil(t, r)
		})
	}

	// The valid variants of the same configs are accepted.
	_, err = zombie.New(d, withMax(good, 3), zombie.Config{Timeout: time.Second, Locker: lk, LockKey: "zombie:jobs"})
	require.NoError(t, err)
	_, err = zombie.New(d, scoped, zombie.Config{Timeout: time.Second})
	require.NoError(t, err)
	_, err = zombie.New(d, scoped, zombie.Config{Timeout: time.Second, AllScopes: true})
	require.NoError(t, err)
	_, err = zombie.New(d, good, zombie.Config{Timeout: time.Second, AllScopes: true})
	require.NoError(t, err, "an unscoped claim config sweeps all scopes anyway")

	r, err := zombie.New(d, good, zombie.Config{Timeout: time.Second})
	require.NoError(t, err)
	require.ErrorIs(t, r.Run(context.Background(), 0), dialect.ErrInvalidConfig)
}

func TestNewLeaseReaperRejectsBadInput(t *testing.T) {
	t.Parallel()
	d := memDialect(t)
	noExpiry := tasklock.TaskTable("tasks")
	badIdent := tasklock.KeyTable("leases")
	badIdent.Owner = "owner`"
	cases := []struct {
		name  string
		d     dialect.Dialect
		table dialect.LeaseTable
		cfg   zombie.LeaseConfig
		want  string
	}{
		{"negative batch limit", d, tasklock.KeyTable("leases"), zombie.LeaseConfig{BatchLimit: -5}, "LeaseConfig.BatchLimit: -5 is negative"},
		{"no expires_at column", d, noExpiry, zombie.LeaseConfig{}, "LeaseTable.ExpiresAt: is required"},
		{"bad identifier", d, badIdent, zombie.LeaseConfig{}, "Owner"},
		{"nil dialect", nil, tasklock.KeyTable("leases"), zombie.LeaseConfig{}, "Dialect: is nil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := zombie.NewLeaseReaper(c.d, c.table, c.cfg)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig)
			require.ErrorContains(t, err, c.want)
			require.Nil(t, r)
		})
	}
	r, err := zombie.NewLeaseReaper(d, tasklock.KeyTable("leases"), zombie.LeaseConfig{})
	require.NoError(t, err)
	require.ErrorIs(t, r.Run(context.Background(), -time.Second), dialect.ErrInvalidConfig)
}

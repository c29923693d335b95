package dialect_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
)

func TestClaimTableWithDefaults(t *testing.T) {
	t.Parallel()
	cols := []string{"payload"}
	in := dialect.ClaimTable{Table: "jobs", Token: "cron_token", Done: dialect.StatusString("SENT"), Columns: cols}
	got := in.WithDefaults()
	require.NoError(t, got.Validate())
	require.Equal(t, [4]string{"id", "status", "cron_token", "claimed_at"}, [4]string{got.ID, got.Status, got.Token, got.ClaimedAt})
	require.Equal(t, [4]string{"PENDING", "PROCESSING", "SENT", "FAILED"},
		[4]string{got.Pending.String(), got.Processing.String(), got.Done.String(), got.Failed.String()})
	require.Equal(t, "", in.ID, "the receiver is not changed")
	got.Columns[0] = "other"
	require.Equal(t, "payload", cols[0], "the result shares no slice with the receiver")
	require.Equal(t, got.WithDefaults(), got, "defaults apply once")

	// Integer statuses have no defaults: a missing one is reported by
	// Validate.
	ints := dialect.ClaimTable{Table: "jobs", Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2)}.WithDefaults()
	require.ErrorContains(t, ints.Validate(), "Failed: status value is not set")
	require.False(t, ints.Failed.IsSet())
	noDone := dialect.ClaimTable{Table: "jobs", Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1)}.WithDefaults()
	require.ErrorIs(t, noDone.Validate(), dialect.ErrInvalidConfig)
	require.ErrorContains(t, noDone.Validate(), "Done: status value is not set (integer status values have no default)")
}

func TestClaimTableValidateRoles(t *testing.T) {
	t.Parallel()
	base := dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}}.WithDefaults()
	twice := base
	twice.Token = "status"
	require.ErrorIs(t, twice.Validate(), dialect.ErrInvalidConfig)
	require.ErrorContains(t, twice.Validate(), `Token: column "status" is also Status`)
	scope := base
	scope.Scope = []string{"task_id", "task_id"}
	require.ErrorContains(t, scope.Validate(), "Scope[1]")
	read := base
	read.Attempts = "attempts"
	read.Columns = []string{"attempts", "status"}
	require.NoError(t, read.Validate(), "extra columns may repeat role columns: they are only read")
	worker := base
	worker.Worker = "token"
	require.ErrorContains(t, worker.Validate(), `Worker: column "token" is also Token`)
	worker.Worker = "task_id"
	require.ErrorIs(t, worker.Validate(), dialect.ErrInvalidConfig)
	require.ErrorContains(t, worker.Validate(), `Worker: column "task_id" is also Scope[0]`)
	worker.Worker = "bad name"
	require.ErrorContains(t, worker.Validate(), "Worker")
	worker.Worker, worker.Columns = "claimed_by", []string{"claimed_by"}
	require.NoError(t, worker.Validate(), "a claim may read the worker column back")
}

func TestMaxAttempts(t *testing.T) {
	t.Parallel()
	full := dialect.ClaimTable{Table: "jobs", Attempts: "attempts"}.WithDefaults()
	noAttempts := dialect.ClaimTable{Table: "jobs"}.WithDefaults()
	for _, tc := range []struct {
		name string
		t    dialect.ClaimTable
		n    int
		want int
		err  string // "" for no error
	}{
		{"zero without attempts: a failure parks at once", noAttempts, 0, 0, ""},
		{"zero with attempts: the default", full, 0, dialect.DefaultMaxAttempts, ""},
		{"positive", full, 3, 3, ""},
		{"negative", full, -1, 0, "MaxAttempts: -1 is negative"},
		{"no attempts column", noAttempts, 3, 0, "needs an Attempts column"},
	} {
		n, err := tc.t.MaxAttempts(tc.n)
		if tc.err == "" {
			require.NoError(t, err, tc.name)
			require.Equal(t, tc.want, n, tc.name)
			continue
		}
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, tc.name)
		require.ErrorContains(t, err, tc.err, tc.name)
	}
	noFailed := dialect.ClaimTable{Table: "jobs", Attempts: "attempts",
		Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2)}.WithDefaults()
	require.ErrorContains(t, noFailed.Validate(), "Failed: status value is not set", "integer statuses need a Failed value")
}

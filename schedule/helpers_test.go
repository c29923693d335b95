package schedule_test

import (
	"context"
	"testing"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/schedtest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/schedule"
)

// forEachEngine runs fn as a parallel subtest per engine, on a fresh
// database with the schedule tables.
func forEachEngine(t *testing.T, fn func(t *testing.T, c *testengine.Conn)) {
	t.Helper()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			c := testengine.Open(t, e, 0)
			require.NoError(t, schedule.CreateTables(context.Background(), c.Dialect, "", ""))
			fn(t, c)
		})
	}
}

var (
	history    = schedtest.History
	account    = schedtest.Account
	accountAll = schedtest.AccountAll
)

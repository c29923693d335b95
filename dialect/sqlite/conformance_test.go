package sqlite_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

func TestConformance(t *testing.T) {
	dialecttest.Run(t, dialecttest.Harness{
		Name: "sqlite",
		Open: func(t *testing.T) (dialect.Dialect, *sql.DB) {
			db := dbtest.SQLite(t)
			d, err := sqlite.New(context.Background(), db, dialect.Options{})
			require.NoError(t, err)
			return d, db
		},
	})
}

package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

// TestConformancePool runs the shared suite on the pgx-native fast path.
func TestConformancePool(t *testing.T) {
	t.Parallel()
	dialecttest.Run(t, dialecttest.Harness{
		Name: "postgres-pgxpool",
		Open: func(t *testing.T) (dialect.Dialect, *sql.DB) {
			pool := dbtest.PostgresPool(t)
			d, err := postgres.New(context.Background(), pool, dialect.Options{})
			require.NoError(t, err)
			db := stdlib.OpenDBFromPool(pool)
			t.Cleanup(func() { db.Close() })
			return d, db
		},
	})
}

// TestConformanceStdlib runs the shared suite on a database/sql handle.
func TestConformanceStdlib(t *testing.T) {
	t.Parallel()
	dialecttest.Run(t, dialecttest.Harness{
		Name: "postgres-stdlib",
		Open: func(t *testing.T) (dialect.Dialect, *sql.DB) {
			db := dbtest.Postgres(t)
			d, err := postgres.NewStdlib(context.Background(), db, dialect.Options{})
			require.NoError(t, err)
			return d, db
		},
	})
}

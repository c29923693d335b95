package postgres_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

// closedPort returns a local address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestReachRealErrors sorts real driver errors by whether anything reached
// the server.
func TestReachRealErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, dsn := range map[string]string{
		"refused":      "postgres://postgres@" + closedPort(t) + "/x?sslmode=disable",
		"no such host": "postgres://postgres@no-such-host.invalid:5432/x?sslmode=disable&connect_timeout=5",
	} {
		pool, err := pgxpool.New(ctx, dsn)
		require.NoError(t, err, name)
		_, err = pool.Exec(ctx, "SELECT 1")
		pool.Close()
		require.Error(t, err, name)
		require.Equal(t, errclass.Unreachable, errclass.Of(err), "%s: %v", name, err)
		require.True(t, dialect.IsRetryable(err), name)
	}

	// A statement whose backend is terminated while it runs.
	pool := dbtest.PostgresPool(t)
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	var pid int
	require.NoError(t, c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	done := make(chan error, 1)
	go func() { _, err := c.Exec(ctx, "SELECT pg_sleep(30)"); done <- err }()
	require.Eventually(t, func() bool {
		var n int
		_ = pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_sleep(30)%' AND state = 'active'", pid).Scan(&n)
		return n == 1
	}, 10*time.Second, 10*time.Millisecond)
	_, err = pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	err = <-done
	require.Error(t, err)
	require.Equal(t, errclass.Connection, errclass.Of(err), "%v", err)
}

// TestReachPoolWait: a write whose context ends while it waits for a
// pooled connection sent nothing, so its outcome is known.
func TestReachPoolWait(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(dbtest.PostgresDSN(t))
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	defer pool.Close()
	d, err := postgres.New(context.Background(), pool, dialect.Options{})
	require.NoError(t, err)
	cs := dialecttest.CreateClaimTable(t, d, dialect.ClaimTable{
		Table: "cl_wait", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
	}.WithDefaults())
	held, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	defer held.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = cs.Release(ctx, store.NewToken(), []any{1})
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, errors.Is(err, dialect.ErrOutcomeUnknown), "%v", err)
}

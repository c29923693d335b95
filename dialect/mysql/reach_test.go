package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

// TestReachRealErrors sorts real driver errors by whether anything reached
// the server.
func TestReachRealErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	ln.Close()
	for name, dsn := range map[string]string{
		"refused":      "root@tcp(" + closed + ")/x",
		"no such host": "root@tcp(no-such-host.invalid:3306)/x?timeout=5s",
	} {
		db, err := sql.Open("mysql", dsn)
		require.NoError(t, err, name)
		_, err = db.ExecContext(ctx, "SELECT 1")
		db.Close()
		require.Error(t, err, name)
		require.Equal(t, errclass.Unreachable, errclass.Of(err), "%s: %v", name, err)
		require.True(t, dialect.IsRetryable(err), name)
	}

	// A statement whose connection is killed while it runs.
	db := dbtest.MySQL(t)
	c, err := db.Conn(ctx)
	require.NoError(t, err)
	defer c.Close()
	var id int64
	require.NoError(t, c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id))
	done := make(chan error, 1)
	go func() { _, err := c.ExecContext(ctx, "SELECT SLEEP(30)"); done <- err }()
	require.Eventually(t, func() bool {
		var n int
		_ = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.processlist WHERE id = ? AND info LIKE '%SLEEP(30)%'", id).Scan(&n)
		return n == 1
	}, 10*time.Second, 10*time.Millisecond)
	_, err = db.ExecContext(ctx, "KILL CONNECTION ?", id)
	require.NoError(t, err)
	err = <-done
	require.Error(t, err)
	require.Equal(t, errclass.Connection, errclass.Of(err), "%v", err)
}

// TestReachPoolWait: a write whose context ends while it waits for a
// pooled connection sent nothing, so its outcome is known.
func TestReachPoolWait(t *testing.T) {
	t.Parallel()
	db := dbtest.MySQL(t)
	d, err := mysql.New(context.Background(), db, dialect.Options{})
	require.NoError(t, err)
	cs := dialecttest.CreateClaimTable(t, d, dialect.ClaimTable{
		Table: "cl_wait", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
	}.WithDefaults())
	db.SetMaxOpenConns(1)
	held, err := db.Conn(context.Background())
	require.NoError(t, err)
	defer held.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = cs.Release(ctx, store.NewToken(), []any{1})
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, errors.Is(err, dialect.ErrOutcomeUnknown), "%v", err)
}

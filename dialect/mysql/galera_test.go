package mysql_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// The Galera cluster itself is tested in internal/scaleout; these cases
// pin what a server without Galera (the shared test server) and bad input
// give.

func TestGaleraCausal(t *testing.T) {
	t.Parallel()
	require.True(t, mysql.Galera{}.Causal(), "not a Galera node: nothing to wait for")
	require.False(t, mysql.Galera{Enabled: true}.Causal())
	require.False(t, mysql.Galera{Enabled: true, SyncWait: 1}.Causal(), "reads only: acks and heartbeats could still miss a claim")
	require.True(t, mysql.Galera{Enabled: true, SyncWait: mysql.GaleraSyncWait}.Causal())
	require.True(t, mysql.Galera{Enabled: true, SyncWait: 15}.Causal())
}

func TestOpenClusterRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := mysql.OpenCluster(ctx, nil)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = mysql.OpenCluster(ctx, []string{"root@tcp(127.0.0.1:1)/x", "not a dsn"})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.Contains(t, err.Error(), "DSN 2")
}

func TestOpenClusterWithoutGalera(t *testing.T) {
	dsn := dbtest.MySQLDSN(t)
	ctx := ctxT(t)
	// The first node refuses connections: it is skipped when opening and
	// when dialling.
	db, err := mysql.OpenCluster(ctx, []string{"claimlock:x@tcp(127.0.0.1:1)/none", dsn})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(3)
	d := newDialect(t, db, dialect.Options{})
	require.False(t, d.Galera().Enabled)
	require.True(t, d.Galera().Causal())
	require.True(t, d.ReadCommittedSession())
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		conns[i], err = db.Conn(ctx)
		require.NoError(t, err)
		var one int
		require.NoError(t, conns[i].QueryRowContext(ctx, "SELECT 1").Scan(&one))
	}
	for _, c := range conns {
		c.Close()
	}
	_, err = mysql.OpenCluster(ctx, []string{"claimlock:x@tcp(127.0.0.1:1)/none"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "no node answered")
}

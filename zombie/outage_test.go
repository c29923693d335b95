package zombie_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/internal/testkit/connfault"
	"github.com/claimlock/claimlock/internal/testkit/netfault"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/zombie"
)

var faultSeq atomic.Int64

// faultyDialect opens e's database again on a path the test can take away:
// through a netfault proxy for a server, through a connfault driver for
// SQLite. down and up take it away and give it back.
func faultyDialect(t *testing.T, e *env) (d dialect.Dialect, down, up func()) {
	t.Helper()
	ctx := context.Background()
	if e.kind == testengine.SQLite {
		inner := e.raw.Driver()
		sw := &connfault.Switch{}
		name := fmt.Sprintf("zombie-sqlite-fault-%d", faultSeq.Add(1))
		connfault.Register(name, inner, sw)
		db, err := sql.Open(name, "file:"+e.dsn+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		d, err := sqlite.New(ctx, db, dialect.Options{})
		require.NoError(t, err)
		return d, sw.Down, sw.Up
	}
	var p *netfault.Proxy
	dsn, _, err := testengine.Reroute(e.kind, e.dsn, func(server string) string {
		p = netfault.New(t, server)
		return p.Addr()
	})
	require.NoError(t, err)
	c, closeFn, err := testengine.Connect(ctx, e.kind, dsn, 4, dialect.Options{})
	require.NoError(t, err)
	t.Cleanup(closeFn)
	return c.Dialect, p.Down, p.Up
}

// TestOutageGrace: a reaper whose database was away does not take, when it
// comes back, rows that went stale only during the outage: their holder
// acks and heartbeats once it reconnects, and its ack lands. Rows of a
// holder that died meanwhile are taken once the window of one timeout
// after the reconnect ends, not later.
func TestOutageGrace(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		const timeout = 2 * time.Second
		cc := jobsConfig(2)
		createTable(t, e, cc, false)
		insertRows(t, e, cc.Table, "PENDING", 4, 100)
		c, err := claim.New[struct{}](e.d, cc, nil)
		require.NoError(t, err)
		alive, err := c.Claim(ctx) // its holder lives through the outage
		require.NoError(t, err)
		require.Equal(t, 2, alive.Len())
		dead, err := c.Claim(ctx) // its holder dies during it
		require.NoError(t, err)
		require.Equal(t, 2, dead.Len())
		claimed := time.Now()

		rd, down, up := faultyDialect(t, e)
		r, err := zombie.New(rd, cc, zombie.Config{Timeout: timeout})
		require.NoError(t, err)
		res, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, res.Returned, "nothing is stale yet")

		down()
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = r.Sweep(sctx)
		cancel()
		require.Error(t, err, "the database is away")
		// Every claim is older than the timeout when the database is back.
		time.Sleep(time.Until(claimed.Add(timeout + 700*time.Millisecond)))
		up()
		back := time.Now()
		res, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, res.Returned, "rows gone stale during the reaper's own outage are left to their holders")
		stale, err := r.Stale(ctx, 10)
		require.NoError(t, err)
		require.Empty(t, stale, "Stale lists what the sweep would take")

		// The live holder reconnects: its ack lands, its heartbeat too.
		require.NoError(t, alive.Ack(ctx, alive.IDs()[0]))
		require.Empty(t, alive.Lost())

		// Once the window ends, the dead holder's rows are taken, and only
		// they: the live one heartbeats as it always does.
		time.Sleep(time.Until(back.Add(timeout + 300*time.Millisecond)))
		n, err := alive.Heartbeat(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		res, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 2, res.Returned, "the dead holder's rows, one timeout after the reconnect")
		require.Less(t, time.Since(back), timeout+5*time.Second, "taken at most about one timeout late")
		require.ErrorIs(t, dead.AckAll(ctx), dialect.ErrClaimLost)
		require.NoError(t, alive.AckAll(ctx), "the live holder's last row is still its own")
	})
}

package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/claimlock/claimlock/internal/errclass"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// fakeNodeConn answers every statement with err (nil: success).
type fakeNodeConn struct {
	err    error
	closed atomic.Bool
	execs  *atomic.Int64
}

func (f *fakeNodeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no prepare") }
func (f *fakeNodeConn) Close() error                        { f.closed.Store(true); return nil }
func (f *fakeNodeConn) Begin() (driver.Tx, error)           { return nil, errors.New("no begin") }

func (f *fakeNodeConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	f.execs.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	return driver.RowsAffected(1), nil
}

// fakeNodes hands out connections to a refusing node first, then to
// healthy ones.
type fakeNodes struct {
	mu     sync.Mutex
	conns  []*fakeNodeConn
	refuse error
	execs  atomic.Int64
}

func (n *fakeNodes) Connect(context.Context) (driver.Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f := &fakeNodeConn{execs: &n.execs}
	if len(n.conns) == 0 {
		f.err = n.refuse
	}
	n.conns = append(n.conns, f)
	return &clusterConn{conn: f}, nil
}

func (n *fakeNodes) Driver() driver.Driver { return gomysql.MySQLDriver{} }

func TestClusterConnDropsRefusingNode(t *testing.T) {
	notPrimary := &gomysql.MySQLError{Number: errNotPrimary, Message: "WSREP has not yet prepared node for application use"}

	t.Run("refusal", func(t *testing.T) {
		c := &clusterConn{conn: &fakeNodeConn{err: notPrimary, execs: new(atomic.Int64)}}
		_, err := c.ExecContext(context.Background(), "UPDATE t SET x = 1", nil)
		require.ErrorIs(t, err, driver.ErrBadConn, "database/sql must drop the connection")
		var me *gomysql.MySQLError
		require.True(t, errors.As(err, &me), "the server's error stays reachable")
		require.EqualValues(t, errNotPrimary, me.Number)
		require.Equal(t, errclass.Unavailable, classify(err), "nothing ran: retried like a conflict")
		require.True(t, errclass.Unavailable.Retryable())
		require.Contains(t, err.Error(), "WSREP has not yet prepared node")
		require.False(t, c.IsValid())
		require.ErrorIs(t, c.ResetSession(context.Background()), driver.ErrBadConn)
	})

	t.Run("other errors pass unchanged", func(t *testing.T) {
		deadlock := &gomysql.MySQLError{Number: errDeadlock, Message: "Deadlock found"}
		c := &clusterConn{conn: &fakeNodeConn{err: deadlock, execs: new(atomic.Int64)}}
		_, err := c.ExecContext(context.Background(), "UPDATE t SET x = 1", nil)
		require.Same(t, deadlock, err)
		require.True(t, c.IsValid())
		require.NoError(t, c.ResetSession(context.Background()))
	})

	t.Run("database/sql re-runs on another connection", func(t *testing.T) {
		nodes := &fakeNodes{refuse: notPrimary}
		db := sql.OpenDB(nodes)
		defer db.Close()
		res, err := db.ExecContext(context.Background(), "UPDATE t SET x = 1")
		require.NoError(t, err, "the refused statement is re-run on a new connection")
		n, err := res.RowsAffected()
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		require.EqualValues(t, 2, nodes.execs.Load(), "refused once, then run once")
		nodes.mu.Lock()
		defer nodes.mu.Unlock()
		require.Len(t, nodes.conns, 2)
		require.True(t, nodes.conns[0].closed.Load(), "the refusing node's connection is closed, not pooled")
		require.False(t, nodes.conns[1].closed.Load())
	})
}

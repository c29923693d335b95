package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"
	"time"
)

// clusterConn is a connection of an [OpenCluster] pool. A node that leaves
// the primary component refuses every statement with error 1047 before
// running it, and keeps refusing until it rejoins; a pool that kept its
// connections would fail a share of its statements for as long. So a
// statement the node refuses marks the connection bad: the error it returns
// also wraps [driver.ErrBadConn], which makes database/sql close the
// connection instead of pooling it and run a statement outside a
// transaction again on another connection, which Connect dials on a node
// that is ready. IsValid and ResetSession report the mark as well. An idle
// pooled connection is found out at its first statement: one on a
// connection the caller pinned (sql.Conn) or in a transaction is not re-run
// by database/sql, and reaches the caller (the claimlock stores re-run it
// whole: nothing ran).
//
// The wrapped connection is go-sql-driver/mysql's, which implements every
// optional interface forwarded here.
type clusterConn struct {
	conn driver.Conn
	bad  atomic.Bool
}

var (
	_ driver.Conn               = (*clusterConn)(nil)
	_ driver.ConnBeginTx        = (*clusterConn)(nil)
	_ driver.ConnPrepareContext = (*clusterConn)(nil)
	_ driver.ExecerContext      = (*clusterConn)(nil)
	_ driver.QueryerContext     = (*clusterConn)(nil)
	_ driver.Pinger             = (*clusterConn)(nil)
	_ driver.SessionResetter    = (*clusterConn)(nil)
	_ driver.Validator          = (*clusterConn)(nil)
	_ driver.NamedValueChecker  = (*clusterConn)(nil)
)

// refusedError is a statement a node outside the primary component refused:
// both the server's error and [driver.ErrBadConn].
type refusedError struct{ err error }

func (e *refusedError) Error() string {
	return e.err.Error() + " (the node is outside the primary component; its connection is dropped)"
}

func (e *refusedError) Unwrap() []error { return []error{e.err, driver.ErrBadConn} }

// check marks the connection bad when err is the node's refusal: error
// 1047, or a lock-wait timeout (1205) on a node that reports it is not ready
// (a statement that reads no table waits there for causal reads, which
// cannot complete outside the primary component, instead of being refused).
// Either way the statement did not run.
func (c *clusterConn) check(err error) error {
	if err == nil {
		return nil
	}
	refused := isErrNumber(err, errNotPrimary)
	if !refused && isErrNumber(err, errLockWaitTimeout) {
		ctx, cancel := context.WithTimeout(context.Background(), nodeCheckTimeout)
		st, serr := nodeState(ctx, c.conn)
		cancel()
		refused = serr == nil && st == nodeNotReady
	}
	if refused {
		c.bad.Store(true)
		return &refusedError{err}
	}
	return err
}

// nodeCheckTimeout bounds the readiness check after a lock-wait timeout.
const nodeCheckTimeout = 5 * time.Second

// Prepare implements [driver.Conn].
func (c *clusterConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext implements [driver.ConnPrepareContext].
func (c *clusterConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	p, ok := c.conn.(driver.ConnPrepareContext)
	if !ok {
		return nil, errors.New("mysql: the driver connection cannot prepare with a context")
	}
	st, err := p.PrepareContext(ctx, query)
	if err != nil {
		return nil, c.check(err)
	}
	return &clusterStmt{Stmt: st, c: c}, nil
}

// Close implements [driver.Conn].
func (c *clusterConn) Close() error { return c.conn.Close() }

// Begin implements [driver.Conn].
func (c *clusterConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx implements [driver.ConnBeginTx].
func (c *clusterConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errors.New("mysql: the driver connection cannot begin with a context")
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.check(err)
	}
	return &clusterTx{tx: tx, c: c}, nil
}

// ExecContext implements [driver.ExecerContext].
func (c *clusterConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := e.ExecContext(ctx, query, args)
	return res, c.check(err)
}

// QueryContext implements [driver.QueryerContext].
func (c *clusterConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	return rows, c.check(err)
}

// Ping implements [driver.Pinger].
func (c *clusterConn) Ping(ctx context.Context) error {
	if c.bad.Load() {
		return driver.ErrBadConn
	}
	if p, ok := c.conn.(driver.Pinger); ok {
		return c.check(p.Ping(ctx))
	}
	return nil
}

// ResetSession implements [driver.SessionResetter].
func (c *clusterConn) ResetSession(ctx context.Context) error {
	if c.bad.Load() {
		return driver.ErrBadConn
	}
	if r, ok := c.conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid implements [driver.Validator].
func (c *clusterConn) IsValid() bool {
	if c.bad.Load() {
		return false
	}
	if v, ok := c.conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// CheckNamedValue implements [driver.NamedValueChecker]: the driver's own
// conversions apply.
func (c *clusterConn) CheckNamedValue(nv *driver.NamedValue) error {
	if v, ok := c.conn.(driver.NamedValueChecker); ok {
		return v.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// clusterTx is a transaction on a clusterConn: a COMMIT the node refuses
// marks the connection bad too (nothing was committed).
type clusterTx struct {
	tx driver.Tx
	c  *clusterConn
}

func (t *clusterTx) Commit() error   { return t.c.check(t.tx.Commit()) }
func (t *clusterTx) Rollback() error { return t.tx.Rollback() }

// clusterStmt is a prepared statement on a clusterConn.
type clusterStmt struct {
	driver.Stmt
	c *clusterConn
}

var (
	_ driver.StmtExecContext   = (*clusterStmt)(nil)
	_ driver.StmtQueryContext  = (*clusterStmt)(nil)
	_ driver.NamedValueChecker = (*clusterStmt)(nil)
)

// ExecContext implements [driver.StmtExecContext].
func (s *clusterStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.Stmt.(driver.StmtExecContext)
	if !ok {
		return nil, errors.New("mysql: the driver statement cannot execute with a context")
	}
	res, err := e.ExecContext(ctx, args)
	return res, s.c.check(err)
}

// QueryContext implements [driver.StmtQueryContext].
func (s *clusterStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.Stmt.(driver.StmtQueryContext)
	if !ok {
		return nil, errors.New("mysql: the driver statement cannot query with a context")
	}
	rows, err := q.QueryContext(ctx, args)
	return rows, s.c.check(err)
}

// CheckNamedValue implements [driver.NamedValueChecker].
func (s *clusterStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if v, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return v.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

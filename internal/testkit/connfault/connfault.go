// Package connfault wraps a database/sql driver so that a test can take the
// database away: while it is down, every connect and every statement fails
// with driver.ErrBadConn before anything reaches the driver (nothing was
// done), and a statement can be made to run and then lose its reply. It
// is for engines with no network to fault (SQLite); it is for tests only.
package connfault

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"
)

// ErrReplyLost is what a statement that ran returns when its reply is lost.
var ErrReplyLost = errors.New("connfault: the statement ran but its reply was lost")

// Switch takes the database of the connections a [Driver] opened away and
// back.
type Switch struct {
	down      atomic.Bool
	loseReply atomic.Int32 // statements whose reply is lost, then down
}

// Down makes every connect and statement fail with driver.ErrBadConn.
func (s *Switch) Down() { s.down.Store(true) }

// Up lets them through again.
func (s *Switch) Up() { s.down.Store(false) }

// LoseNextReply lets the next statement run and then fails it with
// [ErrReplyLost], taking the database down at the same moment.
func (s *Switch) LoseNextReply() { s.loseReply.Store(1) }

// after ends a statement that ran: when a lost reply was asked for, it
// takes the database down and returns ErrReplyLost.
func (s *Switch) after(err error) error {
	if err == nil && s.loseReply.CompareAndSwap(1, 0) {
		s.Down()
		return ErrReplyLost
	}
	return err
}

// Register registers name as inner wrapped by sw, for sql.Open(name, dsn).
func Register(name string, inner driver.Driver, sw *Switch) {
	sql.Register(name, &drv{inner: inner, sw: sw})
}

type drv struct {
	inner driver.Driver
	sw    *Switch
}

func (d *drv) Open(dsn string) (driver.Conn, error) {
	if d.sw.down.Load() {
		return nil, driver.ErrBadConn
	}
	c, err := d.inner.Open(dsn)
	if err != nil {
		return nil, err
	}
	return &conn{c: c, sw: d.sw}, nil
}

type conn struct {
	c  driver.Conn
	sw *Switch
}

func (c *conn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *conn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	if c.sw.down.Load() {
		return nil, driver.ErrBadConn
	}
	if p, ok := c.c.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, q)
	}
	return c.c.Prepare(q)
}

func (c *conn) Close() error { return c.c.Close() }

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.sw.down.Load() {
		return nil, driver.ErrBadConn
	}
	if b, ok := c.c.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	//lint:ignore SA1019 the wrapped driver has no BeginTx
	return c.c.Begin()
}

func (c *conn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if c.sw.down.Load() {
		return nil, driver.ErrBadConn
	}
	e, ok := c.c.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := e.ExecContext(ctx, q, args)
	return r, c.sw.after(err)
}

func (c *conn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if c.sw.down.Load() {
		return nil, driver.ErrBadConn
	}
	e, ok := c.c.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := e.QueryContext(ctx, q, args)
	if err == nil {
		if err := c.sw.after(nil); err != nil {
			// Read the statement to its end, as the server did, then
			// lose the reply.
			dest := make([]driver.Value, len(r.Columns()))
			for r.Next(dest) == nil {
			}
			r.Close()
			return nil, err
		}
	}
	return r, err
}

func (c *conn) ResetSession(ctx context.Context) error {
	if c.sw.down.Load() {
		return driver.ErrBadConn
	}
	if r, ok := c.c.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

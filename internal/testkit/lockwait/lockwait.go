// Package lockwait lets a test wait until another session waits for a
// lock that the test's transaction holds, on PostgreSQL and MySQL/MariaDB,
// instead of pausing and hoping the other statement got that far: lock
// order tests assert what happens once a statement waits, and a statement
// that has not started by then would pass them unproven.
package lockwait

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// Session is the server session of a transaction whose locks other
// sessions may wait for.
type Session struct {
	db     *sql.DB
	engine dialect.Engine
	id     int64
}

// Of returns the session of tx, a transaction of db on a server of the
// given engine (PostgreSQL, MySQL or MariaDB).
func Of(ctx context.Context, db *sql.DB, tx *sql.Tx, engine dialect.Engine) (Session, error) {
	var q string
	switch engine {
	case dialect.EnginePostgreSQL:
		q = "SELECT pg_backend_pid()"
	case dialect.EngineMySQL, dialect.EngineMariaDB:
		q = "SELECT CONNECTION_ID()"
	default:
		return Session{}, fmt.Errorf("lockwait: no lock waits to watch on %s", engine)
	}
	s := Session{db: db, engine: engine}
	if err := tx.QueryRowContext(ctx, q).Scan(&s.id); err != nil {
		return Session{}, fmt.Errorf("lockwait: reading the session id: %w", err)
	}
	return s, nil
}

// blocking reports whether some session waits for a lock s holds. On
// MySQL and MariaDB it reads information_schema (the PROCESS privilege).
func (s Session) blocking(ctx context.Context) (bool, error) {
	var q string
	if s.engine == dialect.EnginePostgreSQL {
		q = "SELECT COUNT(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))"
	} else {
		q = "SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS w " +
			"JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id WHERE b.trx_mysql_thread_id = ?"
	}
	var n int
	if err := s.db.QueryRowContext(ctx, q, s.id).Scan(&n); err != nil {
		return false, fmt.Errorf("lockwait: reading lock waits: %w", err)
	}
	return n > 0, nil
}

// ErrNoWait is returned by [Session.Await] when no session waited for s
// in time.
var ErrNoWait = errors.New("lockwait: no session waited for the transaction's locks")

// Await polls until some session waits for a lock s holds, for at most
// limit. Each round it first calls ended, whose error (the awaited
// statement ended instead of waiting) it returns.
//
// On MySQL and MariaDB it polls every 150 ms: InnoDB serves
// information_schema's lock tables from a cache that it refreshes only
// when no one has read it for 100 ms, so polling faster would read the
// state from before the wait for as long as it polls.
func (s Session) Await(ctx context.Context, limit time.Duration, ended func() error) error {
	deadline := time.Now().Add(limit)
	pause := 5 * time.Millisecond
	if s.engine != dialect.EnginePostgreSQL {
		pause = 150 * time.Millisecond
	}
	for {
		if err := ended(); err != nil {
			return err
		}
		ok, err := s.blocking(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return ErrNoWait
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

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
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// Session is the server session of a transaction whose locks other
// sessions may wait for.
type Session struct {
	db     *sql.DB
	engine dialect.Engine
	id     int64  // the backend's pid (PostgreSQL), the connection id (MySQL)
	schema string // MySQL and MariaDB: the session's database
}

// Of returns the session of tx, a transaction of db on a server of the
// given engine (PostgreSQL, MySQL or MariaDB).
func Of(ctx context.Context, db *sql.DB, tx *sql.Tx, engine dialect.Engine) (Session, error) {
	s := Session{db: db, engine: engine}
	var err error
	switch engine {
	case dialect.EnginePostgreSQL:
		err = tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&s.id)
	case dialect.EngineMySQL, dialect.EngineMariaDB:
		var schema sql.NullString
		err = tx.QueryRowContext(ctx, "SELECT CONNECTION_ID(), DATABASE()").Scan(&s.id, &schema)
		if err == nil && !schema.Valid {
			err = errors.New("the session has no database")
		}
		s.schema = schema.String
	default:
		return Session{}, fmt.Errorf("lockwait: no lock waits to watch on %s", engine)
	}
	if err != nil {
		return Session{}, fmt.Errorf("lockwait: reading the session: %w", err)
	}
	return s, nil
}

// blocking reports whether some session waits for a lock s holds.
//
// On MySQL and MariaDB it reads the transactions of SHOW ENGINE INNODB
// STATUS (the PROCESS privilege) for a row or table lock that a
// transaction waits for in the database of s's session, which a test
// owns: InnoDB prints the lock a transaction waits for, not who holds it.
// information_schema's INNODB_LOCK_WAITS would name the holder, but InnoDB
// serves it from a cache of the whole server that it refreshes only once
// no session has read it for 100 ms: two tests polling it at once (two
// packages of one go test run) could keep each other on the state from
// before the wait for as long as they polled. It is read only when InnoDB
// cut its list of transactions short (a status over 1 MB).
func (s Session) blocking(ctx context.Context) (bool, error) {
	if s.engine == dialect.EnginePostgreSQL {
		var n int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", s.id).Scan(&n); err != nil {
			return false, fmt.Errorf("lockwait: reading lock waits: %w", err)
		}
		return n > 0, nil
	}
	var typ, name, status string
	if err := s.db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return false, fmt.Errorf("lockwait: reading InnoDB's status: %w", err)
	}
	if waitsIn(status, s.schema) {
		return true, nil
	}
	if !strings.Contains(status, "...truncated...") {
		return false, nil
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS w "+
		"JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id WHERE b.trx_mysql_thread_id = ?", s.id).Scan(&n); err != nil {
		return false, fmt.Errorf("lockwait: reading lock waits: %w", err)
	}
	return n > 0, nil
}

// waitsIn reports whether InnoDB's status text shows a transaction waiting
// for a lock on a table of database schema: a line "RECORD LOCKS ... of
// table `schema`.`t` ... waiting" (or "TABLE LOCK table `schema`.`t` ...
// waiting"), which InnoDB prints under "TRX HAS BEEN WAITING ... FOR THIS
// LOCK TO BE GRANTED".
func waitsIn(status, schema string) bool {
	table := "table `" + strings.ReplaceAll(schema, "`", "``") + "`."
	for line := range strings.Lines(status) {
		line = strings.TrimSpace(line)
		if (strings.HasPrefix(line, "RECORD LOCKS ") || strings.HasPrefix(line, "TABLE LOCK ")) &&
			strings.Contains(line, table) && strings.HasSuffix(line, " waiting") {
			return true
		}
	}
	return false
}

// ErrNoWait is returned by [Session.Await] when no session waited for s
// in time.
var ErrNoWait = errors.New("lockwait: no session waited for the transaction's locks")

// Await polls until some session waits for a lock s holds (on MySQL and
// MariaDB: for a lock in the database of s's session), for at most
// limit. Each round it first calls ended, whose error (the awaited
// statement ended instead of waiting) it returns.
//
// It polls every 5 ms on PostgreSQL and every 25 ms on MySQL and MariaDB,
// where each poll has InnoDB print its whole status.
func (s Session) Await(ctx context.Context, limit time.Duration, ended func() error) error {
	deadline := time.Now().Add(limit)
	pause := 5 * time.Millisecond
	if s.engine != dialect.EnginePostgreSQL {
		pause = 25 * time.Millisecond
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

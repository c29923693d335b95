// Package errclass sorts engine errors by what a caller can do about them.
// Engine packages register a classifier for their driver's errors; the
// store, the orchestration packages and the public predicates of the
// dialect package ask it. It is not for users.
package errclass

import (
	"errors"
	"sync"
)

// Class sorts an engine error by what the caller can do about it. Engine
// packages classify their driver's errors; [Of] accepts raw driver errors
// of every engine package linked into the program, as well as errors
// returned by claimlock.
type Class int

// The error classes.
const (
	// Other is every error the classes below do not name.
	Other Class = iota
	// Deadlock: MySQL 1213, PostgreSQL 40P01.
	Deadlock
	// LockTimeout: MySQL 1205, PostgreSQL 55P03.
	LockTimeout
	// Serialization: PostgreSQL 40001.
	Serialization
	// Busy: SQLITE_BUSY and SQLITE_LOCKED.
	Busy
	// ReadOnly: a write on a read-only server (dialect.ErrReadOnly).
	ReadOnly
	// Duplicate: a unique key violation.
	Duplicate
	// Connection: the connection broke after the statement (or its
	// COMMIT) was written; it may or may not have run, so a write of this
	// class has an unknown outcome.
	Connection
	// Unreachable: the statement never reached the server, so nothing ran:
	// a refused or timed-out connect, a name that does not resolve, a
	// connection pool that could not hand out a connection, a server that
	// refused the session at connect (PostgreSQL 53300 "too many
	// clients" and 57P03 "cannot connect now", MySQL 1040 and 1203), or a
	// pooled connection the driver found dead before writing
	// (driver.ErrBadConn). It is retried like a conflict and is never an
	// unknown outcome.
	Unreachable
	// Unavailable: the server refused the statement before running it,
	// because it cannot serve writes or consistent reads at the moment:
	// MySQL 1047 from a Galera node outside the primary component. Nothing
	// ran, so it is retried like a conflict (on another node, through
	// mysql.OpenCluster, which drops such connections).
	Unavailable
	// Permanent: the statement cannot succeed against this database
	// as it stands, and running it again fails the same way until someone
	// changes the schema, the grants or the configuration: a missing table
	// or column, a permission denied, a value its column cannot hold.
	// Claim loops stop on it (dialect.IsPermanent) instead of retrying
	// forever.
	Permanent
)

// Retryable reports whether the whole statement or transaction that failed
// with an error of this class can be run again: deadlocks, lock-wait
// timeouts, serialization failures, SQLite's busy errors, statements an
// unavailable server refused and statements that never reached the server.
func (c Class) Retryable() bool {
	switch c {
	case Deadlock, LockTimeout, Serialization, Busy, Unavailable, Unreachable:
		return true
	}
	return false
}

var (
	classifiersMu sync.RWMutex
	classifiers   []func(error) Class
)

// Register adds an engine's error classifier to the ones
// [Of] consults. Engine packages call it from init; a classifier
// must return [Other] for errors that are not its driver's.
func Register(f func(error) Class) {
	classifiersMu.Lock()
	defer classifiersMu.Unlock()
	classifiers = append(classifiers, f)
}

// Of returns the class of err: an error returned by claimlock,
// or a raw driver error from the caller's own statements, of any engine
// package linked into the program.
func Of(err error) Class {
	if err == nil {
		return Other
	}
	var c classified
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	classifiersMu.RLock()
	defer classifiersMu.RUnlock()
	for _, f := range classifiers {
		if c := f(err); c != Other {
			return c
		}
	}
	return Other
}

// classified is implemented by errors that carry their class.
type classified interface{ ErrorClass() Class }

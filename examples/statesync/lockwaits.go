package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// lockSample is how often PostgreSQL's waiting sessions are sampled.
const lockSample = 5 * time.Millisecond

// lockWaits is how long a run's statements waited for locks, on the
// server's own account.
type lockWaits struct {
	// Waits is how many lock waits began; WaitMs how long they took in
	// all, summed over sessions.
	Waits  int64
	WaitMs float64
	// By says how they were measured; empty where they were not (SQLite,
	// whose single writer shows its waits as busy retries instead).
	By string
}

// meterLocks starts measuring the lock waits of the run and returns the
// function that stops and reports them:
//
//   - MySQL/MariaDB: the growth of the server's Innodb_row_lock_waits and
//     Innodb_row_lock_time (all sessions of the server: run the program
//     alone on it for figures of its own);
//   - PostgreSQL: this database's sessions waiting on a lock
//     (pg_stat_activity.wait_event_type = 'Lock'), sampled every 5 ms on a
//     connection of its own: each sample adds 5 ms per waiting session,
//     and a session seen waiting in a statement it was not seen waiting
//     in before counts one wait (waits shorter than a sample may be
//     missed).
func (a *app) meterLocks(ctx context.Context) (stop func() (lockWaits, error), err error) {
	switch a.db.Driver {
	case "mysql":
		waits0, time0, err := innodbLockStatus(ctx, a.db.SQL)
		if err != nil {
			return nil, err
		}
		return func() (lockWaits, error) {
			waits1, time1, err := innodbLockStatus(context.WithoutCancel(ctx), a.db.SQL)
			if err != nil {
				return lockWaits{}, err
			}
			return lockWaits{Waits: waits1 - waits0, WaitMs: float64(time1 - time0), By: "Innodb_row_lock_waits and Innodb_row_lock_time, server-wide"}, nil
		}, nil
	case "postgres":
		conn, err := a.db.SQL.Conn(ctx)
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		var (
			wg   sync.WaitGroup
			lw   = lockWaits{By: "pg_stat_activity sampled every 5 ms"}
			serr error
		)
		wg.Go(func() {
			seen := map[string]bool{} // pid and statement start of waits counted
			t := time.NewTicker(lockSample)
			defer t.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-t.C:
				}
				rows, err := conn.QueryContext(sctx, `SELECT pid, query_start::text FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`)
				if err != nil {
					if sctx.Err() == nil {
						serr = err
					}
					return
				}
				for rows.Next() {
					var pid int64
					var started sql.NullString
					if err := rows.Scan(&pid, &started); err != nil {
						serr = err
						rows.Close()
						return
					}
					lw.WaitMs += float64(lockSample) / float64(time.Millisecond)
					if k := strconv.FormatInt(pid, 10) + " " + started.String; !seen[k] {
						seen[k] = true
						lw.Waits++
					}
				}
				if err := rows.Err(); err != nil && sctx.Err() == nil {
					serr = err
					rows.Close()
					return
				}
				rows.Close()
			}
		})
		return func() (lockWaits, error) {
			cancel()
			wg.Wait()
			conn.Close()
			return lw, serr
		}, nil
	default:
		return func() (lockWaits, error) { return lockWaits{}, nil }, nil
	}
}

// innodbLockStatus reads the server's row-lock wait count and total wait
// time (ms).
func innodbLockStatus(ctx context.Context, db *sql.DB) (waits, ms int64, err error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_row_lock_waits', 'Innodb_row_lock_time')")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	found := 0
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return 0, 0, err
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %q: %w", name, value, err)
		}
		switch name {
		case "Innodb_row_lock_waits":
			waits = n
		case "Innodb_row_lock_time":
			ms = n
		}
		found++
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("SHOW GLOBAL STATUS: Innodb_row_lock_waits or Innodb_row_lock_time missing")
	}
	return waits, ms, nil
}

package mysql_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// lockWaitTimeout is the sessions' innodb_lock_wait_timeout in the tests
// below, in seconds (set per session through the DSN, never globally): a
// sweep that waits for a lock fails after it with 1205 instead of after the
// server's 50 s.
const lockWaitTimeout = "1"

// TestReapBehindLiveBatch is the cron story's sweep as a user runs it on
// MariaDB: the target table as it is (status TINYINT, send_at DATETIME,
// attempts INT), a dead worker's stale rows, and a live batch whose rows
// another session holds locked mid-ack, by the ack's UPDATE in an open
// transaction (AckTx in the caller's transaction, not committed yet) or by
// SELECT ... FOR UPDATE. Every sweep, with and without the recommended
// indexes, scoped and unscoped, with and without MaxAttempts, on READ
// COMMITTED sessions and on the default REPEATABLE READ ones, returns (and
// parks) the dead worker's rows without waiting for the live batch's locks:
// with lock waits of one second and no retries, a wait is a 1205 error.
func TestReapBehindLiveBatch(t *testing.T) {
	t.Parallel()
	for _, rc := range []bool{true, false} {
		t.Run(map[bool]string{true: "read-committed", false: "default-isolation"}[rc], func(t *testing.T) {
			t.Parallel()
			db, d := openLockTimeout(t, rc)
			for i, v := range reapVariants() {
				for _, s := range d.Capabilities().Strategies() {
					table := fmt.Sprintf("xxx_task_target_%d_%d", i, s)
					t.Run(v.String()+"/"+s.String(), func(t *testing.T) {
						t.Parallel()
						reapBehindLiveBatch(t, db, d, table, s, v)
					})
				}
			}
		})
	}
}

// reapVariant is one setting of TestReapBehindLiveBatch.
type reapVariant struct {
	indexed     bool // the recommended indexes (ClaimStore.IndexDDL)
	history     bool // 2,000 rows sent long ago, and fresh statistics
	scoped      bool // the sweep is restricted to task 1
	maxAttempts int  // the sweep parks rows claimed this often
	ackTx       bool // the live batch is locked by AckTx, not SELECT ... FOR UPDATE
}

func (v reapVariant) String() string {
	return fmt.Sprintf("indexed=%v/history=%v/scoped=%v/max=%d/ack-tx=%v", v.indexed, v.history, v.scoped, v.maxAttempts, v.ackTx)
}

func reapVariants() []reapVariant {
	var out []reapVariant
	for _, indexed := range []bool{true, false} {
		for _, history := range []bool{true, false} {
			for _, scoped := range []bool{true, false} {
				for _, maxAttempts := range []int{0, 5} {
					for _, ackTx := range []bool{true, false} {
						out = append(out, reapVariant{indexed, history, scoped, maxAttempts, ackTx})
					}
				}
			}
		}
	}
	return out
}

// openLockTimeout opens a fresh database whose sessions wait at most
// lockWaitTimeout for a row lock, READ COMMITTED (mysql.Open) or in the
// server's default isolation, and a dialect on it that does not retry.
func openLockTimeout(t *testing.T, rc bool) (*sql.DB, *mysql.Dialect) {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dbtest.MySQLDSN(t))
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["innodb_lock_wait_timeout"] = lockWaitTimeout
	var db *sql.DB
	if rc {
		db, err = mysql.Open(ctxT(t), cfg.FormatDSN())
	} else {
		db, err = sql.Open("mysql", cfg.FormatDSN())
	}
	require.NoError(t, err)
	db.SetMaxIdleConns(64)
	t.Cleanup(func() { db.Close() })
	d := newDialect(t, db, dialect.Options{Retry: dialect.RetryPolicy{MaxAttempts: 1}})
	require.Equal(t, rc, d.ReadCommittedSession())
	return db, d
}

func reapBehindLiveBatch(t *testing.T, db *sql.DB, d *mysql.Dialect, table string, s dialect.Strategy, v reapVariant) {
	ctx := ctxT(t)
	_, err := db.ExecContext(ctx, "CREATE TABLE "+table+` (id BIGINT PRIMARY KEY, task_id BIGINT NOT NULL, openid VARCHAR(64) NOT NULL,
		status TINYINT NOT NULL DEFAULT 0, cron_token VARCHAR(40), send_at DATETIME, attempts INT NOT NULL DEFAULT 0) ENGINE=InnoDB`)
	require.NoError(t, err)
	spec := dialect.ClaimTable{Table: table, ID: "id", Status: "status", Token: "cron_token", ClaimedAt: "send_at",
		Attempts: "attempts", Columns: []string{"openid"}, Scope: []string{"task_id"},
		Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2), Failed: dialect.StatusInt(3)}
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	if v.indexed {
		require.NoError(t, store.ExecDDL(ctx, d, cs.IndexDDL()))
	}
	require.NoError(t, cs.VerifySchema(ctx))
	// Task 1: rows 1-30; task 2: rows 101-105. With history, rows
	// 1001-3000 of both tasks were sent long ago.
	var vals []string
	for id := 1; id <= 30; id++ {
		vals = append(vals, fmt.Sprintf("(%d, 1, 'o%d', 0, NULL)", id, id))
	}
	for id := 101; id <= 105; id++ {
		vals = append(vals, fmt.Sprintf("(%d, 2, 'o%d', 0, NULL)", id, id))
	}
	if v.history {
		for id := 1001; id <= 3000; id++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, 'o%d', 2, UTC_TIMESTAMP() - INTERVAL 1 DAY)", id, 1+id%2, id))
		}
	}
	_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id, task_id, openid, status, send_at) VALUES %s", table, strings.Join(vals, ", ")))
	require.NoError(t, err)
	if v.history {
		_, err = db.ExecContext(ctx, "ANALYZE TABLE "+table)
		require.NoError(t, err)
	}
	claim := func(task, limit int) (string, []any) {
		tok := store.NewToken()
		var ids []any
		_, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: limit, ScopeValues: []any{task}, Strategy: s},
			func(sc store.Scanner) error {
				var id, attempts int64
				var openid string
				if err := sc.Scan(&id, &attempts, &openid); err != nil {
					return err
				}
				ids = append(ids, id)
				return nil
			})
		require.NoError(t, err)
		require.Len(t, ids, limit)
		return tok, ids
	}
	// A dead worker claimed rows 1-10 and 101-105 an hour ago; rows 1-3
	// have been claimed five times.
	dead1, _ := claim(1, 10)
	dead2, _ := claim(2, 5)
	_, err = db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET send_at = UTC_TIMESTAMP() - INTERVAL 1 HOUR WHERE cron_token IN ('%s', '%s')", table, dead1, dead2))
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET attempts = 5 WHERE id <= 3", table))
	require.NoError(t, err)
	// A live worker claimed rows 11-20 just now and is acking them in its
	// own transaction, or has them locked.
	live, liveIDs := claim(1, 10)
	holder, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer holder.Rollback() //nolint:errcheck // committed below
	if v.ackTx {
		res, err := cs.AckTx(ctx, dialect.SQLTx(holder), &store.AckParams{Token: live, IDs: liveIDs, Outcome: store.OutcomeDone})
		require.NoError(t, err)
		require.Empty(t, res.Lost)
	} else {
		_, err = holder.ExecContext(ctx, fmt.Sprintf("SELECT id FROM %s WHERE id BETWEEN 11 AND 20 FOR UPDATE", table))
		require.NoError(t, err)
	}

	p := &store.ReapParams{Timeout: 10 * time.Minute, Limit: 100, MaxAttempts: v.maxAttempts}
	wantReturned, wantParked := int64(15), int64(0)
	if v.scoped {
		p.ScopeValues = []any{1}
		wantReturned = 10
	}
	if v.maxAttempts > 0 {
		wantReturned, wantParked = wantReturned-3, 3
	}
	res, err := cs.Reap(ctx, p)
	require.NoError(t, err, "the sweep must not wait for the live batch's locks")
	require.Equal(t, store.ReapResult{Returned: wantReturned, Parked: wantParked}, res, "every stale row of the dead worker")
	require.NoError(t, holder.Commit())

	var pending, processing, failed int
	require.NoError(t, db.QueryRowContext(ctx, fmt.Sprintf(
		"SELECT SUM(status = 0), SUM(status = 1), SUM(status = 3) FROM %s", table)).Scan(&pending, &processing, &failed))
	wantProcessing := 25 - int(wantReturned) - int(wantParked)
	if v.ackTx {
		wantProcessing -= 10
	}
	require.Equal(t, []int{10 + int(wantReturned), wantProcessing, int(wantParked)},
		[]int{pending, processing, failed}, "pending, processing and failed rows")
}

package mysql_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openWith opens a fresh test database with extra DSN settings.
func openWith(t *testing.T, mut func(*gomysql.Config)) (*sql.DB, *gomysql.Config) {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dbtest.MySQLDSN(t))
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if mut != nil {
		mut(cfg)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, cfg
}

func newDialect(t *testing.T, db *sql.DB, opts dialect.Options) *mysql.Dialect {
	t.Helper()
	d, err := mysql.New(ctxT(t), db, opts)
	require.NoError(t, err)
	return d
}

func st(t *testing.T, v any) dialect.Status {
	s, err := store.StatusOf("status", v)
	require.NoError(t, err)
	return s
}

func claimSpec(t *testing.T) dialect.ClaimTable {
	return dialect.ClaimTable{
		Table: "cl_target", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Columns: []string{"payload"}, Scope: []string{"task_id"},
		Pending: st(t, "PENDING"), Processing: st(t, "PROCESSING"), Done: st(t, "SENT"), Failed: st(t, "FAILED"),
	}
}

func createClaimTable(t *testing.T, d *mysql.Dialect, spec dialect.ClaimTable) store.ClaimStore {
	t.Helper()
	return dialecttest.CreateClaimTable(t, d, spec)
}

func insertRows(t *testing.T, db *sql.DB, table string, task, n int) {
	t.Helper()
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("(%d, 'p%d')", task, i)
	}
	_, err := db.ExecContext(ctxT(t), fmt.Sprintf("INSERT INTO `%s` (`task_id`, `payload`) VALUES %s", table, strings.Join(vals, ", ")))
	require.NoError(t, err)
}

func TestNewDetectsServerAndIsolation(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	db := dbtest.MySQL(t)
	var raw string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&raw))
	d := newDialect(t, db, dialect.Options{Logger: logger})
	caps := d.Capabilities()
	require.Equal(t, raw, caps.Version)
	require.Equal(t, d.Version().SkipLocked(), caps.SkipLocked)
	require.False(t, caps.Returning)
	require.Equal(t, dialect.StrategyTokenUpdate, caps.PreferredStrategy, "chosen by measurement on every version")
	require.Equal(t, 2, caps.ClaimConcurrency)
	if strings.Contains(raw, "MariaDB") {
		require.Equal(t, dialect.EngineMariaDB, caps.Engine)
	}
	name, iso := d.Isolation()
	require.Equal(t, d.Version().IsolationVariable(), name)
	require.Equal(t, "REPEATABLE-READ", iso, "the server default")
	require.False(t, d.ReadCommittedSession())
	require.Equal(t, 1, strings.Count(logs.String(), "not READ-COMMITTED"), "one warning: %s", logs.String())

	// Open makes every pooled connection READ COMMITTED.
	logs.Reset()
	rc, err := mysql.Open(ctx, dbtest.MySQLDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { rc.Close() })
	rc.SetMaxOpenConns(4)
	d2 := newDialect(t, rc, dialect.Options{Logger: logger})
	require.True(t, d2.ReadCommittedSession())
	_, iso = d2.Isolation()
	require.Equal(t, "READ-COMMITTED", iso)
	require.NotContains(t, logs.String(), "READ-COMMITTED;")
	conns := make([]*sql.Conn, 4)
	for i := range conns {
		conns[i], err = rc.Conn(ctx)
		require.NoError(t, err)
		require.NoError(t, conns[i].QueryRowContext(ctx, "SELECT @@SESSION."+name).Scan(&iso))
		require.Equal(t, "READ-COMMITTED", iso, "connection %d", i)
	}
	for _, c := range conns {
		c.Close()
	}
}

func TestBinlogFormatIsRead(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	var logs bytes.Buffer
	db, _ := openWith(t, func(c *gomysql.Config) {
		c.Params = map[string]string{"binlog_format": "'STATEMENT'"}
	})
	var logBin int
	if err := db.QueryRowContext(ctx, "SELECT @@log_bin").Scan(&logBin); err != nil {
		// Setting a session's binlog_format needs a privilege (SUPER,
		// BINLOG ADMIN or SESSION_VARIABLES_ADMIN) that a developer's test
		// user may lack: error 1227. That alone is a reason to skip, and
		// only where the servers are not required: under
		// CLAIMLOCK_REQUIRE_DB=1 (CI, whose test user has every privilege)
		// a skip would hide the check. Any other error is a failure.
		var me *gomysql.MySQLError
		if errors.As(err, &me) && me.Number == 1227 && !dbtest.Required() {
			t.Skipf("SKIPPING: the test user may not set a session binlog_format: %v", err)
		}
		require.NoError(t, err, "connecting with a session binlog_format of STATEMENT")
	}
	d := newDialect(t, db, dialect.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	b := d.Binlog()
	require.Equal(t, "STATEMENT", b.Format)
	require.Equal(t, logBin == 1, b.Enabled)
	require.Equal(t, b.Enabled, b.Unsafe())
	require.Equal(t, b.Enabled, strings.Contains(logs.String(), "binlog_format is STATEMENT"))

	d2 := newDialect(t, dbtest.MySQL(t), dialect.Options{})
	require.NotEqual(t, "STATEMENT", d2.Binlog().Format, "this server's default")
	require.False(t, d2.Binlog().Unsafe())
}

// TestRenewSameMicrosecond renews in a tight loop on a DSN without
// clientFoundRows: MySQL then counts changed rows, so a renewal that did not
// move the expiry would look like a lost lease.
func TestRenewSameMicrosecond(t *testing.T) {
	t.Parallel()
	db, cfg := openWith(t, nil)
	require.False(t, cfg.ClientFoundRows)
	d := newDialect(t, db, dialect.Options{})
	ctx := ctxT(t)
	ddl, err := store.CreateTableDDL(d, store.LeaseTableDef("cl_lease", 64))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	ls, err := store.OpenLeases(d, store.KeyedLeaseTable("cl_lease", 64))
	require.NoError(t, err)

	owner := store.NewToken()
	prev, err := ls.Acquire(ctx, "tight", owner, time.Hour)
	require.NoError(t, err)
	const n = 500
	var sameInstant int
	start := time.Now()
	for i := 0; i < n; i++ {
		// A one-microsecond TTL: now + ttl is almost always before the old
		// expiry, so only the "old expiry + 1 microsecond" term moves it.
		info, err := ls.Renew(ctx, "tight", owner, time.Microsecond)
		require.NoError(t, err, "renew %d", i)
		require.True(t, info.ExpiresAt.After(prev.ExpiresAt), "renew %d: %v after %v", i, info.ExpiresAt, prev.ExpiresAt)
		if info.ExpiresAt.Sub(prev.ExpiresAt) == time.Microsecond {
			sameInstant++
		}
		prev = info
	}
	require.Equal(t, n, sameInstant, "every renewal was forced forward by exactly one microsecond")
	t.Logf("%d renewals in %v", n, time.Since(start))
	s, err := ls.Inspect(ctx, "tight", time.Minute)
	require.NoError(t, err)
	require.Equal(t, owner, s.Owner)
	require.Equal(t, prev.ExpiresAt, s.ExpiresAt)
}

// TestCoarseDatetimeColumns uses a user's table whose time columns have no
// fractional seconds: a heartbeat or renewal then often rounds to the old
// value and changes nothing, yet must still report the rows and lease held.
func TestCoarseDatetimeColumns(t *testing.T) {
	t.Parallel()
	db := dbtest.MySQL(t)
	d := newDialect(t, db, dialect.Options{})
	ctx := ctxT(t)
	_, err := db.ExecContext(ctx, "CREATE TABLE xxx_task_target (id BIGINT AUTO_INCREMENT PRIMARY KEY, task_id BIGINT NOT NULL, "+
		"openid VARCHAR(64), status VARCHAR(16) NOT NULL DEFAULT 'PENDING', cron_token VARCHAR(40), send_at DATETIME, "+
		"INDEX (cron_token), INDEX (task_id, status, id))")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO xxx_task_target (task_id, openid) VALUES (1, 'a'), (1, 'b'), (1, 'c')")
	require.NoError(t, err)
	cs, err := store.OpenClaims(d, dialect.ClaimTable{Table: "xxx_task_target", ID: "id", Status: "status", Token: "cron_token",
		ClaimedAt: "send_at", Columns: []string{"openid"}, Scope: []string{"task_id"},
		Pending: st(t, "PENDING"), Processing: st(t, "PROCESSING"), Done: st(t, "SENT"), Failed: st(t, "FAILED")})
	require.NoError(t, err)
	tok := store.NewToken()
	var got []any
	n, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 10, ScopeValues: []any{1}, Strategy: dialect.StrategyTokenUpdate},
		func(s store.Scanner) error {
			var id int64
			var openid string
			if err := s.Scan(&id, &openid); err != nil {
				return err
			}
			got = append(got, id)
			return nil
		})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for i := 0; i < 200; i++ {
		held, err := cs.Heartbeat(ctx, tok)
		require.NoError(t, err)
		require.Len(t, held, 3, "heartbeat %d", i)
	}
	res, err := cs.Ack(ctx, &store.AckParams{Token: tok, IDs: got, Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Empty(t, res.Lost)

	_, err = db.ExecContext(ctx, "CREATE TABLE xxx_task (id BIGINT AUTO_INCREMENT PRIMARY KEY, status INT, lock_at DATETIME, "+
		"lock_owner VARCHAR(40), lock_expires DATETIME)")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO xxx_task (status) VALUES (1)")
	require.NoError(t, err)
	for _, spec := range []dialect.LeaseTable{
		{Table: "xxx_task", Key: "id", Owner: "lock_owner", LockedAt: "lock_at"},
		{Table: "xxx_task", Key: "id", Owner: "lock_owner", LockedAt: "lock_at", ExpiresAt: "lock_expires"},
	} {
		ls, err := store.OpenLeases(d, spec)
		require.NoError(t, err)
		owner := store.NewToken()
		_, err = ls.Acquire(ctx, 1, owner, time.Minute)
		require.NoError(t, err)
		for i := 0; i < 200; i++ {
			_, err := ls.Renew(ctx, 1, owner, time.Minute)
			require.NoError(t, err, "renew %d (expires_at %q)", i, spec.ExpiresAt)
		}
		_, err = ls.Renew(ctx, 1, store.NewToken(), time.Minute)
		require.ErrorIs(t, err, dialect.ErrLeaseLost)
		ok, err := ls.Release(ctx, 1, owner, time.Time{})
		require.NoError(t, err)
		require.True(t, ok)
	}
}

// TestKeyedAcquireClientFoundRows: with clientFoundRows=true an untouched
// duplicate would count as one affected row; the keyed insert must still
// tell "inserted" from "someone else has the key".
func TestKeyedAcquireClientFoundRows(t *testing.T) {
	t.Parallel()
	db, _ := openWith(t, func(c *gomysql.Config) { c.ClientFoundRows = true })
	d := newDialect(t, db, dialect.Options{})
	ctx := ctxT(t)
	ddl, err := store.CreateTableDDL(d, store.LeaseTableDef("cl_lease", 64))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	ls, err := store.OpenLeases(d, store.KeyedLeaseTable("cl_lease", 64))
	require.NoError(t, err)
	owner := store.NewToken()
	_, err = ls.Acquire(ctx, "k", owner, time.Minute)
	require.NoError(t, err)
	_, err = ls.Acquire(ctx, "k", owner, time.Minute)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld)
	for i := 0; i < 20; i++ {
		renewed, err := ls.Renew(ctx, "k", owner, time.Minute)
		require.NoError(t, err)
		require.EqualValues(t, 1, renewed.Fence)
	}

	// Racing first acquisitions of fresh keys: exactly one winner each.
	for k := 0; k < 10; k++ {
		key := fmt.Sprintf("fresh-%d", k)
		var wins atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				info, err := ls.Acquire(ctx, key, store.NewToken(), time.Minute)
				switch {
				case err == nil:
					wins.Add(1)
					if info.Fence != 1 {
						errs <- fmt.Errorf("first fence %d", info.Fence)
					}
				case !errors.Is(err, dialect.ErrLeaseHeld):
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.EqualValues(t, 1, wins.Load(), "key %s", key)
	}
}

// TestMixedStrategiesWithReaper races token-update and SKIP LOCKED claimers
// (four each) with an aggressive reaper, so that many claims are reaped and
// re-claimed while their holder is still working. Every row must end done,
// acked successfully exactly once: a row held by two tokens at once would be
// acked twice.
func TestMixedStrategiesWithReaper(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"default-isolation", "read-committed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			var db *sql.DB
			if mode == "read-committed" {
				var err error
				db, err = mysql.Open(ctx, dbtest.MySQLDSN(t))
				require.NoError(t, err)
				t.Cleanup(func() { db.Close() })
			} else {
				db = dbtest.MySQL(t)
			}
			d := newDialect(t, db, dialect.Options{})
			require.Equal(t, mode == "read-committed", d.ReadCommittedSession())
			strategies := []dialect.Strategy{dialect.StrategyTokenUpdate}
			if d.Capabilities().SkipLocked {
				strategies = append(strategies, dialect.StrategySkipLocked)
			}
			spec := claimSpec(t)
			cs := createClaimTable(t, d, spec)
			const rows = 600
			insertRows(t, db, spec.Table, 1, rows)

			var mu sync.Mutex
			acked := map[int64]int{}
			var lost, claims int
			var errs []error
			fail := func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
			done := make(chan struct{})
			var reaped atomic.Int64
			var reaperWG sync.WaitGroup
			reaperWG.Add(1)
			go func() {
				defer reaperWG.Done()
				for {
					select {
					case <-done:
						return
					case <-time.After(5 * time.Millisecond):
					}
					res, err := cs.Reap(ctx, &store.ReapParams{Timeout: 15 * time.Millisecond, Limit: 50})
					if err != nil {
						fail(err)
						return
					}
					reaped.Add(res.Returned)
				}
			}()
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				s := strategies[w%len(strategies)]
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						tok := store.NewToken()
						var ids []any
						_, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 10, ScopeValues: []any{1}, Strategy: s},
							func(sc store.Scanner) error {
								var id int64
								var p string
								if err := sc.Scan(&id, new(any), &p); err != nil {
									return err
								}
								ids = append(ids, id)
								return nil
							})
						if err != nil {
							fail(err)
							return
						}
						if len(ids) == 0 {
							stats, err := cs.Stats(ctx, []any{1})
							if err != nil {
								fail(err)
								return
							}
							if stats.Pending == 0 && stats.Processing == 0 {
								return
							}
							time.Sleep(2 * time.Millisecond)
							continue
						}
						time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond) // the work
						res, err := cs.Ack(ctx, &store.AckParams{Token: tok, IDs: ids, Outcome: store.OutcomeDone})
						if err != nil {
							fail(err)
							return
						}
						isLost := map[int]bool{}
						for _, i := range res.Lost {
							isLost[i] = true
						}
						mu.Lock()
						claims++
						lost += len(res.Lost)
						for i, id := range ids {
							if !isLost[i] {
								acked[id.(int64)]++
							}
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			close(done)
			reaperWG.Wait()
			require.Empty(t, errs)
			require.Len(t, acked, rows)
			for id, n := range acked {
				require.Equal(t, 1, n, "row %d acked %d times", id, n)
			}
			require.Positive(t, lost, "the reaper must have taken rows from slow workers")
			require.Positive(t, reaped.Load())
			stats, err := cs.Stats(ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, rows, stats.Done)
			t.Logf("%s: %d claims, %d rows reaped, %d acks lost, %d retries", mode, claims, reaped.Load(), lost, store.Retries(d))
		})
	}
}

// TestLockWaitTimeoutIsRetried holds a row lock longer than the session's
// innodb_lock_wait_timeout: the release hits error 1205, is retried, and
// succeeds once the lock is gone.
func TestLockWaitTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	db, _ := openWith(t, func(c *gomysql.Config) {
		c.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	})
	var retried atomic.Int32
	d := newDialect(t, db, dialect.Options{Retry: dialect.RetryPolicy{OnRetry: func(op string, attempt int, err error) {
		if op == "release" && dialect.IsRetryable(err) {
			retried.Add(1)
		}
	}}})
	spec := claimSpec(t)
	cs := createClaimTable(t, d, spec)
	insertRows(t, db, spec.Table, 1, 1)
	ctx := ctxT(t)
	tok := store.NewToken()
	n, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 1, ScopeValues: []any{1}, Strategy: dialect.StrategyTokenUpdate},
		func(s store.Scanner) error { var id, v any; return s.Scan(&id, &v, new(any)) })
	require.NoError(t, err)
	require.Equal(t, 1, n)

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	var id int64
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT id FROM cl_target FOR UPDATE").Scan(&id))
	go func() {
		time.Sleep(1500 * time.Millisecond)
		_ = tx.Rollback()
	}()
	released, err := cs.Release(ctx, tok, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, released)
	require.Positive(t, retried.Load())
	require.Positive(t, store.Retries(d))
}

func TestMissingIndexesSchemaQualified(t *testing.T) {
	t.Parallel()
	db, cfg := openWith(t, nil)
	d := newDialect(t, db, dialect.Options{})
	ctx := ctxT(t)
	spec := claimSpec(t)
	spec.Table = cfg.DBName + ".cl_q"
	ddl, err := store.CreateTableDDL(d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	missing, err := cs.MissingIndexes(ctx)
	require.NoError(t, err)
	require.Equal(t, cs.IndexDDL(), missing)
	require.NoError(t, store.ExecDDL(ctx, d, cs.IndexDDL()))
	require.NoError(t, store.ExecDDL(ctx, d, cs.IndexDDL()), "existing indexes are skipped")
	missing, err = cs.MissingIndexes(ctx)
	require.NoError(t, err)
	require.Empty(t, missing)
	// Another schema's table of the same name has none of them.
	spec.Table = "information_schema.cl_q"
	other, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	missing, err = other.MissingIndexes(ctx)
	require.NoError(t, err)
	require.Len(t, missing, 3)
}

// A status column that cannot hold or tell apart the status values is
// refused at verification. The defects it prevents are shown first, on the
// raw table: with a non-strict sql_mode a status too long for its column
// is stored cut short, and on a case-insensitive collation two statuses
// that differ only in case are one value.
func TestStatusColumnChecks(t *testing.T) {
	t.Parallel()
	db, _ := openWith(t, func(c *gomysql.Config) { c.Params["sql_mode"] = "''" })
	d := newDialect(t, db, dialect.Options{})
	ctx := ctxT(t)
	_, err := db.ExecContext(ctx, "CREATE TABLE short_status (id BIGINT AUTO_INCREMENT PRIMARY KEY, status VARCHAR(8) NOT NULL DEFAULT 'PENDING', token VARCHAR(40), claimed_at DATETIME(6))")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO short_status (status) VALUES ('PROCESSING')")
	require.NoError(t, err, "a non-strict session truncates without an error")
	var stored string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT status FROM short_status").Scan(&stored))
	require.Equal(t, "PROCESSI", stored)
	spec := dialect.ClaimTable{Table: "short_status", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Pending: st(t, "PENDING"), Processing: st(t, "PROCESSING"), Done: st(t, "DONE"), Failed: st(t, "FAILED")}
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	err = cs.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, `Processing: status "PROCESSING" does not fit column short_status.status, which holds 8 characters`)

	_, err = db.ExecContext(ctx, "CREATE TABLE ci_status (id BIGINT AUTO_INCREMENT PRIMARY KEY, status VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, token VARCHAR(40), claimed_at DATETIME(6))")
	require.NoError(t, err)
	var same int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT 'done' AS s) x WHERE s = _utf8mb4'DONE' COLLATE utf8mb4_general_ci").Scan(&same))
	require.Equal(t, 1, same, "one value under the column's collation")
	spec = dialect.ClaimTable{Table: "ci_status", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Pending: st(t, "pending"), Processing: st(t, "processing"), Done: st(t, "done"), Failed: st(t, "DONE")}
	cs, err = store.OpenClaims(d, spec)
	require.NoError(t, err)
	err = cs.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, `Failed: status "DONE" equals Done "done" under the collation utf8mb4_general_ci`)
	spec.Failed = st(t, "failed")
	cs, err = store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, cs.VerifySchema(ctx), "distinct values are fine on a case-insensitive column")
}

// Sessions with autocommit off are refused: every claim is one autocommit
// statement, and without autocommit it would stay invisible to other
// sessions, holding its locks, until some later COMMIT.
func TestAutocommitOffIsRefused(t *testing.T) {
	t.Parallel()
	db, _ := openWith(t, func(c *gomysql.Config) { c.Params["autocommit"] = "0" })
	_, err := mysql.New(ctxT(t), db, dialect.Options{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "autocommit=0")
}

// A sweep returns every stale row it can while another session holds a lock
// on a fresh processing row: it must neither wait for that lock (50 s by
// default, then 1205 and a retry, sweep after sweep) nor give up on the
// stale rows of a dead worker. The table has only its primary key, as the
// cron story's target table has no (status, claimed_at) index, so the
// sweep's scan reaches the locked row.
func TestReapSkipsLockedRows(t *testing.T) {
	t.Parallel()
	db, _ := openWith(t, nil)
	d := newDialect(t, db, dialect.Options{})
	ctx := ctxT(t)
	spec := claimSpec(t)
	ddl, err := store.CreateTableDDL(d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, cs.VerifySchema(ctx))
	insertRows(t, db, "cl_target", 1, 11)
	// Rows 1-10: a dead worker's claim, an hour old. Row 11: fresh, its
	// holder's session has it locked (an ack or heartbeat in flight).
	_, err = db.ExecContext(ctx, "UPDATE cl_target SET status = 'PROCESSING', token = 'dead', claimed_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id <= 10")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "UPDATE cl_target SET status = 'PROCESSING', token = 'live', claimed_at = UTC_TIMESTAMP(6) WHERE id = 11")
	require.NoError(t, err)
	holder, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer holder.Rollback() //nolint:errcheck // rolled back at the end
	_, err = holder.ExecContext(ctx, "SELECT id FROM cl_target WHERE id = 11 FOR UPDATE")
	require.NoError(t, err)

	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	res, err := cs.Reap(rctx, &store.ReapParams{Timeout: time.Minute, Limit: 100})
	took := time.Since(start)
	require.NoError(t, err)
	require.EqualValues(t, 10, res.Returned, "every stale row")
	require.Less(t, took, 3*time.Second, "the sweep did not wait for the locked fresh row")
	require.NoError(t, holder.Rollback())
}

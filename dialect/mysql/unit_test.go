package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store"
)

// offline returns a dialect with no connection, for statement-building
// tests; any query on it panics.
func offline(version string) *Dialect {
	return build(nil, ParseVersion(version, ""), version, dialect.Options{}, slog.New(slog.DiscardHandler), true)
}

func TestQuoteIdent(t *testing.T) {
	t.Parallel()
	d := offline("8.0.36")
	q, err := store.QuoteIdent(d, "Table", "myschema.task_target")
	require.NoError(t, err)
	require.Equal(t, "`myschema`.`task_target`", q)
	for _, bad := range []string{"", "a`b", "a;b", "a b", "x.y.z", "1a", "a'b", `a"b`, "a\\b"} {
		_, err := store.QuoteIdent(d, "Table", bad)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%q", bad)
		require.Contains(t, err.Error(), "Table")
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	_, err := New(context.Background(), nil, dialect.Options{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = Open(context.Background(), "not a dsn")
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint16]errclass.Class{
		1213: errclass.Deadlock, 1205: errclass.LockTimeout, 1062: errclass.Duplicate,
		1061: errclass.Duplicate, 1290: errclass.ReadOnly, 1792: errclass.ReadOnly, 1146: errclass.Permanent, 1054: errclass.Permanent, 1264: errclass.Permanent, 1040: errclass.Unreachable,
		1203: errclass.Unreachable, 1927: errclass.Connection, 3169: errclass.Connection, 1053: errclass.Connection,
	} {
		raw := fmt.Errorf("wrapped: %w", &gomysql.MySQLError{Number: n})
		require.Equal(t, want, classify(raw), "%d", n)
		// The one public predicate accepts the raw driver error.
		require.Equal(t, want.Retryable(), dialect.IsRetryable(raw), "%d", n)
	}
	require.Equal(t, errclass.Connection, classify(gomysql.ErrInvalidConn))
	require.Equal(t, errclass.Unreachable, classify(driver.ErrBadConn), "database/sql's contract: nothing was done")
	require.True(t, dialect.IsRetryable(driver.ErrBadConn))
	require.False(t, dialect.IsRetryable(gomysql.ErrInvalidConn))
	require.False(t, dialect.IsRetryable(nil))
}

// TestBrokenConnectionRetry proves a broken connection re-runs only
// idempotent operations, once, while a connection the driver found dead
// before writing (nothing sent) re-runs writes too, under the retry policy.
func TestBrokenConnectionRetry(t *testing.T) {
	t.Parallel()
	dl := offline("8.0.36")
	d := dl.b
	ctx := context.Background()
	calls := 0
	err := d.Do(ctx, "write", false, func() error {
		calls++
		if calls < 3 {
			return driver.ErrBadConn
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls, "nothing was sent: the write runs again")
	for _, connErr := range []error{gomysql.ErrInvalidConn} {
		calls := 0
		err := d.Do(ctx, "write", false, func() error { calls++; return connErr })
		require.ErrorIs(t, err, connErr)
		require.Equal(t, 1, calls, "a write that may have been applied is never re-run")

		calls = 0
		err = d.Do(ctx, "read", true, func() error {
			calls++
			if calls == 1 {
				return connErr
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 2, calls)

		calls = 0
		err = d.Do(ctx, "read", true, func() error { calls++; return connErr })
		require.ErrorIs(t, err, connErr)
		require.Equal(t, 2, calls, "only once")
	}
	calls = 0
	err = d.Do(ctx, "claim", false, func() error {
		calls++
		if calls < 3 {
			return &gomysql.MySQLError{Number: 1213}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls)
	require.EqualValues(t, 4, store.Retries(dl))
}

func TestBinlogUnsafe(t *testing.T) {
	t.Parallel()
	require.True(t, Binlog{Enabled: true, Format: "STATEMENT"}.Unsafe())
	require.True(t, Binlog{Enabled: true, Format: "statement"}.Unsafe())
	require.False(t, Binlog{Enabled: false, Format: "STATEMENT"}.Unsafe())
	require.False(t, Binlog{Enabled: true, Format: "ROW"}.Unsafe())
	require.False(t, Binlog{Enabled: true, Format: "MIXED"}.Unsafe())
	require.False(t, Binlog{}.Unsafe())
}

func TestConfigureDSN(t *testing.T) {
	t.Parallel()
	cfg, err := gomysql.ParseDSN("u@tcp(h:3306)/db?tx_isolation=%27REPEATABLE-READ%27&sql_mode=%27ANSI_QUOTES%27")
	require.NoError(t, err)
	ConfigureDSN(cfg, ParseVersion("8.0.36", ""))
	require.Equal(t, "'READ-COMMITTED'", cfg.Params["transaction_isolation"])
	_, stale := cfg.Params["tx_isolation"]
	require.False(t, stale, "the other name is removed")
	require.Equal(t, "'ANSI_QUOTES'", cfg.Params["sql_mode"], "other params are kept")

	cfg = gomysql.NewConfig()
	ConfigureDSN(cfg, ParseVersion("10.11.6-MariaDB", ""))
	require.Equal(t, map[string]string{"tx_isolation": "'READ-COMMITTED'"}, cfg.Params)
	require.Contains(t, cfg.FormatDSN(), "tx_isolation=%27READ-COMMITTED%27")
}

func TestCreateTableDDL(t *testing.T) {
	t.Parallel()
	d := offline("8.0.36")
	pending, err := store.StatusOf("Pending", "PENDING")
	require.NoError(t, err)
	spec := dialect.ClaimTable{Table: "app.cl_t", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Scope: []string{"task_id"}, Columns: []string{"openid"}, Pending: pending}
	ddl, err := store.CreateTableDDL(d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.Len(t, ddl, 1)
	s := ddl[0]
	for _, want := range []string{
		"CREATE TABLE IF NOT EXISTS `app`.`cl_t` (",
		"`id` BIGINT NOT NULL AUTO_INCREMENT",
		"`task_id` BIGINT NOT NULL",
		"`status` VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT 'PENDING'",
		"`token` VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
		"`claimed_at` DATETIME(6)",
		"`attempts` BIGINT NOT NULL DEFAULT 0",
		"`openid` VARCHAR(255)",
		"PRIMARY KEY (`id`)",
		") ENGINE=InnoDB",
	} {
		require.Contains(t, s, want)
	}
	ddl, err = store.CreateTableDDL(d, store.LeaseTableDef("cl_lease", 0))
	require.NoError(t, err)
	require.Contains(t, ddl[0], "PRIMARY KEY (`lease_key`), INDEX `cl_lease_cl_exp` (`expires_at`)")

	_, err = store.CreateTableDDL(d, store.TableDef{Table: "t", Columns: []store.ColumnDef{{Name: "a`b"}}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

func TestClaimStoreStatements(t *testing.T) {
	t.Parallel()
	d := offline("8.0.11-TiDB-v7.5.1")
	st := func(v any) dialect.Status { s, err := store.StatusOf("s", v); require.NoError(t, err); return s }
	cs, err := store.OpenClaims(d, dialect.ClaimTable{Table: "t", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Scope: []string{"task_id"}, Pending: st("PENDING"), Processing: st("PROCESSING"), Done: st("SENT"), Failed: st("FAILED")})
	require.NoError(t, err)
	c := cs.(*store.Claims).Steps()
	require.Equal(t, "UPDATE `t` FORCE INDEX (`t_cl_claim`) SET `status` = 'PROCESSING', `token` = ?, `claimed_at` = UTC_TIMESTAMP(6), `attempts` = COALESCE(`attempts`, 0) + 1 WHERE `status` = 'PENDING' AND `task_id` = ? ORDER BY `task_id`, `status`, `id` LIMIT ?", c.Mark(true, false).SQL)
	require.Equal(t, "UPDATE `t` SET `status` = 'PROCESSING', `token` = ?, `claimed_at` = UTC_TIMESTAMP(6), `attempts` = COALESCE(`attempts`, 0) + 1 WHERE `status` = 'PENDING' AND `task_id` = ? ORDER BY `task_id`, `status`, `id` LIMIT ?", c.Mark(false, false).SQL)
	require.Equal(t, "SELECT `id` FROM `t` FORCE INDEX (`t_cl_claim`) WHERE `status` = 'PENDING' AND `task_id` = ? ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED", c.SkipLockedPick(true, false).SQL)
	require.Equal(t, "SELECT `id` FROM `t` WHERE `status` = 'PENDING' AND `task_id` = ? AND `id` > ? ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED", c.SkipLockedPick(false, true).SQL)
	require.Equal(t, []string{
		"CREATE INDEX `t_cl_claim` ON `t` (`task_id`, `status`, `id`)",
		"CREATE INDEX `t_cl_token` ON `t` (`token`)",
		"CREATE INDEX `t_cl_reap` ON `t` (`status`, `claimed_at`)",
	}, cs.IndexDDL())

	// SKIP LOCKED on a server without it, bad params: refused before any
	// statement runs (d has no database).
	ctx := context.Background()
	scan := func(store.Scanner) error { return nil }
	_, err = cs.Claim(ctx, &store.ClaimParams{Token: "x", Limit: 1, ScopeValues: []any{1}, Strategy: dialect.StrategySkipLocked}, scan)
	require.ErrorIs(t, err, dialect.ErrNotSupported)
	_, err = cs.Claim(ctx, &store.ClaimParams{Token: "x", Limit: 1, ScopeValues: nil, Strategy: dialect.StrategyTokenUpdate}, scan)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = cs.Claim(ctx, &store.ClaimParams{Token: "x", Limit: 0, ScopeValues: []any{1}, Strategy: dialect.StrategyTokenUpdate}, scan)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = cs.Claim(ctx, &store.ClaimParams{Token: "x", Limit: 1, ScopeValues: []any{1}, Strategy: dialect.StrategyAuto}, scan)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = cs.Ack(ctx, &store.AckParams{Token: "x", IDs: []any{1}, Versions: []int64{1}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "no Version column")
	_, err = cs.Reap(ctx, &store.ReapParams{Timeout: 1, Limit: 1, MaxAttempts: -1})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "a negative bound")
	_, err = cs.Stats(ctx, []any{1, 2})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	res, err := cs.Ack(ctx, &store.AckParams{Token: "x"})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	n, err := cs.Release(ctx, "x", []any{})
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestLeaseStoreStatements(t *testing.T) {
	t.Parallel()
	d := offline("8.0.36")
	ls, err := store.OpenLeases(d, store.KeyedLeaseTable("cl_lease", 64))
	require.NoError(t, err)
	l := ls.(*store.Leases).Statements()
	require.Equal(t, "UPDATE `cl_lease` SET `owner` = ?, `lock_at` = UTC_TIMESTAMP(6), `expires_at` = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, `fence` = COALESCE(`fence`, 0) + 1 WHERE `lease_key` = ? AND (`owner` IS NULL OR `expires_at` IS NULL OR `expires_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)", l["acquire"])
	require.True(t, strings.HasPrefix(l["insert"], "INSERT INTO `cl_lease` (`lease_key`, `owner`, `lock_at`, `expires_at`, `fence`) VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, 1)"))
	require.NotContains(t, l["insert"], "DUPLICATE", "ON DUPLICATE KEY UPDATE is ambiguous under clientFoundRows")
	require.Contains(t, l["renew"], "GREATEST(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, COALESCE(`expires_at` + INTERVAL 1 MICROSECOND")

	ctx := context.Background()
	_, err = ls.Acquire(ctx, "k", "", 1)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "empty owner")
	_, err = ls.Acquire(ctx, "k", strings.Repeat("o", 41), 1)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "owner longer than the column")
	_, err = ls.ReapExpired(ctx, 0)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)

	task, err := store.OpenLeases(d, dialect.LeaseTable{Table: "task", Key: "id", Owner: "owner", LockedAt: "lock_at"})
	require.NoError(t, err)
	_, err = task.ReapExpired(ctx, 1)
	require.ErrorIs(t, err, dialect.ErrNotSupported)
	_, err = task.Inspect(ctx, "1", time.Minute)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = store.OpenLeases(d, dialect.LeaseTable{Table: "task", Key: "id", Owner: "o`", LockedAt: "lock_at"})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.True(t, errors.Is(err, dialect.ErrInvalidConfig))
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// offline returns a dialect with no connection, for statement-building
// tests; any query on it panics.
func offline(versionNum int) *Dialect {
	return build(nil, versionNum, "offline", dialect.Options{}, slog.New(slog.DiscardHandler))
}

func status(t *testing.T, v any) dialect.Status {
	t.Helper()
	s, err := store.StatusOf("status", v)
	require.NoError(t, err)
	return s
}

func jobSpec(t *testing.T) dialect.ClaimTable {
	return dialect.ClaimTable{
		Table: "jobs", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Version: "version", CreatedAt: "created_at",
		Columns: []string{"payload"}, Scope: []string{"task_id"},
		Pending: status(t, "PENDING"), Processing: status(t, "PROCESSING"), Done: status(t, "SENT"), Failed: status(t, "FAILED"),
	}
}

func TestNewRejectsNilHandles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := New(ctx, nil, dialect.Options{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = NewStdlib(ctx, nil, dialect.Options{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

func TestNewStdlibRejectsOtherDrivers(t *testing.T) {
	t.Parallel()
	_, err := NewStdlib(context.Background(), dbtest.SQLite(t), dialect.Options{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "pgx")
}

func TestNewRejectsBadRetryPolicy(t *testing.T) {
	t.Parallel()
	db := dbtest.Postgres(t)
	_, err := NewStdlib(context.Background(), db, dialect.Options{Retry: dialect.RetryPolicy{MaxAttempts: -1}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	d, err := New(context.Background(), dbtest.PostgresPool(t), dialect.Options{})
	require.NoError(t, err)
	c := d.Capabilities()
	require.Equal(t, dialect.EnginePostgreSQL, c.Engine)
	require.NotEmpty(t, c.Version)
	require.True(t, c.SkipLocked)
	require.True(t, c.Returning)
	require.Equal(t, dialect.StrategySkipLocked, c.PreferredStrategy)
	require.GreaterOrEqual(t, d.versionNum, MinVersionNum)
}

func TestQuoteIdent(t *testing.T) {
	t.Parallel()
	d := offline(150000)
	q, err := store.QuoteIdent(d, "Table", "app.Jobs_1")
	require.NoError(t, err)
	require.Equal(t, `"app"."Jobs_1"`, q)
	for _, bad := range []string{"", `a"b`, "a;b", "a b", "a.b.c", "1a", "a--", "tа" /* Cyrillic a */, "a`b"} {
		_, err := store.QuoteIdent(d, "Table", bad)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%q", bad)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]errclass.Class{
		"40001": errclass.Serialization, "40P01": errclass.Deadlock, "55P03": errclass.LockTimeout,
		"23505": errclass.Duplicate, "25006": errclass.ReadOnly, "42P01": errclass.Permanent,
		"42703": errclass.Permanent, "22003": errclass.Permanent, "53300": errclass.Unreachable,
		"57P03": errclass.Unreachable, "57P01": errclass.Connection, "57P02": errclass.Connection,
	} {
		wrapped := fmt.Errorf("op: %w", &pgconn.PgError{Code: code})
		require.Equal(t, want, classify(wrapped), code)
		// The one public predicate accepts the raw driver error.
		require.Equal(t, want.Retryable(), dialect.IsRetryable(wrapped), code)
		require.Equal(t, want, errclass.Of(wrapped), code)
	}
	require.False(t, dialect.IsRetryable(errors.New("plain")))
}

func TestClaimStatements(t *testing.T) {
	t.Parallel()
	st, err := store.OpenClaims(offline(150000), jobSpec(t))
	require.NoError(t, err)
	s := st.(*store.Claims).Statements()
	require.Equal(t,
		`WITH cl_c AS MATERIALIZED ( SELECT "id" FROM (SELECT "id" FROM "jobs" WHERE "status" = 'PENDING' AND "task_id" = $1 AND "id" + 0 > $2::bigint `+
			`ORDER BY "id" + 0 LIMIT $3 FOR UPDATE SKIP LOCKED) cl_above UNION ALL `+
			`SELECT "id" FROM (SELECT "id" FROM "jobs" WHERE "status" = 'PENDING' AND "task_id" = $4 AND "id" + 0 <= $5::bigint `+
			`ORDER BY "id" + 0 LIMIT $6 FOR UPDATE SKIP LOCKED) cl_wrap LIMIT $7) `+
			`UPDATE "jobs" SET "status" = 'PROCESSING', "token" = $8, "claimed_at" = now(), "attempts" = COALESCE("attempts", 0) + 1 `+
			`WHERE "id" = ANY(ARRAY(SELECT "id" FROM cl_c)) AND "status" = 'PENDING' RETURNING "id", "version", COALESCE("attempts", 0), "payload"`,
		s["claim skip locked"])
	require.Equal(t, s["claim skip locked"], s["claim"], "token-update claims never wait for locks either")
	for _, q := range []string{s["claim skip locked"], s["claim"]} {
		require.NotContains(t, q, "IN (SELECT", "never the re-runnable IN-subquery form")
	}
	require.Equal(t, []string{
		`CREATE INDEX IF NOT EXISTS "jobs_cl_claim" ON "jobs" ("task_id", ("id" + 0)) WHERE "status" = 'PENDING'`,
		`CREATE INDEX IF NOT EXISTS "jobs_cl_token" ON "jobs" ("token")`,
		`CREATE INDEX IF NOT EXISTS "jobs_cl_reap" ON "jobs" ("status", "claimed_at")`,
		`CREATE INDEX IF NOT EXISTS "jobs_cl_scope" ON "jobs" ("task_id", "status", "claimed_at")`,
	}, st.IndexDDL())
	// A sweep without MaxAttempts binds no attempts bound; with one, the
	// bounds are bigint whatever the Attempts column's type.
	require.Equal(t, `WITH cl_c AS MATERIALIZED ( SELECT "id" FROM "jobs" WHERE "status" = 'PROCESSING' AND "claimed_at" < now() - ($1::bigint * interval '1 microsecond') `+
		`ORDER BY "claimed_at" LIMIT $2 FOR UPDATE SKIP LOCKED) `+
		`UPDATE "jobs" SET "status" = 'PENDING', "token" = NULL WHERE "id" = ANY(ARRAY(SELECT "id" FROM cl_c)) AND "status" = 'PROCESSING'`, s["reap"])
	require.Equal(t, `WITH cl_c AS MATERIALIZED ( SELECT "id" FROM "jobs" WHERE "status" = 'PROCESSING' AND "claimed_at" < now() - ($1::bigint * interval '1 microsecond') `+
		`AND COALESCE("attempts", 0) < $2::bigint ORDER BY "claimed_at" LIMIT $3 FOR UPDATE SKIP LOCKED) `+
		`UPDATE "jobs" SET "status" = 'PENDING', "token" = NULL WHERE "id" = ANY(ARRAY(SELECT "id" FROM cl_c)) AND "status" = 'PROCESSING'`, s["reap below"])
	require.Contains(t, s["reap park"], `AND COALESCE("attempts", 0) >= $2::bigint ORDER BY`)
	require.Equal(t, `WITH cl_c AS MATERIALIZED ( SELECT "id" FROM "jobs" WHERE "token" = $1 AND "status" = 'PROCESSING' ORDER BY "id" FOR NO KEY UPDATE) `+
		`UPDATE "jobs" SET "claimed_at" = GREATEST(now(), "claimed_at" + interval '1 microsecond') WHERE "id" = ANY(ARRAY(SELECT "id" FROM cl_c)) RETURNING "id"`, s["heartbeat"])
	require.Equal(t, `UPDATE "jobs" SET "status" = 'SENT', "token" = NULL WHERE "token" = $1 AND "id" = ANY($2::bigint[]) RETURNING "id", false`,
		s["ack done"])
	require.Contains(t, s["stats scoped"], `EXTRACT(EPOCH FROM (now() - MIN("claimed_at") FILTER (WHERE "status" = 'PROCESSING')))`)
	require.Contains(t, s["stats scoped"], ` WHERE TRUE AND "task_id" = $1`)
}

func TestClaimStatementsTextKeysIntegerStatusOldServer(t *testing.T) {
	t.Parallel()
	spec := jobSpec(t)
	spec.Table, spec.IDKind = "app.jobs", dialect.IDText
	spec.Pending, spec.Processing, spec.Done, spec.Failed = status(t, 0), status(t, 1), status(t, 2), status(t, 3)
	st, err := store.OpenClaims(offline(110000), spec)
	require.NoError(t, err)
	s := st.(*store.Claims).Statements()
	require.Contains(t, s["claim skip locked"], `WITH cl_c AS ( SELECT "id" FROM (SELECT "id" FROM "app"."jobs" WHERE "status" = 0 AND "task_id" = $1 AND ("id" || '') > $2::text ORDER BY ("id" || '') LIMIT $3`)
	require.Equal(t, `CREATE INDEX IF NOT EXISTS "jobs_cl_claim" ON "app"."jobs" ("task_id", (("id" || ''))) WHERE "status" = 0`, st.IndexDDL()[0])
	require.Contains(t, s["release keys"], `"id" = ANY($2::text[])`)
}

func TestBadSpecsAndParams(t *testing.T) {
	t.Parallel()
	d := offline(150000)
	spec := jobSpec(t)
	spec.Token = `token"; DROP TABLE jobs; --`
	_, err := store.OpenClaims(d, spec)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = store.OpenLeases(d, dialect.LeaseTable{Table: "t", Key: "k", Owner: "o o", LockedAt: "l"})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = store.CreateTableDDL(d, store.TableDef{Table: "t;"})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)

	// Every check below fails before any statement runs (the offline
	// dialect has no connection and would panic otherwise).
	st, err := store.OpenClaims(d, jobSpec(t))
	require.NoError(t, err)
	ctx := context.Background()
	noScan := func(store.Scanner) error { return nil }
	_, err = st.Claim(ctx, &store.ClaimParams{Token: "t", Limit: 1}, noScan)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "missing scope value")
	_, err = st.Claim(ctx, &store.ClaimParams{Token: "t", Limit: 0, ScopeValues: []any{1}}, noScan)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "zero limit")
	_, err = st.Ack(ctx, &store.AckParams{Token: "t", IDs: []any{"1"}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "string id for an integer key")
	_, err = st.Ack(ctx, &store.AckParams{Token: "t", IDs: []any{uint64(1) << 63}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "overflowing id")
	_, err = st.Ack(ctx, &store.AckParams{Token: "t", IDs: []any{1, 2}, Versions: []int64{1}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "one version per id")
	_, err = st.Release(ctx, "t", []any{1.5})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = st.Reap(ctx, &store.ReapParams{Timeout: 0, Limit: 1})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = st.Stats(ctx, []any{1, 2})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	res, err := st.Ack(ctx, &store.AckParams{Token: "t"})
	require.NoError(t, err, "an empty ack is a no-op")
	require.Empty(t, res.Lost)

	ls, err := store.OpenLeases(d, store.KeyedLeaseTable("leases", 64))
	require.NoError(t, err)
	_, err = ls.Acquire(ctx, "k", "", time.Second)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "empty owner")
	_, err = ls.Renew(ctx, "k", "o", -time.Second)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = ls.ReapExpired(ctx, 0)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	plain, err := store.OpenLeases(d, dialect.LeaseTable{Table: "t", Key: "id", Owner: "o", LockedAt: "l"})
	require.NoError(t, err)
	_, err = plain.ReapExpired(ctx, 10)
	require.ErrorIs(t, err, dialect.ErrNotSupported)
}

func TestCreateTableDDL(t *testing.T) {
	t.Parallel()
	def := store.ClaimTableDef(jobSpec(t))
	ddl, err := store.CreateTableDDL(offline(150000), def)
	require.NoError(t, err)
	require.Equal(t, `CREATE TABLE IF NOT EXISTS "jobs" ("id" BIGINT GENERATED BY DEFAULT AS IDENTITY NOT NULL, "task_id" BIGINT NOT NULL, `+
		`"status" VARCHAR(32) NOT NULL DEFAULT 'PENDING', "token" VARCHAR(40), "claimed_at" TIMESTAMPTZ, "attempts" BIGINT NOT NULL DEFAULT 0, `+
		`"version" BIGINT NOT NULL DEFAULT 0, "created_at" TIMESTAMPTZ, "payload" VARCHAR(255), PRIMARY KEY ("id"))`, ddl[0])
	old, err := store.CreateTableDDL(offline(90600), def)
	require.NoError(t, err)
	require.Contains(t, old[0], `"id" BIGSERIAL NOT NULL`)
	lease, err := store.CreateTableDDL(offline(150000), store.LeaseTableDef("app.leases", 64))
	require.NoError(t, err)
	require.Equal(t, []string{
		`CREATE TABLE IF NOT EXISTS "app"."leases" ("lease_key" VARCHAR(64) NOT NULL, "owner" VARCHAR(40), "lock_at" TIMESTAMPTZ, "expires_at" TIMESTAMPTZ, "fence" BIGINT NOT NULL DEFAULT 0, PRIMARY KEY ("lease_key"))`,
		`CREATE INDEX IF NOT EXISTS "leases_cl_exp" ON "app"."leases" ("expires_at")`,
	}, lease)
}

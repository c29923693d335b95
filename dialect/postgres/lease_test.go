package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// A keyed table without an expires_at column: the expiry is lock_at + ttl,
// the insert path must bind the ttl too, and fences keep increasing.
func TestKeyedLeaseWithoutExpiresAt(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	for _, std := range []bool{false, true} {
		var d *Dialect
		var err error
		var clock func() time.Time // the server's clock
		const now = `SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS bigint)`
		if std {
			db := dbtest.Postgres(t)
			d, err = NewStdlib(ctx, db, dialect.Options{})
			clock = func() time.Time {
				var us int64
				require.NoError(t, db.QueryRowContext(ctx, now).Scan(&us))
				return time.UnixMicro(us)
			}
		} else {
			pool := dbtest.PostgresPool(t)
			d, err = New(ctx, pool, dialect.Options{})
			clock = func() time.Time {
				var us int64
				require.NoError(t, pool.QueryRow(ctx, now).Scan(&us))
				return time.UnixMicro(us)
			}
		}
		require.NoError(t, err)
		// An expiry is lock_at + ttl, lock_at being the statement's now():
		// between the server's clock before and after the statement (a
		// millisecond either side for a clock read as a decimal number of
		// seconds).
		requireExpiry := func(before, after, got time.Time, ttl time.Duration, what string) {
			t.Helper()
			const rounding = time.Millisecond
			require.False(t, got.Before(before.Add(ttl-rounding)), "%s: expiry %v before the clock before the statement + ttl %v", what, got, before.Add(ttl))
			require.False(t, got.After(after.Add(ttl+rounding)), "%s: expiry %v after the clock after the statement + ttl %v", what, got, after.Add(ttl))
		}
		def := store.LeaseTableDef("locks", 64)
		def.Columns = append(def.Columns[:3], def.Columns[4]) // drop expires_at
		def.Indexes = nil
		ddl, err := store.CreateTableDDL(d, def)
		require.NoError(t, err)
		require.NoError(t, store.ExecDDL(ctx, d, ddl))
		spec := store.KeyedLeaseTable("locks", 64)
		spec.ExpiresAt = ""
		ls, err := store.OpenLeases(d, spec)
		require.NoError(t, err)
		require.NoError(t, ls.VerifySchema(ctx))

		a, b := store.NewToken(), store.NewToken()
		before := clock()
		la, err := ls.Acquire(ctx, "job", a, 200*time.Millisecond)
		require.NoError(t, err)
		requireExpiry(before, clock(), la.ExpiresAt, 200*time.Millisecond, "first acquisition (insert)")
		require.EqualValues(t, 1, la.Fence)
		_, err = ls.Acquire(ctx, "job", b, 200*time.Millisecond)
		require.ErrorIs(t, err, dialect.ErrLeaseHeld)
		before = clock()
		r1, err := ls.Renew(ctx, "job", a, 200*time.Millisecond)
		require.NoError(t, err)
		requireExpiry(before, clock(), r1.ExpiresAt, 200*time.Millisecond, "renewal")
		r2, err := ls.Renew(ctx, "job", a, 200*time.Millisecond)
		require.NoError(t, err)
		require.True(t, r2.ExpiresAt.After(r1.ExpiresAt), "renewals move strictly forward")
		s, err := ls.Inspect(ctx, "job", time.Minute)
		require.NoError(t, err)
		require.Equal(t, a, s.Owner)
		require.True(t, s.Exists)
		time.Sleep(400 * time.Millisecond)
		before = clock()
		lb, err := ls.Acquire(ctx, "job", b, 200*time.Millisecond) // every holder uses the same TTL
		require.NoError(t, err, "expired by lock_at + ttl")
		requireExpiry(before, clock(), lb.ExpiresAt, 200*time.Millisecond, "takeover (update)")
		require.EqualValues(t, 2, lb.Fence)
		ok, err := ls.Release(ctx, "job", a, time.Time{})
		require.NoError(t, err)
		require.False(t, ok, "a no longer holds it")
		ok, err = ls.ForceRelease(ctx, "job")
		require.NoError(t, err)
		require.True(t, ok)
		lc, err := ls.Acquire(ctx, "job", a, time.Second)
		require.NoError(t, err)
		require.EqualValues(t, 3, lc.Fence)
	}
}

// A time column without a time zone is refused at verification: now() is a
// timestamptz, and comparing it with a timestamp converts through each
// session's TimeZone, so two sessions with different settings would disagree
// about which leases and claims have expired.
func TestTimestampWithoutTimeZoneIsRefused(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool := dbtest.PostgresPool(t)
	d, err := New(ctx, pool, dialect.Options{})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE naive_task (id bigint PRIMARY KEY, lock_owner varchar(40), lock_at timestamp(0))`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE naive_target (id bigserial PRIMARY KEY, task_id bigint, status smallint, cron_token varchar(40), send_at timestamp)`)
	require.NoError(t, err)
	ls, err := store.OpenLeases(d, dialect.LeaseTable{Table: "naive_task", Key: "id", Owner: "lock_owner", LockedAt: "lock_at"})
	require.NoError(t, err)
	err = ls.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "LockedAt: column naive_task.lock_at is timestamp without time zone")
	cs, err := store.OpenClaims(d, dialect.ClaimTable{Table: "naive_target", ID: "id", Status: "status", Token: "cron_token", ClaimedAt: "send_at",
		Pending: status(t, 0), Processing: status(t, 1), Done: status(t, 2), Failed: status(t, 3)})
	require.NoError(t, err)
	err = cs.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "ClaimedAt: column naive_target.send_at is timestamp without time zone")

	_, err = pool.Exec(ctx, `ALTER TABLE naive_task ALTER COLUMN lock_at TYPE timestamptz(0) USING lock_at AT TIME ZONE 'UTC'`)
	require.NoError(t, err)
	require.NoError(t, ls.VerifySchema(ctx), "the fix the message names is accepted")
}

package sqlite_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// The cron story's target table on SQLite, with send_at declared DATETIME
// and holding text dates that the application's own code reads. claimlock
// follows that convention with TextTimes: claims, heartbeats and the reaper
// write and compare SQLite's text dates, so existing queries on send_at keep
// working; without TextTimes the table is refused rather than filled with
// integers.
func TestTextTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE xxx_task_target (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id INTEGER NOT NULL,
		openid TEXT NOT NULL, status INTEGER NOT NULL DEFAULT 0, cron_token VARCHAR(40), send_at DATETIME)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO xxx_task_target (task_id, openid, status, send_at) VALUES
		(1, 'a', 2, '2026-01-01 10:00:00'), (1, 'b', 0, NULL), (1, 'c', 0, NULL)`)
	require.NoError(t, err)
	spec := dialect.ClaimTable{Table: "xxx_task_target", ID: "id", Status: "status", Token: "cron_token", ClaimedAt: "send_at",
		Columns: []string{"openid"}, Scope: []string{"task_id"},
		Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2), Failed: dialect.StatusInt(3)}
	plain, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	err = plain.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "TextTimes")

	spec.TextTimes = true
	st, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, st.VerifySchema(ctx))
	tok := store.NewToken()
	n, err := st.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 10, ScopeValues: []any{1}, Strategy: dialect.StrategyTokenUpdate},
		func(sc store.Scanner) error { var id int64; var o string; return sc.Scan(&id, &o) })
	require.NoError(t, err)
	require.Equal(t, 2, n)
	var typ, first string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT typeof(send_at), send_at || '' FROM xxx_task_target WHERE status = 1 ORDER BY id LIMIT 1`).Scan(&typ, &first))
	require.Equal(t, "text", typ)
	written, err := time.Parse("2006-01-02 15:04:05.000", first)
	require.NoError(t, err, "SQLite's own text date format: %q", first)
	require.WithinDuration(t, time.Now().UTC(), written, time.Minute)
	var recent int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM xxx_task_target WHERE send_at > datetime('now', '-1 minute')`).Scan(&recent))
	require.Equal(t, 2, recent, "the application's own date queries read them")

	time.Sleep(5 * time.Millisecond)
	held, err := st.Heartbeat(ctx, tok)
	require.NoError(t, err)
	require.Len(t, held, 2)
	var moved string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT send_at || '' FROM xxx_task_target WHERE status = 1 ORDER BY id LIMIT 1`).Scan(&moved))
	require.Greater(t, moved, first, "a heartbeat moves the time forward")

	time.Sleep(20 * time.Millisecond) // text dates hold milliseconds
	stats, err := st.Stats(ctx, []any{1})
	require.NoError(t, err)
	require.Greater(t, stats.OldestProcessing, time.Duration(0))
	require.Less(t, stats.OldestProcessing, time.Minute)

	reap := &store.ReapParams{Timeout: 400 * time.Millisecond, Limit: 10}
	res, err := st.Reap(ctx, reap)
	require.NoError(t, err)
	require.Zero(t, res.Returned, "fresh claims are not stale")
	time.Sleep(500 * time.Millisecond)
	res, err = st.Reap(ctx, reap)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Returned, "stale after the timeout")
}

// TestLeaseTextTimes: the cron story's task table as it is on SQLite,
// xxx_task(id, status, lock_at DATETIME), its lock_at holding the text
// dates the application's own code writes. Verification refused it for
// leases (no text-date convention); with LeaseTable.TextTimes the lease
// writes and compares SQLite's text dates, so the application's queries
// on lock_at keep working, and stamps (the lease's identity without an
// owner column) are the text dates read back as integer milliseconds.
func TestLeaseTextTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE xxx_task (id INTEGER PRIMARY KEY, status INTEGER NOT NULL DEFAULT 0, lock_at DATETIME)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO xxx_task (id) VALUES (1), (2)`)
	require.NoError(t, err)
	spec := dialect.LeaseTable{Table: "xxx_task", Key: "id", LockedAt: "lock_at", Status: "status"}
	plain, err := store.OpenLeases(d, spec)
	require.NoError(t, err)
	err = plain.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "LeaseTable.TextTimes")

	spec.TextTimes = true
	ls, err := store.OpenLeases(d, spec)
	require.NoError(t, err)
	require.NoError(t, ls.VerifySchema(ctx))
	info, err := ls.Acquire(ctx, 1, "", time.Minute)
	require.NoError(t, err)
	var typ, written string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT typeof(lock_at), lock_at || '' FROM xxx_task WHERE id = 1`).Scan(&typ, &written))
	require.Equal(t, "text", typ)
	at, err := time.Parse("2006-01-02 15:04:05.000", written)
	require.NoError(t, err, "SQLite's own text date format: %q", written)
	require.WithinDuration(t, time.Now().UTC(), at, time.Minute)
	require.Equal(t, strconv.FormatInt(at.UnixMilli(), 10), info.Owner, "the stamp is the text date as integer milliseconds")
	require.WithinDuration(t, at.Add(time.Minute), info.ExpiresAt, time.Millisecond)
	var locked int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM xxx_task WHERE lock_at > datetime('now', '-1 minute')`).Scan(&locked))
	require.Equal(t, 1, locked, "the application's own date queries read it")

	_, err = ls.Acquire(ctx, 1, "", time.Minute)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld)
	time.Sleep(5 * time.Millisecond)
	renewed, err := ls.Renew(ctx, 1, info.Owner, time.Minute)
	require.NoError(t, err)
	require.NotEqual(t, info.Owner, renewed.Owner, "a renewal moves the stamp")
	_, err = ls.Renew(ctx, 1, info.Owner, time.Minute)
	require.ErrorIs(t, err, dialect.ErrLeaseLost, "the old stamp no longer holds it")
	st, err := ls.Inspect(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, renewed.Owner, st.Owner)
	done, err := ls.Finish(ctx, 1, renewed.Owner, 2, time.Time{})
	require.NoError(t, err)
	require.True(t, done)
	var status int
	var lockAt *string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT status, lock_at FROM xxx_task WHERE id = 1`).Scan(&status, &lockAt))
	require.Equal(t, 2, status)
	require.Nil(t, lockAt)
}

// TestLeaseTextTimesWholeSeconds: the application's own code writes its
// lock times with datetime('now'), in whole seconds, up to a second before
// the real time. A lease on text dates must not be taken before the TTL
// has passed since the application's lock, wherever in a second it was
// taken: text dates get a whole second of margin.
func TestLeaseTextTimesWholeSeconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE xxx_task (id INTEGER PRIMARY KEY, status INTEGER NOT NULL DEFAULT 0, lock_at DATETIME)`)
	require.NoError(t, err)
	ls, err := store.OpenLeases(d, dialect.LeaseTable{Table: "xxx_task", Key: "id", LockedAt: "lock_at", TextTimes: true})
	require.NoError(t, err)
	require.NoError(t, ls.VerifySchema(ctx))
	const ttl = 500 * time.Millisecond
	offsets := []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 950 * time.Millisecond}
	var wg sync.WaitGroup
	for i, off := range offsets {
		_, err = db.ExecContext(ctx, `INSERT INTO xxx_task (id) VALUES (?)`, i)
		require.NoError(t, err)
		wg.Go(func() {
			// The application locks the task at off into a second.
			now := time.Now()
			next := now.Truncate(time.Second).Add(off)
			if !next.After(now) {
				next = next.Add(time.Second)
			}
			time.Sleep(time.Until(next))
			start := time.Now()
			_, err := db.ExecContext(ctx, `UPDATE xxx_task SET lock_at = datetime('now') WHERE id = ?`, i)
			require.NoError(t, err)
			for {
				_, err := ls.Acquire(ctx, i, "", ttl)
				if err == nil {
					break
				}
				require.ErrorIs(t, err, dialect.ErrLeaseHeld)
				require.Less(t, time.Since(start), ttl+3*time.Second, "the lock must expire eventually")
				time.Sleep(5 * time.Millisecond)
			}
			got := time.Since(start)
			require.GreaterOrEqual(t, got, ttl, "locked at +%v into a second: taken after %v, before the TTL", off, got)
		})
	}
	wg.Wait()
}

// TestKeyedLeaseTextTimes: a key table whose lock and expiry columns are
// declared DATETIME, with LeaseTable.TextTimes: insert-if-absent, renewal,
// a minimum hold, the listing of held leases and the reaper all write and
// read text dates, and report expiries on the database clock.
func TestKeyedLeaseTextTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE leases (lease_key TEXT NOT NULL PRIMARY KEY, owner TEXT, lock_at DATETIME,
		expires_at DATETIME, fence INTEGER NOT NULL DEFAULT 0)`)
	require.NoError(t, err)
	spec := store.KeyedLeaseTable("leases", 64)
	spec.TextTimes = true
	ls, err := store.OpenLeases(d, spec)
	require.NoError(t, err)
	require.NoError(t, ls.VerifySchema(ctx))
	textDate := func(key, col string) time.Time {
		t.Helper()
		var typ, v string
		require.NoError(t, db.QueryRowContext(ctx, `SELECT typeof(`+col+`), `+col+` || '' FROM leases WHERE lease_key = ?`, key).Scan(&typ, &v))
		require.Equal(t, "text", typ, col)
		at, err := time.Parse("2006-01-02 15:04:05.000", v)
		require.NoError(t, err, "%s: %q", col, v)
		return at
	}

	a := store.NewToken()
	info, err := ls.Acquire(ctx, "job", a, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 1, info.Fence)
	require.Equal(t, info.ExpiresAt, textDate("job", "expires_at"), "the expiry is the text date")
	require.Equal(t, time.Minute, textDate("job", "expires_at").Sub(textDate("job", "lock_at")))
	_, err = ls.Acquire(ctx, "job", store.NewToken(), time.Minute)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld)
	renewed, err := ls.Renew(ctx, "job", a, 2*time.Minute)
	require.NoError(t, err)
	require.True(t, renewed.ExpiresAt.After(info.ExpiresAt))
	held, err := ls.Held(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, a, held[0].Owner)
	require.Equal(t, renewed.ExpiresAt, held[0].ExpiresAt)
	require.InDelta(t, float64(2*time.Minute), float64(held[0].Remaining), float64(10*time.Second))

	// A minimum hold keeps the key past the release, by the hold plus the
	// text dates' whole second.
	hold := time.Now().Add(time.Minute)
	released, err := ls.Release(ctx, "job", a, hold)
	require.NoError(t, err)
	require.True(t, released)
	st, err := ls.Inspect(ctx, "job", time.Minute)
	require.NoError(t, err)
	require.Equal(t, a, st.Owner)
	require.False(t, st.Expired)
	require.WithinDuration(t, hold.Add(time.Second), st.ExpiresAt, 2*time.Millisecond)
	forced, err := ls.ForceRelease(ctx, "job")
	require.NoError(t, err)
	require.True(t, forced)

	// An expired lease is reported expired and reaped only a second after
	// its expiry (checked when the calls ran within that second).
	start := time.Now()
	_, err = ls.Acquire(ctx, "short", store.NewToken(), 10*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	n, err := ls.ReapExpired(ctx, 10)
	require.NoError(t, err)
	st, err = ls.Inspect(ctx, "short", time.Minute)
	require.NoError(t, err)
	if time.Since(start) < time.Second {
		require.Zero(t, n, "within the whole second of margin")
		require.False(t, st.Expired)
	}
	time.Sleep(time.Until(start.Add(1100 * time.Millisecond)))
	if n == 0 {
		st, err = ls.Inspect(ctx, "short", time.Minute)
		require.NoError(t, err)
		require.True(t, st.Expired)
		n, err = ls.ReapExpired(ctx, 10)
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, n)
	info, err = ls.Acquire(ctx, "short", a, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 2, info.Fence, "the reaped row keeps its fence")
}

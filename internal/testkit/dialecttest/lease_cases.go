package dialecttest

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

func keyedLeases(t *testing.T, h Harness) (dialect.Dialect, store.LeaseStore) {
	t.Helper()
	d, _, ls := keyedLeasesDB(t, h)
	return d, ls
}

// keyedLeasesDB is keyedLeases that also returns the harness's handle.
func keyedLeasesDB(t *testing.T, h Harness) (dialect.Dialect, *sql.DB, store.LeaseStore) {
	t.Helper()
	d, db := h.Open(t)
	ddl, err := store.CreateTableDDL(d, store.LeaseTableDef("cl_lease", 64))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctxT(t), d, ddl))
	ls, err := store.OpenLeases(d, store.KeyedLeaseTable("cl_lease", 64))
	require.NoError(t, err)
	require.NoError(t, ls.VerifySchema(ctxT(t)))
	return d, db, ls
}

// dbClock reads the database clock through the harness's handle, at
// microsecond precision (SQLite: the millisecond the dialect's statements
// see), as an instant to compare the expiries the dialect reports with.
func dbClock(t *testing.T, d dialect.Dialect, db *sql.DB) time.Time {
	t.Helper()
	var q string
	switch e := d.Capabilities().Engine; e {
	case dialect.EnginePostgreSQL:
		q = "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS bigint)"
	case dialect.EngineMySQL, dialect.EngineMariaDB, dialect.EngineTiDB:
		q = "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
	case dialect.EngineSQLite:
		q = "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000"
	default:
		t.Fatalf("dialecttest: no clock query for engine %q", e)
	}
	var us int64
	require.NoError(t, db.QueryRowContext(ctxT(t), q).Scan(&us))
	return time.UnixMicro(us)
}

// requireExpiry checks that an expiry the dialect reported is ttl after an
// instant of the database clock between before and after, the readings
// taken around the statement that wrote it. The millisecond either side
// covers the rounding of a clock read as a decimal number of seconds.
func requireExpiry(t *testing.T, before, after time.Time, ttl time.Duration, got time.Time, what string) {
	t.Helper()
	const rounding = time.Millisecond
	require.False(t, got.Before(before.Add(ttl-rounding)), "%s: expiry %v is %v earlier than the database's clock before the statement + TTL",
		what, got, before.Add(ttl).Sub(got))
	require.False(t, got.After(after.Add(ttl+rounding)), "%s: expiry %v is %v later than the database's clock after the statement + TTL",
		what, got, got.Sub(after.Add(ttl)))
}

func testLeaseKeyed(t *testing.T, h Harness) {
	d, db, ls := keyedLeasesDB(t, h)
	ctx := ctxT(t)
	a, b := store.NewToken(), store.NewToken()
	st0, err := ls.Inspect(ctx, "job", time.Minute)
	require.NoError(t, err)
	require.False(t, st0.Exists)

	before := dbClock(t, d, db)
	la, err := ls.Acquire(ctx, "job", a, 10*time.Second)
	require.NoError(t, err)
	requireExpiry(t, before, dbClock(t, d, db), 10*time.Second, la.ExpiresAt, "acquire (insert)")
	require.EqualValues(t, 1, la.Fence)

	_, err = ls.Acquire(ctx, "job", b, 10*time.Second)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld)
	_, err = ls.Acquire(ctx, "job", a, 10*time.Second)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld, "re-acquiring one's own lease is not a renewal")
	_, err = ls.Renew(ctx, "job", b, 10*time.Second)
	require.ErrorIs(t, err, dialect.ErrLeaseLost)
	ok, err := ls.Release(ctx, "job", b, time.Time{})
	require.NoError(t, err)
	require.False(t, ok, "someone else's release is a no-op")

	before = dbClock(t, d, db)
	ra, err := ls.Renew(ctx, "job", a, 20*time.Second)
	require.NoError(t, err)
	requireExpiry(t, before, dbClock(t, d, db), 20*time.Second, ra.ExpiresAt, "renew")
	require.Equal(t, la.Fence, ra.Fence)
	require.True(t, ra.ExpiresAt.After(la.ExpiresAt))

	s, err := ls.Inspect(ctx, "job", time.Minute)
	require.NoError(t, err)
	require.Equal(t, a, s.Owner)
	require.False(t, s.Expired)
	require.EqualValues(t, 1, s.Fence)

	ok, err = ls.Release(ctx, "job", a, time.Time{})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = ls.Release(ctx, "job", a, time.Time{})
	require.NoError(t, err)
	require.False(t, ok)
	_, err = ls.Renew(ctx, "job", a, time.Second)
	require.ErrorIs(t, err, dialect.ErrLeaseLost)

	before = dbClock(t, d, db)
	lb, err := ls.Acquire(ctx, "job", b, 10*time.Second)
	require.NoError(t, err)
	requireExpiry(t, before, dbClock(t, d, db), 10*time.Second, lb.ExpiresAt, "acquire (update)")
	require.EqualValues(t, 2, lb.Fence, "the fence survives release")
	ok, err = ls.ForceRelease(ctx, "job")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = ls.ForceRelease(ctx, "job")
	require.NoError(t, err)
	require.False(t, ok)
	lc, err := ls.Acquire(ctx, "job", a, 10*time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 3, lc.Fence)

	// Keys are independent.
	lo, err := ls.Acquire(ctx, "other", b, 10*time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 1, lo.Fence)
}

func testLeaseExpiry(t *testing.T, h Harness) {
	_, ls := keyedLeases(t, h)
	ctx := ctxT(t)
	a, b := store.NewToken(), store.NewToken()
	la, err := ls.Acquire(ctx, "k", a, 300*time.Millisecond)
	require.NoError(t, err)
	_, err = ls.Acquire(ctx, "k", b, time.Second)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld)
	time.Sleep(600 * time.Millisecond)
	s, err := ls.Inspect(ctx, "k", time.Minute)
	require.NoError(t, err)
	require.True(t, s.Expired)
	lb, err := ls.Acquire(ctx, "k", b, 10*time.Second)
	require.NoError(t, err)
	require.Greater(t, lb.Fence, la.Fence)
	_, err = ls.Renew(ctx, "k", a, time.Second)
	require.ErrorIs(t, err, dialect.ErrLeaseLost)
	ok, err := ls.Release(ctx, "k", a, time.Time{})
	require.NoError(t, err)
	require.False(t, ok)
	s, err = ls.Inspect(ctx, "k", time.Minute)
	require.NoError(t, err)
	require.Equal(t, b, s.Owner, "the stale holder changed nothing")
}

func testLeaseRenewTight(t *testing.T, h Harness) {
	_, ls := keyedLeases(t, h)
	ctx := ctxT(t)
	a := store.NewToken()
	prev, err := ls.Acquire(ctx, "tight", a, time.Minute)
	require.NoError(t, err)
	for i := 0; i < 300; i++ {
		info, err := ls.Renew(ctx, "tight", a, time.Minute)
		require.NoError(t, err, "renew %d must not look like a lost lease", i)
		require.True(t, info.ExpiresAt.After(prev.ExpiresAt), "renew %d: expiry must move strictly forward", i)
		prev = info
	}
}

func testLeaseTaskRow(t *testing.T, h Harness) {
	d, db := h.Open(t)
	ctx := ctxT(t)
	def := store.TableDef{Table: "xxx_task", PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
		{Name: "id", Type: store.TypeSerial},
		{Name: "status", Type: store.TypeInt},
		{Name: "lock_at", Type: store.TypeTime},
		{Name: "lock_owner", Type: store.TypeText, Len: 40},
		{Name: "lock_version", Type: store.TypeInt, NotNull: true, Default: ptr(st(t, 0))},
	}}
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	q := func(s string) string { x, err := store.QuoteIdent(d, "t", s); require.NoError(t, err); return x }
	_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (1), (1)", q("xxx_task"), q("status")))
	require.NoError(t, err)
	ls, err := store.OpenLeases(d, dialect.LeaseTable{Table: "xxx_task", Key: "id", Owner: "lock_owner", LockedAt: "lock_at", Fence: "lock_version"})
	require.NoError(t, err)
	require.NoError(t, ls.VerifySchema(ctx))
	a, b := store.NewToken(), store.NewToken()
	la, err := ls.Acquire(ctx, int64(1), a, 400*time.Millisecond)
	require.NoError(t, err)
	require.EqualValues(t, 1, la.Fence)
	_, err = ls.Acquire(ctx, int64(1), b, 400*time.Millisecond)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld)
	_, err = ls.Acquire(ctx, int64(2), b, 400*time.Millisecond)
	require.NoError(t, err, "another task is another lease")
	_, err = ls.Acquire(ctx, int64(99), b, time.Second)
	require.ErrorIs(t, err, dialect.ErrKeyNotFound)
	_, err = ls.Renew(ctx, int64(1), a, 400*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(800 * time.Millisecond)
	// Without an expires_at column every holder must use the same TTL.
	lb, err := ls.Acquire(ctx, int64(1), b, 400*time.Millisecond)
	require.NoError(t, err, "expired by lock_at + ttl")
	require.EqualValues(t, 2, lb.Fence)
	_, err = ls.Renew(ctx, int64(1), a, time.Second)
	require.ErrorIs(t, err, dialect.ErrLeaseLost)
	ok, err := ls.Release(ctx, int64(1), b, time.Time{})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = ls.Acquire(ctx, "1", a, time.Second)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "integer keys only")
}

func ptr[T any](v T) *T { return &v }

// testLeaseKeyedNoExpiry covers a keyed table without an expires_at column:
// inserts of new keys and expiry by lock_at + ttl.
func testLeaseKeyedNoExpiry(t *testing.T, h Harness) {
	d, db := h.Open(t)
	ctx := ctxT(t)
	def := store.LeaseTableDef("cl_lease_noexp", 64)
	def.Columns = append(def.Columns[:3], def.Columns[4:]...) // drop expires_at
	def.Indexes = nil
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	spec := store.KeyedLeaseTable("cl_lease_noexp", 64)
	spec.ExpiresAt = ""
	ls, err := store.OpenLeases(d, spec)
	require.NoError(t, err)
	require.NoError(t, ls.VerifySchema(ctx))
	a, b := store.NewToken(), store.NewToken()
	// A TTL a loaded CI machine cannot outlast between two statements.
	const ttl = 2 * time.Second
	before := dbClock(t, d, db)
	la, err := ls.Acquire(ctx, "new-key", a, ttl)
	require.NoError(t, err, "first acquisition inserts the key")
	requireExpiry(t, before, dbClock(t, d, db), ttl, la.ExpiresAt, "acquire (insert), expiry lock_at + TTL")
	require.EqualValues(t, 1, la.Fence)
	_, err = ls.Acquire(ctx, "new-key", b, ttl)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld)
	time.Sleep(ttl + 500*time.Millisecond)
	before = dbClock(t, d, db)
	lb, err := ls.Acquire(ctx, "new-key", b, ttl)
	require.NoError(t, err)
	requireExpiry(t, before, dbClock(t, d, db), ttl, lb.ExpiresAt, "acquire (update), expiry lock_at + TTL")
	require.EqualValues(t, 2, lb.Fence)
	_, err = ls.ReapExpired(ctx, 10)
	require.ErrorIs(t, err, dialect.ErrNotSupported, "reaping needs expires_at")
	// Listed and inspected, the lease expires at lock_at + the TTL given,
	// the expiry its acquisition reported.
	held, err := ls.Held(ctx, 10, ttl)
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, "new-key", held[0].Key)
	require.Equal(t, b, held[0].Owner)
	require.EqualValues(t, 2, held[0].Fence)
	require.Equal(t, lb.ExpiresAt, held[0].ExpiresAt, "held: lock_at + TTL")
	st, err := ls.Inspect(ctx, "new-key", ttl)
	require.NoError(t, err)
	require.Equal(t, lb.ExpiresAt, st.ExpiresAt, "inspect: lock_at + TTL")
	_, err = ls.Held(ctx, 10, 0)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "no expires_at: the TTL reckons the expiry")
	_, err = ls.Inspect(ctx, "new-key", 0)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "no expires_at: the TTL reckons the expiry")
	ok, err := ls.Release(ctx, "new-key", b, time.Time{})
	require.NoError(t, err)
	require.True(t, ok)
	held, err = ls.Held(ctx, 10, ttl)
	require.NoError(t, err)
	require.Empty(t, held, "a released lease is not listed")
}

func testLeaseBadInput(t *testing.T, h Harness) {
	_, ls := keyedLeases(t, h)
	ctx := ctxT(t)
	a := store.NewToken()
	_, err := ls.Acquire(ctx, "", a, time.Second)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = ls.Acquire(ctx, strings.Repeat("k", 65), a, time.Second)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = ls.Acquire(ctx, "k", a, 0)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = ls.Acquire(ctx, "k", a, -time.Second)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = ls.Renew(ctx, "k", a, 0)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = ls.Acquire(ctx, 5, a, time.Second)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	// A key that looks like SQL is just a key.
	evil := "x'); DROP TABLE cl_lease; --"
	_, err = ls.Acquire(ctx, evil, a, time.Second)
	require.NoError(t, err)
	s, err := ls.Inspect(ctx, evil, time.Minute)
	require.NoError(t, err)
	require.Equal(t, a, s.Owner)
}

func testLeaseReap(t *testing.T, h Harness) {
	_, ls := keyedLeases(t, h)
	ctx := ctxT(t)
	for i := 0; i < 5; i++ {
		_, err := ls.Acquire(ctx, fmt.Sprintf("short-%d", i), store.NewToken(), 100*time.Millisecond)
		require.NoError(t, err)
	}
	live := store.NewToken()
	_, err := ls.Acquire(ctx, "long", live, time.Minute)
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond)
	n1, err := ls.ReapExpired(ctx, 3)
	require.NoError(t, err)
	require.EqualValues(t, 3, n1)
	n2, err := ls.ReapExpired(ctx, 3)
	require.NoError(t, err)
	require.EqualValues(t, 2, n2)
	s, err := ls.Inspect(ctx, "long", time.Minute)
	require.NoError(t, err)
	require.Equal(t, live, s.Owner)
	l, err := ls.Acquire(ctx, "short-0", store.NewToken(), time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 2, l.Fence, "reaping keeps the fence")
}

// testLeaseContention races acquirers on one key; holders never overlap and
// fences are unique and increase in acquisition order.
func testLeaseContention(t *testing.T, h Harness) {
	_, ls := keyedLeases(t, h)
	ctx, cancel := context.WithTimeout(ctxT(t), 1500*time.Millisecond)
	defer cancel()
	var inside atomic.Int32
	var mu sync.Mutex
	var fences []int64
	var lastFence int64
	var failures []string
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				tok := store.NewToken()
				info, err := ls.Acquire(ctx, "hot", tok, 5*time.Second)
				if err != nil {
					if ctx.Err() == nil && !isHeld(err) {
						mu.Lock()
						failures = append(failures, err.Error())
						mu.Unlock()
					}
					continue
				}
				if inside.Add(1) != 1 {
					mu.Lock()
					failures = append(failures, "two holders at once")
					mu.Unlock()
				}
				mu.Lock()
				if info.Fence <= lastFence {
					failures = append(failures, fmt.Sprintf("fence %d after %d", info.Fence, lastFence))
				}
				lastFence = info.Fence
				fences = append(fences, info.Fence)
				mu.Unlock()
				inside.Add(-1)
				ok, err := ls.Release(context.WithoutCancel(ctx), "hot", tok, time.Time{})
				if err != nil || !ok {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("release: %v %v", ok, err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	require.Empty(t, failures)
	require.NotEmpty(t, fences)
	require.True(t, sort.SliceIsSorted(fences, func(i, j int) bool { return fences[i] < fences[j] }))
	t.Logf("%d acquisitions", len(fences))
}

func isHeld(err error) bool {
	return err != nil && (errorsIs(err, dialect.ErrLeaseHeld))
}

// testLeaseHeld lists held leases soonest expiry first, with owner, fence
// and the time left on the database clock; freed leases leave the list.
func testLeaseHeld(t *testing.T, h Harness) {
	_, ls := keyedLeases(t, h)
	ctx := ctxT(t)
	a, b, c := store.NewToken(), store.NewToken(), store.NewToken()
	_, err := ls.Acquire(ctx, "late", a, time.Hour)
	require.NoError(t, err)
	lb, err := ls.Acquire(ctx, "soon", b, time.Minute)
	require.NoError(t, err)
	_, err = ls.Acquire(ctx, "freed", c, time.Minute)
	require.NoError(t, err)
	ok, err := ls.Release(ctx, "freed", c, time.Time{})
	require.NoError(t, err)
	require.True(t, ok)

	held, err := ls.Held(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, held, 2, "the freed lease is not listed")
	require.Equal(t, "soon", held[0].Key, "soonest expiry first")
	require.Equal(t, b, held[0].Owner)
	require.Equal(t, lb.Fence, held[0].Fence)
	require.False(t, held[0].Expired)
	require.InDelta(t, time.Minute.Seconds(), held[0].Remaining.Seconds(), 30, "time left on the database clock")
	require.Equal(t, "late", held[1].Key)
	require.InDelta(t, time.Hour.Seconds(), held[1].Remaining.Seconds(), 30)
	page, err := ls.Held(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, page, 1)
	for _, bad := range []int{0, -1, store.MaxHeldLimit + 1} {
		_, err = ls.Held(ctx, bad, time.Minute)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "limit %d", bad)
	}
}

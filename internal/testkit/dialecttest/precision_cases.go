package dialecttest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// precisionOffsets are the points within a second at which the cases below
// acquire or claim: a time column holding whole seconds stores each of them
// up to a second off.
var precisionOffsets = []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond,
	700 * time.Millisecond, 920 * time.Millisecond}

// atOffset sleeps until the wall clock is off into a second. The database
// runs on the same host in these tests, so its clock reads the same second.
func atOffset(off time.Duration) time.Time {
	now := time.Now()
	next := now.Truncate(time.Second).Add(off)
	if !next.After(now) {
		next = next.Add(time.Second)
	}
	time.Sleep(time.Until(next))
	return time.Now()
}

// testSecondPrecision runs the cron story on its own tables as users have
// them: a task table (id, status, lock_at DATETIME) with an owner column
// added, and xxx_task_target (id, task_id, openid, status TINYINT,
// cron_token VARCHAR(40), send_at DATETIME) with integer statuses and only
// an index on (task_id, cron_token); and a key table whose lock_at and
// expires_at hold whole seconds (DATETIME, TIMESTAMPTZ(0)). Acquired or
// claimed at many points within a second, a lease must not be taken by
// anyone else, and a claim not reaped, before the TTL or timeout has passed
// since the call started: a second holder before the first's local
// deadline would break exclusive claim. A whole-second column stores a
// time up to a second early (truncated by MariaDB, rounded by MySQL and
// PostgreSQL), so each expiry test must allow the column's resolution:
// the acquisition's, the claim reap's and the lease reap's.
func testSecondPrecision(t *testing.T, h Harness) {
	d, db := h.Open(t)
	ctx := ctxT(t)
	task := store.TableDef{Table: "xxx_task", PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
		{Name: "id", Type: store.TypeInt, NotNull: true},
		{Name: "status", Type: store.TypeInt, NotNull: true, Default: ptr(st(t, 0))},
		{Name: "lock_at", Type: store.TypeTimeSeconds},
		{Name: "lock_owner", Type: store.TypeText, Len: 40},
	}}
	target := store.TableDef{Table: "xxx_task_target", Columns: []store.ColumnDef{
		{Name: "id", Type: store.TypeSerial},
		{Name: "task_id", Type: store.TypeInt, NotNull: true},
		{Name: "openid", Type: store.TypeText, Len: 64, NotNull: true},
		{Name: "status", Type: store.TypeInt, NotNull: true, Default: ptr(st(t, 0))},
		{Name: "cron_token", Type: store.TypeText, Len: 40},
		{Name: "send_at", Type: store.TypeTimeSeconds},
	}, Indexes: []store.IndexDef{{Name: "idx_task_token", Columns: []string{"task_id", "cron_token"}}}}
	keys := store.LeaseTableDef("cl_lease_s", 64)
	for i, c := range keys.Columns {
		if c.Type == store.TypeTime {
			keys.Columns[i].Type = store.TypeTimeSeconds
		}
	}
	for _, def := range []store.TableDef{task, target, keys} {
		ddl, err := store.CreateTableDDL(d, def)
		require.NoError(t, err)
		require.NoError(t, store.ExecDDL(ctx, d, ddl))
	}
	q := func(s string) string { x, err := store.QuoteIdent(d, "t", s); require.NoError(t, err); return x }
	for i := range precisionOffsets {
		_, err := db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%d)", q("xxx_task"), q("id"), i))
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (%d, 'o%d')", q("xxx_task_target"), q("task_id"), q("openid"), i, i))
		require.NoError(t, err)
	}
	leases, err := store.OpenLeases(d, dialect.LeaseTable{Table: "xxx_task", Key: "id", Owner: "lock_owner", LockedAt: "lock_at"})
	require.NoError(t, err)
	require.NoError(t, leases.VerifySchema(ctx))
	keyed, err := store.OpenLeases(d, store.KeyedLeaseTable("cl_lease_s", 64))
	require.NoError(t, err)
	require.NoError(t, keyed.VerifySchema(ctx))
	claims, err := store.OpenClaims(d, dialect.ClaimTable{Table: "xxx_task_target", ID: "id", Status: "status", Token: "cron_token",
		ClaimedAt: "send_at", Columns: []string{"openid"}, Scope: []string{"task_id"},
		Pending: st(t, 0), Processing: st(t, 1), Done: st(t, 2), Failed: st(t, 3)})
	require.NoError(t, err)
	require.NoError(t, claims.VerifySchema(ctx))

	// One key table per offset for the lease reap, which frees every
	// expired lease of its table: each reap below must free only its own.
	reapers := make([]store.LeaseStore, len(precisionOffsets))
	for i := range reapers {
		def := store.LeaseTableDef(fmt.Sprintf("cl_lease_r%d", i), 64)
		for j, c := range def.Columns {
			if c.Type == store.TypeTime {
				def.Columns[j].Type = store.TypeTimeSeconds
			}
		}
		ddl, err := store.CreateTableDDL(d, def)
		require.NoError(t, err)
		require.NoError(t, store.ExecDDL(ctx, d, ddl))
		reapers[i], err = store.OpenLeases(d, store.KeyedLeaseTable(def.Table, 64))
		require.NoError(t, err)
		require.NoError(t, reapers[i].VerifySchema(ctx))
	}

	const ttl = time.Second
	var wg sync.WaitGroup
	for i, off := range precisionOffsets {
		// The task row's lease expires by lock_at + TTL; the key table's
		// by its expires_at, written by the first acquisition's insert.
		takeover := func(ls store.LeaseStore, key any, what string) {
			start := atOffset(off)
			_, err := ls.Acquire(ctx, key, store.NewToken(), ttl)
			require.NoError(t, err)
			for {
				_, err := ls.Acquire(ctx, key, store.NewToken(), ttl)
				if err == nil {
					break
				}
				require.ErrorIs(t, err, dialect.ErrLeaseHeld)
				require.Less(t, time.Since(start), ttl+3*time.Second, "the %s must expire eventually", what)
				time.Sleep(10 * time.Millisecond)
			}
			got := time.Since(start)
			require.GreaterOrEqual(t, got, ttl, "%s acquired at +%v into a second: a second holder after %v, before the TTL", what, off, got)
		}
		wg.Go(func() { takeover(leases, i, "task lease") })
		// The lease reap frees a lease whose whole-second expires_at has
		// passed: it may not free one before its TTL has.
		wg.Go(func() {
			ls := reapers[i]
			start := atOffset(off)
			_, err := ls.Acquire(ctx, "r", store.NewToken(), ttl)
			require.NoError(t, err)
			for {
				n, err := ls.ReapExpired(ctx, 10)
				require.NoError(t, err)
				if n == 1 {
					break
				}
				require.Less(t, time.Since(start), ttl+3*time.Second, "the lease must be reaped eventually")
				time.Sleep(10 * time.Millisecond)
			}
			got := time.Since(start)
			require.GreaterOrEqual(t, got, ttl, "lease acquired at +%v into a second: reaped after %v, before the TTL", off, got)
		})
		wg.Go(func() { takeover(keyed, fmt.Sprintf("k%d", i), "keyed lease") })
		wg.Go(func() {
			time.Sleep(ttl / 2) // the lease goroutine takes the first points
			start := atOffset(off)
			tok := store.NewToken()
			n, err := claims.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 1, ScopeValues: []any{i}, Strategy: dialect.StrategyTokenUpdate},
				func(sc store.Scanner) error { var id int64; var openid string; return sc.Scan(&id, &openid) })
			require.NoError(t, err)
			require.Equal(t, 1, n)
			for {
				res, err := claims.Reap(ctx, &store.ReapParams{Timeout: ttl, Limit: 10, ScopeValues: []any{i}})
				require.NoError(t, err)
				if res.Returned == 1 {
					break
				}
				require.Less(t, time.Since(start), ttl+3*time.Second, "the claim must be reaped eventually")
				time.Sleep(10 * time.Millisecond)
			}
			got := time.Since(start)
			require.GreaterOrEqual(t, got, ttl, "claimed at +%v into a second: reaped after %v, before the timeout", off, got)
		})
	}
	wg.Wait()
}

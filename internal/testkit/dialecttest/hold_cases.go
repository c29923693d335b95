package dialecttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// acquiredAt is the database time at which an acquisition with ttl wrote
// info: the statement sets the expiry to its now + ttl.
func acquiredAt(info store.LeaseInfo, ttl time.Duration) time.Time {
	return info.ExpiresAt.Add(-ttl)
}

// testLeaseMinHold covers Release and Finish under a minimum hold: a key
// released before its hold ends cannot be acquired again until the hold
// ends on the database clock, a hold already past frees the key at once, and
// a hold needs owner and expires_at columns.
func testLeaseMinHold(t *testing.T, h Harness) {
	_, ls := keyedLeases(t, h)
	ctx := ctxT(t)
	const ttl, hold = 10 * time.Second, 700 * time.Millisecond
	a, b := store.NewToken(), store.NewToken()

	la, err := ls.Acquire(ctx, "job", a, ttl)
	require.NoError(t, err)
	until := acquiredAt(la, ttl).Add(hold)
	ok, err := ls.Release(ctx, "job", b, until)
	require.NoError(t, err)
	require.False(t, ok, "someone else's release is a no-op, hold or not")
	ok, err = ls.Release(ctx, "job", a, until)
	require.NoError(t, err)
	require.True(t, ok)
	s, err := ls.Inspect(ctx, "job", time.Minute)
	require.NoError(t, err)
	require.Equal(t, a, s.Owner, "a held key keeps its owner until the hold ends")
	require.False(t, s.Expired)
	require.False(t, s.ExpiresAt.Before(until), "the expiry is the hold, never earlier")
	require.True(t, s.ExpiresAt.Before(la.ExpiresAt), "the release shortened the lease to the hold")
	_, err = ls.Renew(ctx, "job", b, ttl)
	require.ErrorIs(t, err, dialect.ErrLeaseLost)

	// Acquirers are refused until the hold ends on the database clock, then
	// one gets the key. Its acquisition time comes from the database too.
	refused := 0
	var lb store.LeaseInfo
	for start := time.Now(); ; {
		lb, err = ls.Acquire(ctx, "job", b, ttl)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, dialect.ErrLeaseHeld)
		// The hold, the columns' resolution and a loaded machine: the
		// lease's own 10 s TTL is far beyond them.
		require.Less(t, time.Since(start), hold+5*time.Second, "the key is still taken after the %v hold (refused %d times)", hold, refused)
		refused++
		time.Sleep(20 * time.Millisecond)
	}
	require.Positive(t, refused, "the first acquisition after the release was refused")
	require.False(t, acquiredAt(lb, ttl).Before(until), "acquired at %v, before the hold's end %v", acquiredAt(lb, ttl), until)
	require.Equal(t, la.Fence+1, lb.Fence)

	// A hold already over frees the key at once.
	lc, err := ls.Acquire(ctx, "past", a, ttl)
	require.NoError(t, err)
	ok, err = ls.Release(ctx, "past", a, acquiredAt(lc, ttl).Add(-time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	s, err = ls.Inspect(ctx, "past", time.Minute)
	require.NoError(t, err)
	require.Empty(t, s.Owner, "freed")
	ld, err := ls.Acquire(ctx, "past", b, ttl)
	require.NoError(t, err, "nothing holds a key whose hold is over")
	require.Equal(t, lc.Fence+1, ld.Fence)

	// A hold equal to the stored expiry leaves the row as it was: the
	// release still reports it (MySQL counts changed rows, not matched).
	le, err := ls.Acquire(ctx, "same", a, ttl)
	require.NoError(t, err)
	ok, err = ls.Release(ctx, "same", a, le.ExpiresAt)
	require.NoError(t, err)
	require.True(t, ok, "a hold that changes nothing is still a release by the holder")
	_, err = ls.Acquire(ctx, "same", b, ttl)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld)

	t.Run("Finish", func(t *testing.T) { testLeaseMinHoldFinish(t, h) })
	t.Run("NeedsExpiresAt", func(t *testing.T) { testLeaseMinHoldNeedsExpiry(t, h) })
}

// testLeaseMinHoldFinish: Finish under a hold sets the status at once and
// holds the key like Release.
func testLeaseMinHoldFinish(t *testing.T, h Harness) {
	d, db := h.Open(t)
	ctx := ctxT(t)
	def := store.TableDef{Table: "xxx_task_hold", PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
		{Name: "id", Type: store.TypeSerial},
		{Name: "status", Type: store.TypeInt},
		{Name: "lock_at", Type: store.TypeTime},
		{Name: "expires_at", Type: store.TypeTime},
		{Name: "lock_owner", Type: store.TypeText, Len: 40},
	}}
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	q := func(s string) string { x, err := store.QuoteIdent(d, "t", s); require.NoError(t, err); return x }
	_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (1)", q("xxx_task_hold"), q("status")))
	require.NoError(t, err)
	ls, err := store.OpenLeases(d, dialect.LeaseTable{Table: "xxx_task_hold", Key: "id", Owner: "lock_owner", LockedAt: "lock_at", ExpiresAt: "expires_at", Status: "status"})
	require.NoError(t, err)
	require.NoError(t, ls.VerifySchema(ctx))
	const ttl = 10 * time.Second
	a, b := store.NewToken(), store.NewToken()
	la, err := ls.Acquire(ctx, int64(1), a, ttl)
	require.NoError(t, err)
	until := acquiredAt(la, ttl).Add(time.Minute)
	ok, err := ls.Finish(ctx, int64(1), b, 2, until)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = ls.Finish(ctx, int64(1), a, 2, until)
	require.NoError(t, err)
	require.True(t, ok)
	var status int64
	require.NoError(t, db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s", q("status"), q("xxx_task_hold"))).Scan(&status))
	require.EqualValues(t, 2, status, "the status is written at once")
	_, err = ls.Acquire(ctx, int64(1), b, ttl)
	require.ErrorIs(t, err, dialect.ErrLeaseHeld, "held until the hold ends")
	ok, err = ls.ForceRelease(ctx, int64(1))
	require.NoError(t, err)
	require.True(t, ok, "an operator can end a hold")
	_, err = ls.Acquire(ctx, int64(1), b, ttl)
	require.NoError(t, err)
}

// testLeaseMinHoldNeedsExpiry: without an expires_at column a hold is
// refused before any statement runs, and the lease stays held.
func testLeaseMinHoldNeedsExpiry(t *testing.T, h Harness) {
	d, _ := h.Open(t)
	ctx := ctxT(t)
	def := store.LeaseTableDef("cl_lease_nohold", 64)
	def.Columns = append(def.Columns[:3], def.Columns[4:]...) // drop expires_at
	def.Indexes = nil
	ddl, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	spec := store.KeyedLeaseTable("cl_lease_nohold", 64)
	spec.ExpiresAt = ""
	ls, err := store.OpenLeases(d, spec)
	require.NoError(t, err)
	a := store.NewToken()
	la, err := ls.Acquire(ctx, "k", a, time.Minute)
	require.NoError(t, err)
	_, err = ls.Release(ctx, "k", a, la.ExpiresAt)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	s, err := ls.Inspect(ctx, "k", time.Minute)
	require.NoError(t, err)
	require.Equal(t, a, s.Owner, "a refused hold changes nothing")
}

package dialecttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// testLeaseWithoutOwner runs leases on the cron story's task table as it is,
// xxx_task(id, status, lock_at), with no owner column: a lease is held by
// its stamp, the lock_at value it wrote. It must stay exclusive (a second
// acquirer waits the TTL out; a stale stamp neither renews, releases nor
// finishes the new holder's lease) and let its holder finish the task (set
// its status) only while it holds it. Both a microsecond and a whole-second
// lock_at column are tried.
func testLeaseWithoutOwner(t *testing.T, h Harness) {
	for _, typ := range []store.ColumnType{store.TypeTime, store.TypeTimeSeconds} {
		t.Run(fmt.Sprintf("type%d", typ), func(t *testing.T) {
			d, db := h.Open(t)
			ctx := ctxT(t)
			def := store.TableDef{Table: "xxx_task", PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
				{Name: "id", Type: store.TypeInt, NotNull: true},
				{Name: "status", Type: store.TypeInt, NotNull: true, Default: ptr(st(t, 0))},
				{Name: "lock_at", Type: typ},
			}}
			ddl, err := store.CreateTableDDL(d, def)
			require.NoError(t, err)
			require.NoError(t, store.ExecDDL(ctx, d, ddl))
			q := func(s string) string { x, err := store.QuoteIdent(d, "t", s); require.NoError(t, err); return x }
			_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (1), (2)", q("xxx_task"), q("id")))
			require.NoError(t, err)
			ls, err := store.OpenLeases(d, dialect.LeaseTable{Table: "xxx_task", Key: "id", LockedAt: "lock_at", Status: "status"})
			require.NoError(t, err)
			require.NoError(t, ls.VerifySchema(ctx))
			status := func(id int) int64 {
				var v int64
				require.NoError(t, db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = %d", q("status"), q("xxx_task"), q("id"), id)).Scan(&v))
				return v
			}

			const ttl = time.Second
			start := time.Now()
			a, err := ls.Acquire(ctx, 1, "", ttl)
			require.NoError(t, err)
			require.NotEmpty(t, a.Owner, "the stamp is the owner token")
			_, err = ls.Acquire(ctx, 1, "", ttl)
			require.ErrorIs(t, err, dialect.ErrLeaseHeld)
			a2, err := ls.Renew(ctx, 1, a.Owner, ttl)
			require.NoError(t, err)
			s, err := ls.Inspect(ctx, 1, time.Minute)
			require.NoError(t, err)
			require.Equal(t, a2.Owner, s.Owner)
			ok, err := ls.Release(ctx, 1, "12345", time.Time{})
			require.NoError(t, err)
			require.False(t, ok, "a wrong stamp releases nothing")
			_, err = ls.Renew(ctx, 1, "not a stamp", ttl)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig)

			// B waits the TTL out; then A's stamp is stale.
			var b store.LeaseInfo
			for {
				b, err = ls.Acquire(ctx, 1, "", ttl)
				if err == nil {
					break
				}
				require.ErrorIs(t, err, dialect.ErrLeaseHeld)
				require.Less(t, time.Since(start), ttl+5*time.Second)
				time.Sleep(20 * time.Millisecond)
			}
			require.GreaterOrEqual(t, time.Since(start), ttl, "no second holder before the TTL")
			require.NotEqual(t, a2.Owner, b.Owner, "a new holder never has the old stamp")
			_, err = ls.Renew(ctx, 1, a2.Owner, ttl)
			require.ErrorIs(t, err, dialect.ErrLeaseLost)
			ok, err = ls.Finish(ctx, 1, a2.Owner, 9, time.Time{})
			require.NoError(t, err)
			require.False(t, ok, "a stale holder cannot finish the task")
			ok, err = ls.Release(ctx, 1, a2.Owner, time.Time{})
			require.NoError(t, err)
			require.False(t, ok, "nor free it")
			require.EqualValues(t, 0, status(1))

			ok, err = ls.Finish(ctx, 1, b.Owner, 2, time.Time{})
			require.NoError(t, err)
			require.True(t, ok)
			require.EqualValues(t, 2, status(1), "the holder finished the task")
			s, err = ls.Inspect(ctx, 1, time.Minute)
			require.NoError(t, err)
			require.Empty(t, s.Owner, "finishing frees the lease")
			c, err := ls.Acquire(ctx, 1, "", ttl)
			require.NoError(t, err, "a finished task's lease is free")
			ok, err = ls.Release(ctx, 1, c.Owner, time.Time{})
			require.NoError(t, err)
			require.True(t, ok)
		})
	}
}

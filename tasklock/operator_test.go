package tasklock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
)

// MissingColumnsDDL advises, for the lease columns a task table lacks,
// what AlterTaskTableDDL does: the owner and fence columns as statements
// that run as printed, the expiry column as a comment to complete. Once
// they are added it advises nothing and the table passes Verify; a table
// that does not exist is an error.
func TestMissingColumnsDDL(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		ctx := ctxT(t)
		d := e.open(t)
		require.NoError(t, store.ExecDDL(ctx, d, mustDDL(t, d, store.TableDef{
			Table: "xxx_task", PrimaryKey: []string{"id"},
			Columns: []store.ColumnDef{{Name: "id", Type: store.TypeSerial, NotNull: true}, {Name: "lock_at", Type: store.TypeTime}},
		})))
		spec := tasklock.TaskTable("xxx_task")
		spec.Fence, spec.ExpiresAt = "lock_fence", "lock_expires_at"
		k, err := tasklock.New(d, tasklock.Config{Table: spec, TTL: time.Minute})
		require.NoError(t, err)
		require.ErrorIs(t, k.Verify(ctx), dialect.ErrInvalidConfig, "the lease columns are missing")

		stmts, err := k.MissingColumnsDDL(ctx)
		require.NoError(t, err)
		require.Len(t, stmts, 3, "%q", stmts)
		require.Contains(t, stmts[0], "lock_owner")
		require.Contains(t, stmts[1], "lock_fence")
		require.True(t, strings.HasPrefix(stmts[2], "-- ALTER TABLE"), stmts[2])
		require.Contains(t, stmts[2], "lock_expires_at")
		require.Contains(t, stmts[2], "<the type of")
		require.NoError(t, store.ExecDDL(ctx, d, stmts[:2]), "the statements run as printed")
		b, err := store.Of(d)
		require.NoError(t, err)
		exp, err := b.AddColumnsDDL(ctx, "xxx_task", []store.ColumnDef{{Name: "lock_expires_at", Type: store.TypeTime}})
		require.NoError(t, err)
		require.NoError(t, store.ExecDDL(ctx, d, exp), "the completed comment: lock_at's type")

		stmts, err = k.MissingColumnsDDL(ctx)
		require.NoError(t, err)
		require.Empty(t, stmts)
		require.NoError(t, k.Verify(ctx))

		missing, err := tasklock.New(d, tasklock.Config{Table: tasklock.TaskTable("no_such_task"), TTL: time.Minute})
		require.NoError(t, err)
		_, err = missing.MissingColumnsDDL(ctx)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	})
}

func mustDDL(t *testing.T, d dialect.Dialect, def store.TableDef) []string {
	t.Helper()
	stmts, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	return stmts
}

// Held lists the leases with an owner, soonest expiry first, on the
// database clock; ReleaseOwner frees a lease only for the owner given, and
// the holder then finds its lease lost.
func TestHeldAndReleaseOwner(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		ctx := ctxT(t)
		short, d := setup(t, e, tasklock.Config{TTL: 20 * time.Second})
		long, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable(leaseTable), TTL: time.Minute})
		require.NoError(t, err)
		b, err := long.Acquire(ctx, "b")
		require.NoError(t, err)
		_, err = short.Acquire(ctx, "a")
		require.NoError(t, err)
		_, err = short.ForceRelease(ctx, "a")
		require.NoError(t, err)
		a, err := short.Acquire(ctx, "a") // fence 2
		require.NoError(t, err)

		held, err := short.Held(ctx, 10)
		require.NoError(t, err)
		require.Len(t, held, 2)
		require.Equal(t, "a", held[0].Key, "soonest expiry first")
		require.Equal(t, a.Owner(), held[0].Owner)
		require.EqualValues(t, 2, held[0].Fence)
		require.True(t, held[0].Exists)
		require.False(t, held[0].Expired)
		require.InDelta(t, 20*time.Second, held[0].Remaining, float64(10*time.Second))
		require.Equal(t, "b", held[1].Key)
		require.Equal(t, b.Owner(), held[1].Owner)
		require.Greater(t, held[1].Remaining, held[0].Remaining)
		one, err := short.Held(ctx, 1)
		require.NoError(t, err)
		require.Len(t, one, 1)
		_, err = short.Held(ctx, 0)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)

		ok, err := short.ReleaseOwner(ctx, "b", a.Owner())
		require.NoError(t, err)
		require.False(t, ok, "b is not a's owner's")
		require.NoError(t, b.Renew(ctx), "b is still held")
		_, err = short.ReleaseOwner(ctx, "b", "")
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		ok, err = short.ReleaseOwner(ctx, "b", b.Owner())
		require.NoError(t, err)
		require.True(t, ok)
		require.ErrorIs(t, b.Renew(ctx), dialect.ErrLeaseLost, "the holder finds its lease gone")
		held, err = short.Held(ctx, 10)
		require.NoError(t, err)
		require.Len(t, held, 1)
		require.Equal(t, "a", held[0].Key)
	})
}

// Without an expiry column, Inspect and Held reckon a lease's expiry as its
// lock time plus the Locker's TTL, on the database clock, whatever the lock
// time column holds (a native time, unix seconds or unix milliseconds):
// Held lists every lease with a holder, oldest lock first, and both say
// whether the TTL has passed, as an acquisition would find it.
func TestHeldWithoutExpiry(t *testing.T) {
	t.Parallel()
	for _, te := range testengine.All {
		t.Run(te.Name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			c := testengine.Open(t, te, 0)
			for _, f := range []struct {
				name, typ string
				format    dialect.TimeFormat
			}{{"native", "", dialect.TimeNative}, {"seconds", "INT", dialect.UnixSeconds}, {"millis", "BIGINT", dialect.UnixMillis}} {
				table := "xxx_task_" + f.name
				def := store.TableDef{Table: table, PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
					{Name: "id", Type: store.TypeInt, NotNull: true},
					{Name: "status", Type: store.TypeInt, NotNull: true},
				}}
				if f.typ == "" {
					def.Columns = append(def.Columns, store.ColumnDef{Name: "lock_at", Type: store.TypeTime})
				}
				ddl, err := store.CreateTableDDL(c.Dialect, def)
				require.NoError(t, err)
				require.NoError(t, store.ExecDDL(ctx, c.Dialect, ddl))
				exec := func(q string) {
					_, err := c.DB.ExecContext(ctx, q)
					require.NoError(t, err, q)
				}
				if f.typ != "" {
					exec("ALTER TABLE " + table + " ADD COLUMN lock_at " + f.typ + " NULL")
				}
				exec("INSERT INTO " + table + " (id, status) VALUES (1, 0), (2, 0), (3, 0)")
				spec := tasklock.TaskTableNoOwner(table)
				spec.LockedAtFormat = f.format
				long, err := tasklock.New(c.Dialect, tasklock.Config{Table: spec, TTL: time.Minute})
				require.NoError(t, err)
				require.NoError(t, long.Verify(ctx), f.name)

				before := time.Now()
				l1, err := long.Acquire(ctx, 1)
				require.NoError(t, err)
				l2, err := long.Acquire(ctx, 2)
				require.NoError(t, err)
				after := time.Now()

				held, err := long.Held(ctx, 10)
				require.NoError(t, err, f.name)
				require.Len(t, held, 2, "%s: free rows are not listed", f.name)
				byKey := map[any]tasklock.Holder{}
				for _, h := range held {
					byKey[h.Key] = h
					require.True(t, h.Exists)
					require.False(t, h.Expired, f.name)
					require.Greater(t, h.Remaining, 50*time.Second, f.name)
					require.LessOrEqual(t, h.Remaining, time.Minute, f.name)
					// The expiry is the lock time plus the TTL; the lock time
					// was written within the window of the acquisitions, to
					// the column's resolution, give or take the clocks'.
					require.WithinRange(t, h.ExpiresAt, before.Add(time.Minute-2*time.Second), after.Add(time.Minute+2*time.Second), f.name)
				}
				require.Equal(t, l1.Owner(), byKey[int64(1)].Owner, f.name)
				require.Equal(t, l2.Owner(), byKey[int64(2)].Owner, f.name)
				require.False(t, held[0].ExpiresAt.After(held[1].ExpiresAt), "%s: oldest lock first", f.name)
				one, err := long.Held(ctx, 1)
				require.NoError(t, err)
				require.Len(t, one, 1)

				st, err := long.Inspect(ctx, 1)
				require.NoError(t, err)
				require.Equal(t, byKey[int64(1)].ExpiresAt, st.ExpiresAt, "%s: Inspect and Held agree", f.name)
				require.False(t, st.Expired)
				require.Equal(t, "0", st.Status, "Inspect reads the task's status")
				free, err := long.Inspect(ctx, 3)
				require.NoError(t, err)
				require.True(t, free.Exists)
				require.Empty(t, free.Owner)
				require.True(t, free.ExpiresAt.IsZero(), "a free lease has no expiry")

				// By a 1 s TTL the same leases are past their expiry once
				// the database clock has moved on (whole seconds: by 2.5 s).
				short, err := tasklock.New(c.Dialect, tasklock.Config{Table: spec, TTL: time.Second})
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					held, err := short.Held(ctx, 10)
					require.NoError(t, err)
					require.Len(t, held, 2)
					st, err := short.Inspect(ctx, 2)
					require.NoError(t, err)
					return held[0].Expired && held[1].Expired && held[0].Remaining == 0 && st.Expired
				}, 10*time.Second, 100*time.Millisecond, f.name)
				still, err := long.Inspect(ctx, 2)
				require.NoError(t, err)
				require.False(t, still.Expired, "%s: by its own TTL the lease is held", f.name)

				// A finished task: free, with the status Finish set.
				ok, err := l1.Finish(ctx, 2)
				require.NoError(t, err)
				require.True(t, ok)
				done, err := long.Inspect(ctx, 1)
				require.NoError(t, err)
				require.Equal(t, tasklock.State{Exists: true, Status: "2"}, done, f.name)
				held, err = long.Held(ctx, 10)
				require.NoError(t, err)
				require.Len(t, held, 1, "%s: a finished task is not held", f.name)
				require.Equal(t, l2.Owner(), held[0].Owner)
			}
		})
	}
}

package tasklock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// createTaskTable creates the cron story's xxx_task(id, status, lock_at)
// (plus an expires_at column when withExpiry), then adds the owner and
// fence columns with the statements AlterTaskTableDDL prints, and returns
// the lease spec for it.
func createTaskTable(t *testing.T, d dialect.Dialect, withExpiry bool) dialect.LeaseTable {
	t.Helper()
	ctx := ctxT(t)
	pending, err := store.StatusOf("Pending", "PENDING")
	require.NoError(t, err)
	def := store.TableDef{
		Table: "xxx_task",
		Columns: []store.ColumnDef{
			{Name: "id", Type: store.TypeSerial, NotNull: true},
			{Name: "status", Type: store.TypeText, Len: 32, NotNull: true, Default: &pending},
			{Name: "lock_at", Type: store.TypeTime},
			// Used only by seedTasks, see there.
			{Name: "seed_expires_at", Type: store.TypeTime},
		},
		PrimaryKey: []string{"id"},
	}
	spec := tasklock.TaskTable("xxx_task")
	spec.Fence = "lock_fence"
	if withExpiry {
		// The expiry column must have lock_at's type, which the advice
		// leaves to the table's owner: create it with the table.
		def.Columns = append(def.Columns, store.ColumnDef{Name: "lock_expires_at", Type: store.TypeTime})
		spec.ExpiresAt = "lock_expires_at"
	}
	stmts, err := store.CreateTableDDL(d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, stmts))

	advice, err := tasklock.AlterTaskTableDDL(d, spec)
	require.NoError(t, err)
	var run []string
	for _, s := range advice {
		if !strings.HasPrefix(s, "--") {
			run = append(run, s)
		}
	}
	require.Len(t, run, 2, "owner and fence")
	require.NoError(t, store.ExecDDL(ctx, d, run), "the advice runs as printed")
	return spec
}

// seedTasks inserts task rows through a keyed lease on the task table (the
// insert-if-absent path), so the test holds no SQL of its own.
func seedTasks(t *testing.T, d dialect.Dialect, spec dialect.LeaseTable, ids ...int64) {
	t.Helper()
	ctx := ctxT(t)
	spec.Keyed = true
	k, err := tasklock.New(d, tasklock.Config{Table: spec, TTL: time.Second})
	require.NoError(t, err)
	for _, id := range ids {
		_, err := k.Acquire(ctx, id)
		require.NoError(t, err)
		_, err = k.ForceRelease(ctx, id)
		require.NoError(t, err)
	}
}

func TestTaskTable(t *testing.T) {
	t.Parallel()
	for _, withExpiry := range []bool{false, true} {
		name := "lock_at only"
		if withExpiry {
			name = "with expires_at"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachEngine(t, func(t *testing.T, e engine) {
				d := e.open(t)
				spec := createTaskTable(t, d, withExpiry)
				seedTasks(t, d, spec, 1, 2)
				const ttl = 400 * time.Millisecond
				k, err := tasklock.New(d, tasklock.Config{Table: spec, TTL: ttl})
				require.NoError(t, err)
				ctx := ctxT(t)

				_, err = k.Acquire(ctx, int64(99))
				require.ErrorIs(t, err, dialect.ErrKeyNotFound)
				_, err = k.Acquire(ctx, "1")
				require.ErrorIs(t, err, dialect.ErrInvalidConfig)

				a, err := k.Acquire(ctx, 1)
				require.NoError(t, err)
				_, err = k.Acquire(ctx, int64(1))
				require.ErrorIs(t, err, dialect.ErrLeaseHeld)
				other, err := k.Acquire(ctx, 2)
				require.NoError(t, err, "rows are independent")
				require.NoError(t, a.Renew(ctx))

				// Without renewal the row expires after the TTL (database
				// clock) and is taken over with a larger fence.
				require.True(t, closedWithin(a.Done(), 2*ttl))
				var b *tasklock.Lease
				require.Eventually(t, func() bool {
					b, err = k.Acquire(ctx, 1)
					return err == nil
				}, 5*time.Second, 10*time.Millisecond)
				require.Greater(t, b.Fence(), a.Fence())
				require.ErrorIs(t, a.Renew(ctx), dialect.ErrLeaseLost)
				ok, err := a.Release(ctx)
				require.NoError(t, err)
				require.False(t, ok)
				ok, err = b.Release(ctx)
				require.NoError(t, err)
				require.True(t, ok)
				_, err = other.Release(ctx)
				require.NoError(t, err)

				require.NoError(t, k.Do(ctx, 1, func(ctx context.Context, l *tasklock.Lease) error {
					require.Equal(t, b.Fence()+1, l.Fence())
					return nil
				}))
			})
		})
	}
}

func TestSchemaHelpers(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		d := e.open(t)
		ctx := ctxT(t)
		stmts, err := tasklock.CreateTableDDL(d, "my_leases")
		require.NoError(t, err)
		require.NotEmpty(t, stmts)
		q, err := store.QuoteIdent(d, "Table", "my_leases")
		require.NoError(t, err)
		require.Contains(t, stmts[0], q)
		require.NoError(t, tasklock.CreateTable(ctx, d, "my_leases"))
		require.NoError(t, tasklock.CreateTable(ctx, d, "my_leases"), "idempotent")

		_, err = tasklock.CreateTableDDL(d, "bad name")
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		require.ErrorIs(t, tasklock.CreateTable(ctx, d, "x;y"), dialect.ErrInvalidConfig)
		_, err = tasklock.CreateTableDDL(nil, "t")
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)

		spec := tasklock.TaskTable("xxx_task")
		spec.ExpiresAt, spec.Fence = "expires_at", "fence"
		advice, err := tasklock.AlterTaskTableDDL(d, spec)
		require.NoError(t, err)
		require.Len(t, advice, 3)
		for i, col := range []string{"lock_owner", "expires_at", "fence"} {
			qc, err := store.QuoteIdent(d, "Column", col)
			require.NoError(t, err)
			require.Contains(t, advice[i], qc)
		}
		require.True(t, strings.HasPrefix(advice[1], "--"), "the expiry type is left to the user")
		spec.Owner = "owner`; DROP"
		_, err = tasklock.AlterTaskTableDDL(d, spec)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		require.Contains(t, err.Error(), "Owner")
	})
}

package tasklock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
)

// The cron story's task table as it is, with no owner column: lockers in
// contention, renewing with KeepAlive on a whole-second lock_at column, take
// turns and never hold the task at once; a holder finishes the task only
// while it holds it.
func TestTaskTableWithoutOwner(t *testing.T) {
	t.Parallel()
	for _, te := range testengine.All {
		t.Run(te.Name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			c := testengine.Open(t, te, 0)
			def := store.TableDef{Table: "xxx_task", PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
				{Name: "id", Type: store.TypeInt, NotNull: true},
				{Name: "status", Type: store.TypeInt, NotNull: true},
				{Name: "lock_at", Type: store.TypeTimeSeconds},
			}}
			ddl, err := store.CreateTableDDL(c.Dialect, def)
			require.NoError(t, err)
			require.NoError(t, store.ExecDDL(ctx, c.Dialect, ddl))
			_, err = c.DB.ExecContext(ctx, "INSERT INTO xxx_task (id, status) VALUES (7, 0)")
			require.NoError(t, err)
			cfg := tasklock.Config{Table: tasklock.TaskTableNoOwner("xxx_task"), TTL: 1500 * time.Millisecond}

			var holding, turns, overlaps atomic.Int64
			var wg sync.WaitGroup
			stop := time.Now().Add(5 * time.Second)
			for range 3 {
				k, err := tasklock.New(c.Dialect, cfg)
				require.NoError(t, err)
				wg.Go(func() {
					for time.Now().Before(stop) {
						l, err := k.Acquire(ctx, 7)
						if err != nil {
							require.ErrorIs(t, err, dialect.ErrLeaseHeld)
							time.Sleep(20 * time.Millisecond)
							continue
						}
						if holding.Add(1) != 1 {
							overlaps.Add(1)
						}
						turns.Add(1)
						defer l.KeepAlive(context.Background())()
						// Hold past the TTL now and then: renewals keep it.
						select {
						case <-time.After(time.Duration(200+rand.IntN(1500)) * time.Millisecond):
						case <-l.Done():
						}
						holding.Add(-1)
						_, err = l.Release(context.Background())
						require.NoError(t, err)
					}
				})
			}
			wg.Wait()
			require.Zero(t, overlaps.Load(), "two holders at once")
			require.Greater(t, turns.Load(), int64(2), "the lockers took turns")

			k, err := tasklock.New(c.Dialect, cfg)
			require.NoError(t, err)
			l, err := k.Acquire(ctx, 7)
			require.NoError(t, err)
			ok, err := l.Finish(ctx, 2)
			require.NoError(t, err)
			require.True(t, ok)
			var status int
			require.NoError(t, c.DB.QueryRowContext(ctx, "SELECT status FROM xxx_task WHERE id = 7").Scan(&status))
			require.Equal(t, 2, status)
			ok, err = l.Finish(ctx, 3)
			require.NoError(t, err)
			require.False(t, ok, "a finished lease finishes nothing more")
		})
	}
}

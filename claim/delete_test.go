package claim_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// TestRunDeleteDone runs Run on a table whose done rows are deleted
// (DeleteDone) or moved to an archive (Archive), with the pipeline on and
// off: every row is handled, a failed row is retried and then deleted, and
// at the end the table holds no row of the claimer's scope while the
// archive holds each one once, as done.
func TestRunDeleteDone(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		for _, archive := range []bool{false, true} {
			for _, mode := range []claim.Pipeline{claim.PipelineOn, claim.PipelineOff} {
				t.Run(fmt.Sprintf("archive=%v/%v", archive, mode), func(t *testing.T) {
					const n = 60
					arch := ""
					_, cfg := jobSetup(t, e, s, n, func(cfg *claim.Config) {
						cfg.DeleteDone, cfg.MaxAttempts = true, 3
						if archive {
							arch = cfg.Table + "_done"
							cfg.Archive = arch
							a := *cfg
							a.Table, a.Archive, a.DeleteDone = arch, "", false
							createTable(t, e, a)
						}
					})
					c, err := claim.New(e.d, cfg, jobFields)
					require.NoError(t, err)
					var mu sync.Mutex
					seen := map[int64]int{}
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					errc := make(chan error, 1)
					go func() {
						errc <- c.Run(ctx, claim.WorkerConfig[job]{
							Workers: 3, PollMin: time.Millisecond, PollMax: 20 * time.Millisecond, Pipeline: mode,
							Handler: func(ctx context.Context, r claim.Row[job]) error {
								id := r.ID.(int64)
								mu.Lock()
								seen[id]++
								first := seen[id] == 1
								mu.Unlock()
								if first && id%7 == 0 {
									return errors.New("transient")
								}
								return nil
							},
						})
					}()
					left := func(table string) int64 {
						var k int64
						require.NoError(t, e.raw.QueryRowContext(context.Background(),
							e.rebind(fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE task_id = ?", table)), 42).Scan(&k))
						return k
					}
					waitFor(t, "every row of the scope deleted", func() bool { return left(cfg.Table) == 0 })
					cancel()
					require.NoError(t, <-errc)
					requireStats(t, c, 0, 0, 0, 0)
					require.EqualValues(t, 3, func() int64 {
						var k int64
						require.NoError(t, e.raw.QueryRowContext(context.Background(), fmt.Sprintf("SELECT COUNT(*) FROM %s", cfg.Table)).Scan(&k))
						return k
					}(), "the other scope's rows are untouched")
					mu.Lock()
					defer mu.Unlock()
					require.Len(t, seen, n)
					for id, k := range seen {
						if id%7 == 0 {
							require.Equal(t, 2, k, "row %d failed once, then done", id)
						} else {
							require.Equal(t, 1, k, "row %d", id)
						}
					}
					if archive {
						require.EqualValues(t, n, left(arch), "each row archived once")
						var notDone int64
						require.NoError(t, e.raw.QueryRowContext(context.Background(),
							fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE status <> 'DONE' OR token IS NOT NULL", arch)).Scan(&notDone))
						require.Zero(t, notDone, "archived as done, without a token")
					}
				})
			}
		}
	})
}

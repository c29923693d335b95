package claim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// Environment of the helper processes of the multi-process tests.
const (
	envRole     = "CLAIMLOCK_HELPER_ROLE"
	envKind     = "CLAIMLOCK_HELPER_KIND"
	envDSN      = "CLAIMLOCK_HELPER_DSN"
	envTable    = "CLAIMLOCK_HELPER_TABLE"
	envStrategy = "CLAIMLOCK_HELPER_STRATEGY"
	envOut      = "CLAIMLOCK_HELPER_OUT"
)

// holding is one interval during which a token held a row, as seen by the
// worker: from just after its claim returned to just before the statement
// that gave the row up. The true holding interval contains it, so two of
// these overlapping for one row would prove a double hold.
type holding struct {
	ID    int64  `json:"id"`
	Token string `json:"tok"`
	Start int64  `json:"s"`
	End   int64  `json:"e"`
	Acked bool   `json:"a"`
}

type workerReport struct {
	Holdings []holding `json:"holdings"`
	Errors   []string  `json:"errors"`
	Retries  int64     `json:"retries"`
	Claims   int       `json:"claims"`
}

func overlapConfig(table string, s dialect.Strategy) claim.Config {
	return claim.Config{
		ClaimTable:  dialect.ClaimTable{Table: table, Scope: []string{"task_id"}, Attempts: "attempts"},
		ScopeValues: []any{1}, Strategy: s, BatchSize: 100,
	}
}

// overlapWorkers runs n claim loops until nothing is pending or processing
// in scope, recording every holding. About one batch in twenty releases its
// last rows instead of acking them, so rows are also claimed more than once.
func overlapWorkers(ctx context.Context, c *claim.Claimer[struct{}], n int) workerReport {
	var mu sync.Mutex
	var rep workerReport
	fail := func(err error) {
		mu.Lock()
		rep.Errors = append(rep.Errors, err.Error())
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			var local []holding
			claims := 0
			defer func() {
				mu.Lock()
				rep.Holdings = append(rep.Holdings, local...)
				rep.Claims += claims
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				b, err := c.Claim(ctx)
				start := time.Now().UnixNano()
				if err != nil {
					fail(fmt.Errorf("claim: %w (retryable: %v)", err, dialect.IsRetryable(err)))
					return
				}
				if b.Len() == 0 {
					st, err := c.Stats(ctx)
					if err != nil {
						fail(err)
						return
					}
					if st.Pending == 0 && st.Processing == 0 {
						return
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				claims++
				// Real workers process their rows between claims; without
				// this the claimers of one process can monopolise a
				// token-update convoy on PostgreSQL (plain FOR UPDATE makes
				// the waiters of each batch come back empty) and starve the
				// other processes, which would weaken what the test shows.
				time.Sleep(time.Millisecond)
				ids := b.IDs()
				keep := len(ids)
				if rand.IntN(20) == 0 {
					keep = len(ids) - 1 - rand.IntN(len(ids))
				}
				end := time.Now().UnixNano()
				if err := b.Ack(ctx, ids[:keep]...); err != nil {
					fail(fmt.Errorf("ack: %w (retryable: %v)", err, dialect.IsRetryable(err)))
					return
				}
				relEnd := time.Now().UnixNano()
				if n, err := b.Release(ctx); err != nil || n != int64(len(ids)-keep) {
					fail(fmt.Errorf("release %d rows: released %d: %v", len(ids)-keep, n, err))
					return
				}
				for i, id := range ids {
					h := holding{ID: id.(int64), Token: b.Token(), Start: start, End: end, Acked: i < keep}
					if !h.Acked {
						h.End = relEnd
					}
					local = append(local, h)
				}
			}
		})
	}
	wg.Wait()
	return rep
}

// TestHelperProcess is a child role of the multi-process tests; it does
// nothing when run directly.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(envRole) != "overlap" {
		t.Skip("helper process for the multi-process tests")
	}
	ctx := context.Background()
	e, closeFn, err := openDSN(ctx, os.Getenv(envKind), os.Getenv(envDSN), dialect.Options{})
	require.NoError(t, err)
	defer closeFn()
	s, err := strconv.Atoi(os.Getenv(envStrategy))
	require.NoError(t, err)
	c, err := claim.New[struct{}](e.d, overlapConfig(os.Getenv(envTable), dialect.Strategy(s)), nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(os.Getenv(envOut)+".ready", nil, 0o600))
	rep := overlapWorkers(ctx, c, 4)
	rep.Retries = store.Retries(e.d)
	out, err := json.Marshal(rep)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(os.Getenv(envOut), out, 0o600))
}

// overlapRows is 20,000 rows, 100,000 with CLAIMLOCK_LONG=1; SQLite under
// the race detector (the engine itself is instrumented) takes 4,000.
func overlapRows(kind string) int {
	if os.Getenv("CLAIMLOCK_LONG") == "1" {
		return 100_000
	}
	if raceEnabled && kind == "sqlite" {
		return 4_000
	}
	return 20_000
}

// TestNeverOverlap claims one table from 16 goroutines here and 2 more
// processes at once and proves that no row was ever held by two tokens at
// the same time, that every row was acked exactly once, and that nothing is
// left pending or processing.
func TestNeverOverlap(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := context.Background()
		n := overlapRows(e.kind)
		cfg := overlapConfig(tableName("ov"), s)
		createTable(t, e, cfg)
		insertRows(t, e, cfg.Table, []string{"task_id"}, n+50, func(i int) []any {
			if i >= n {
				return []any{2} // another task's rows are never touched
			}
			return []any{1}
		})
		c, err := claim.New[struct{}](e.d, cfg, nil)
		require.NoError(t, err)

		dir := t.TempDir()
		var children []*exec.Cmd
		for i := range 2 {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), envRole+"=overlap", envKind+"="+e.kind, envDSN+"="+e.dsn,
				envTable+"="+cfg.Table, envStrategy+"="+strconv.Itoa(int(s)),
				envOut+"="+filepath.Join(dir, fmt.Sprintf("child%d.json", i)))
			children = append(children, cmd)
		}
		start := time.Now()
		for _, cmd := range children {
			require.NoError(t, cmd.Start())
		}
		// Start claiming once both children are ready, so that all three
		// processes really compete.
		for i := range children {
			waitFor(t, "child ready", func() bool {
				_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("child%d.json.ready", i)))
				return err == nil
			})
		}
		rep := overlapWorkers(ctx, c, 16)
		for i, cmd := range children {
			err := cmd.Wait()
			require.NoError(t, err, "child %d", i)
			var child workerReport
			raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("child%d.json", i)))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(raw, &child))
			require.Empty(t, child.Errors, "child %d", i)
			t.Logf("child %d: %d claims", i, child.Claims)
			if strings.HasPrefix(e.kind, "postgres") && s == dialect.StrategyTokenUpdate {
				// Token-update on PostgreSQL (plain FOR UPDATE, LIMIT
				// applied before locking) forms a convoy: the waiters of a
				// batch come back empty and fresh arrivals win, so one
				// process can starve another. It stays exclusive, which is
				// what this case proves; the multi-process competition is
				// proven by the other strategies and engines (PostgreSQL's
				// default is SKIP LOCKED).
			} else {
				require.NotZero(t, child.Claims, "child %d claimed nothing: the test would prove less than it says", i)
			}
			rep.Holdings = append(rep.Holdings, child.Holdings...)
			rep.Claims += child.Claims
			rep.Retries += child.Retries
		}
		elapsed := time.Since(start)
		require.Empty(t, rep.Errors, "no error, retryable or not, reaches the caller")

		byRow := map[int64][]holding{}
		for _, h := range rep.Holdings {
			byRow[h.ID] = append(byRow[h.ID], h)
		}
		require.Len(t, byRow, n, "every row of the task was claimed")
		reclaimed := 0
		for id, hs := range byRow {
			slices.SortFunc(hs, func(a, b holding) int { return int(a.Start - b.Start) })
			acked := 0
			for i, h := range hs {
				if h.Acked {
					acked++
				}
				if i > 0 {
					require.Less(t, hs[i-1].End, h.Start, "row %d held by %s and %s at once", id, hs[i-1].Token, h.Token)
					require.NotEqual(t, hs[i-1].Token, h.Token)
				}
			}
			require.Equal(t, 1, acked, "row %d acked exactly once", id)
			require.True(t, hs[len(hs)-1].Acked, "row %d: the ack is its last holding", id)
			reclaimed += len(hs) - 1
		}
		st, err := c.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, store.Stats{Done: int64(n)}, store.Stats{Pending: st.Pending, Processing: st.Processing, Done: st.Done, Failed: st.Failed, Other: st.Other})
		t.Logf("%s/%s: %d rows, %d claims (%d re-claims after release) by 16 goroutines + 2 processes in %v: %.0f rows/s; %d internal retries",
			e.kind, s, n, rep.Claims, reclaimed, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), rep.Retries+store.Retries(e.d))
	})
}

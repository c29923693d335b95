package claim_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
)

// A scope view claims, counts and reports only its own scope's rows,
// through the parent's store; the parent is left as it was.
func TestClaimerScope(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := ctxT(t)
		var mu sync.Mutex
		var scopes [][]any // ScopeValues of the claim events
		c, _ := jobSetup(t, e, s, 12, func(cfg *claim.Config) {
			watch(cfg, func(ev observe.Event) {
				if ev.Op == claim.OpClaim || ev.Op == claim.OpAck {
					mu.Lock()
					scopes = append(scopes, ev.ScopeValues)
					mu.Unlock()
				}
			})
		})
		v, err := c.Scope(7)
		require.NoError(t, err)
		require.Equal(t, []any{7}, v.ScopeValues())
		require.Equal(t, []any{42}, c.ScopeValues())
		b, err := v.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, b.Len(), "the 3 rows of task 7")
		for _, r := range b.Rows() {
			require.Equal(t, "other", r.Value.Payload)
		}
		requireStats(t, v, 0, 3, 0, 0)
		requireStats(t, c, 12, 0, 0, 0)
		require.NoError(t, b.AckAll(ctx))
		requireStats(t, v, 0, 0, 3, 0)
		empty, err := v.Claim(ctx)
		require.NoError(t, err)
		require.Zero(t, empty.Len())
		mu.Lock()
		require.Equal(t, [][]any{{7}, {7}, {7}}, scopes, "claim, ack, claim: reported with the view's scope")
		mu.Unlock()
		// A view of a view replaces the values again.
		back, err := v.Scope(42)
		require.NoError(t, err)
		b, err = back.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 10, b.Len())
		require.NoError(t, b.AckAll(ctx))
		requireStats(t, c, 2, 0, 10, 0)
	})
}

// Bad scope values are refused at once, naming the value, both by Scope
// and by New.
func TestClaimerScopeInvalid(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	c, cfg := jobSetup(t, e, dialect.StrategyTokenUpdate, 1, nil)
	for _, tc := range []struct {
		values []any
		msg    string
	}{
		{nil, `0 value(s) for 1 Scope column(s) [task_id]`},
		{[]any{1, 2}, `2 value(s) for 1 Scope column(s) [task_id]`},
		{[]any{nil}, `ScopeValues[0]: value of "task_id" is nil`},
		{[]any{[]int{1}}, `ScopeValues[0]: value of "task_id", of type []int, cannot be a query parameter`},
		{[]any{struct{ ID int }{1}}, `of type struct { ID int }, cannot be a query parameter`},
	} {
		v, err := c.Scope(tc.values...)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%v", tc.values)
		require.ErrorContains(t, err, tc.msg)
		require.Nil(t, v)
		bad := cfg
		bad.ScopeValues = tc.values
		_, err = claim.New(e.d, bad, jobFields)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		require.ErrorContains(t, err, tc.msg)
	}
	// Values database/sql converts are accepted: named kinds, times.
	type taskID int64
	for _, v := range []any{taskID(7), int8(7), "7", time.Now(), []byte("7")} {
		_, err := c.Scope(v)
		require.NoError(t, err, "%T", v)
	}
}

// Run refuses Scopes it cannot serve, at once.
func TestRunScopesInvalid(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	c, cfg := jobSetup(t, e, dialect.StrategyTokenUpdate, 1, nil)
	h := func(context.Context, claim.Row[job]) error { return nil }
	for _, tc := range []struct {
		c   *claim.Claimer[job]
		w   claim.WorkerConfig[job]
		msg string
	}{
		{c, claim.WorkerConfig[job]{Handler: h, Scopes: [][]any{{42}, {7}, {42}}}, "WorkerConfig.Scopes[2]: repeats Scopes[0]"},
		{c, claim.WorkerConfig[job]{Handler: h, Scopes: [][]any{{42}, {7, 8}}}, "(WorkerConfig.Scopes[1])"},
		{c, claim.WorkerConfig[job]{Handler: h, ScopeInFlight: -1}, "negative field"},
		{c, claim.WorkerConfig[job]{Handler: h, ScopeInFlight: 5, Pipeline: claim.PipelineOn}, "PipelineOn cannot serve"},
		{func() *claim.Claimer[job] {
			un := cfg
			un.Scope, un.ScopeValues = nil, nil
			u, err := claim.New(e.d, un, jobFields)
			require.NoError(t, err)
			return u
		}(), claim.WorkerConfig[job]{Handler: h, Scopes: [][]any{{42}}}, "the table has no Scope columns"},
	} {
		took, err := runFor(t, tc.c, tc.w, time.Minute)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, tc.msg)
		require.ErrorContains(t, err, tc.msg)
		require.Less(t, took, 30*time.Second)
	}
	requireStats(t, c, 1, 0, 0, 0)
}

// Run with Scopes, without Drain, serves every listed scope (and no other)
// until cancelled, and picks up rows that come while it polls.
func TestRunScopes(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		c, cfg := jobSetup(t, e, s, 25, nil)
		insertRows(t, e, cfg.Table, []string{"task_id", "payload"}, 4, func(int) []any { return []any{9, "nine"} })
		var mu sync.Mutex
		seen := map[int64]int{}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			errc <- c.Run(ctx, claim.WorkerConfig[job]{
				Workers: 3, Scopes: [][]any{{42}, {7}}, ScopeInFlight: 4,
				PollMin: time.Millisecond, PollMax: 20 * time.Millisecond,
				Handler: func(_ context.Context, r claim.Row[job]) error {
					mu.Lock()
					seen[r.ID.(int64)]++
					mu.Unlock()
					return nil
				},
			})
		}()
		seven, err := c.Scope(7)
		require.NoError(t, err)
		awaitStats(t, "task 42 done", c.Stats, func(st claim.Stats) bool { return st.Done == 25 }, nil)
		awaitStats(t, "task 7 done", seven.Stats, func(st claim.Stats) bool { return st.Done == 3 }, nil)
		// A row inserted while Run polls is served too.
		insertRows(t, e, cfg.Table, []string{"task_id", "payload"}, 1, func(int) []any { return []any{7, "late"} })
		awaitStats(t, "the late row done", seven.Stats, func(st claim.Stats) bool { return st.Done == 4 }, nil)
		cancel()
		require.NoError(t, <-errc)
		nine, err := c.Scope(9)
		require.NoError(t, err)
		requireStats(t, nine, 4, 0, 0, 0)
		mu.Lock()
		defer mu.Unlock()
		ids := slices.Sorted(func(yield func(int64) bool) {
			for id := range seen {
				if !yield(id) {
					return
				}
			}
		})
		require.Len(t, ids, 29, "25 rows of task 42, 4 of task 7")
		for _, id := range ids {
			require.Equal(t, 1, seen[id], "row %d handled exactly once", id)
		}
	})
}

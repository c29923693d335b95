package claim_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/await"
	"github.com/claimlock/claimlock/observe"
)

// pauseSetup is jobSetup (12 rows of task 42, 3 of task 7, a claimer of
// task 42) with a pause table of its own, read before every claim unless
// mod says otherwise, and the Pauses on it.
func pauseSetup(t *testing.T, e *env, s dialect.Strategy, mod func(*claim.Config)) (*claim.Claimer[job], claim.Config, *claim.Pauses) {
	t.Helper()
	pt := tableName("pauses")
	require.NoError(t, claim.CreatePauseTable(context.Background(), e.d, pt))
	c, cfg := jobSetup(t, e, s, 12, func(cfg *claim.Config) {
		cfg.PauseTable, cfg.PauseRefresh = pt, -1
		if mod != nil {
			mod(cfg)
		}
	})
	p, err := claim.NewPauses(e.d, pt)
	require.NoError(t, err)
	require.NoError(t, p.Verify(context.Background()))
	return c, cfg, p
}

// A paused scope claims nothing while another scope of the table is
// claimed; the pause survives a new claimer (a restart) and holds; a
// resume makes its rows claimable again; a table-wide pause stops every
// scope, and is separate from the scope's pause.
func TestPauseScope(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := ctxT(t)
		var paused atomic.Int64
		c, cfg, p := pauseSetup(t, e, s, func(cfg *claim.Config) {
			watch(cfg, func(ev observe.Event) {
				if ev.Op == claim.OpPaused && ev.Err == nil && ev.Table == cfg.Table {
					paused.Add(1)
				}
			})
		})
		ok, err := p.Pause(ctx, cfg.Table, []any{42}, claim.PauseNote{Reason: "provider down", By: "ops"})
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = p.Pause(ctx, cfg.Table, []any{"42"}, claim.PauseNote{Reason: "again"})
		require.NoError(t, err)
		require.False(t, ok, "42 and \"42\" name the same scope: paused already")

		_, err = c.Claim(ctx)
		require.ErrorIs(t, err, claim.ErrPaused)
		require.False(t, dialect.IsPermanent(err), "a pause is not a misconfiguration")
		require.Equal(t, int64(1), paused.Load(), "an OpPaused event")
		other, err := c.Scope(7)
		require.NoError(t, err)
		b, err := other.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, b.Len(), "the other scope is claimed")
		require.NoError(t, b.AckAll(ctx))
		requireStats(t, c, 12, 0, 0, 0)

		list, err := p.List(ctx, 10)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, cfg.Table, list[0].Table)
		require.Equal(t, []string{"42"}, list[0].Scope)
		require.Equal(t, "provider down", list[0].Reason, "the first note stays")
		require.Equal(t, "ops", list[0].By)
		require.GreaterOrEqual(t, list[0].Age, time.Duration(0))
		require.Less(t, list[0].Age, time.Minute)

		// A restart: a new claimer sees the pause in the table.
		again, err := claim.New(e.d, cfg, jobFields)
		require.NoError(t, err)
		_, err = again.Claim(ctx)
		require.ErrorIs(t, err, claim.ErrPaused)
		if h, herr := again.Holder(claim.HoldConfig{}); herr == nil {
			_, err = h.Hold(ctx)
			require.ErrorIs(t, err, claim.ErrPaused, "held claims honour pauses too")
		}

		ok, err = p.Resume(ctx, cfg.Table, []any{42})
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = p.Resume(ctx, cfg.Table, []any{42})
		require.NoError(t, err)
		require.False(t, ok, "nothing left to resume")
		b, err = again.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 10, b.Len(), "resumed")
		require.NoError(t, b.AckAll(ctx))

		// The whole table: every scope and every view.
		_, err = p.Pause(ctx, cfg.Table, nil, claim.PauseNote{})
		require.NoError(t, err)
		_, err = c.Claim(ctx)
		require.ErrorIs(t, err, claim.ErrPaused)
		_, err = other.Claim(ctx)
		require.ErrorIs(t, err, claim.ErrPaused)
		_, err = p.Pause(ctx, cfg.Table, []any{42}, claim.PauseNote{})
		require.NoError(t, err)
		ok, err = p.Resume(ctx, cfg.Table, nil)
		require.NoError(t, err)
		require.True(t, ok)
		_, err = c.Claim(ctx)
		require.ErrorIs(t, err, claim.ErrPaused, "the scope's own pause stays after the table's ends")
		_, err = p.Resume(ctx, cfg.Table, []any{42})
		require.NoError(t, err)
		b, err = c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, b.Len())
		require.NoError(t, b.AckAll(ctx))
		requireStats(t, c, 0, 0, 12, 0)
	})
}

// A claimer trusts the pauses it read for PauseRefresh: a pause made
// after its last read reaches it only once that is over, while a new
// claimer reads it at once. A pause of another table changes nothing.
// The bound holds on every engine: a claim that starts PauseRefresh after
// Pause returned takes nothing, and one that starts PauseRefresh after
// Resume returned claims again.
func TestPauseRefresh(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e := open(t, en)
			ctx := ctxT(t)
			c, cfg, p := pauseSetup(t, e, dialect.StrategyTokenUpdate, func(cfg *claim.Config) { cfg.PauseRefresh = time.Hour })
			_, err := p.Pause(ctx, "other_table", nil, claim.PauseNote{})
			require.NoError(t, err)
			b, err := c.Claim(ctx) // reads the pauses: none of this table
			require.NoError(t, err)
			require.Equal(t, 10, b.Len())
			require.NoError(t, b.AckAll(ctx))
			_, err = p.Pause(ctx, cfg.Table, nil, claim.PauseNote{})
			require.NoError(t, err)
			b, err = c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, b.Len(), "within its hour the claimer has not read the pause")
			_, err = b.Release(ctx)
			require.NoError(t, err)
			fresh, err := claim.New(e.d, cfg, jobFields)
			require.NoError(t, err)
			_, err = fresh.Claim(ctx)
			require.ErrorIs(t, err, claim.ErrPaused)

			// The bound itself, with a short refresh: the claimer reads
			// the pause before its first claim, then trusts that read.
			const refresh = 150 * time.Millisecond
			cfg.PauseRefresh = refresh
			short, err := claim.New(e.d, cfg, jobFields)
			require.NoError(t, err)
			_, err = short.Claim(ctx)
			require.ErrorIs(t, err, claim.ErrPaused)
			_, err = p.Resume(ctx, cfg.Table, nil)
			require.NoError(t, err)
			time.Sleep(refresh)
			b, err = short.Claim(ctx)
			require.NoError(t, err, "a claim starting PauseRefresh after Resume returned sees it")
			require.Equal(t, 2, b.Len())
			_, err = b.Release(ctx)
			require.NoError(t, err)
			_, err = p.Pause(ctx, cfg.Table, nil, claim.PauseNote{})
			require.NoError(t, err)
			time.Sleep(refresh)
			_, err = short.Claim(ctx)
			require.ErrorIs(t, err, claim.ErrPaused, "a claim starting PauseRefresh after Pause returned sees it")
		})
	}
}

// A claimer whose pause table does not exist fails its claims (it never
// claims without knowing), and bad pause settings are refused by New.
func TestPauseConfig(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	ctx := ctxT(t)
	c, _ := jobSetup(t, e, dialect.StrategyTokenUpdate, 2, func(cfg *claim.Config) { cfg.PauseTable = "no_such_pauses" })
	_, err := c.Claim(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "the pause table is verified with the claim table")
	require.ErrorContains(t, err, "no_such_pauses does not exist")
	require.NotErrorIs(t, err, claim.ErrPaused)
	require.ErrorIs(t, c.Verify(ctx), dialect.ErrInvalidConfig)
	err = c.Run(ctx, claim.WorkerConfig[job]{Handler: func(context.Context, claim.Row[job]) error { return nil }})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "Run stops at once")
	requireStats(t, c, 2, 0, 0, 0)
	base := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs"}}
	for _, tc := range []struct {
		mod func(*claim.Config)
		msg string
	}{
		{func(c *claim.Config) { c.PauseRefresh = time.Second }, "PauseRefresh"},
		{func(c *claim.Config) { c.PauseTable = "bad name" }, "PauseTable"},
		{func(c *claim.Config) { c.PauseTable = "JOBS" }, "is the claim table"},
	} {
		cfg := base
		tc.mod(&cfg)
		_, err := claim.New[job](e.d, cfg, nil)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
		require.ErrorContains(t, err, tc.msg)
	}
	p, err := claim.NewPauses(e.d, "")
	require.NoError(t, err)
	require.Equal(t, claim.DefaultPauseTable, p.Table())
	_, err = p.Pause(ctx, "bad name", nil, claim.PauseNote{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = p.Pause(ctx, "jobs", []any{""}, claim.PauseNote{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "an empty value would read as the whole table")
	_, err = claim.NewPauses(e.d, "bad name")
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

// Scope values keep their text in a pause, commas and backslashes escaped.
func TestPauseScopeText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		values []any
		want   string
	}{
		{nil, ""},
		{[]any{42}, "42"},
		{[]any{int64(42), "a,b"}, `42,a\,b`},
		{[]any{`c\d`, true}, `c\\d,true`},
		{[]any{time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))}, "2026-01-02T02:04:05Z"},
	} {
		got, err := claim.PauseScope(tc.values...)
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	_, err := claim.PauseScope(struct{}{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

// Run serving Scopes skips a paused scope while it serves the others:
// without Drain it polls the paused one with backoff (no hot loop) and
// takes its rows once resumed; a drain leaves it and says so.
func TestPauseRunScopes(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := ctxT(t)
		var pausedClaims atomic.Int64
		c, cfg, p := pauseSetup(t, e, s, func(cfg *claim.Config) {
			cfg.PauseRefresh = 0 // the default: a second
			watch(cfg, func(ev observe.Event) {
				if ev.Op == claim.OpPaused {
					pausedClaims.Add(1)
				}
			})
		})
		_, err := p.Pause(ctx, cfg.Table, []any{42}, claim.PauseNote{})
		require.NoError(t, err)
		var handled42 atomic.Int64
		w := claim.WorkerConfig[job]{
			Workers: 2, Scopes: [][]any{{42}, {7}}, PollMin: 20 * time.Millisecond, PollMax: 100 * time.Millisecond,
			Handler: func(_ context.Context, r claim.Row[job]) error {
				if r.Value.Payload != "other" {
					handled42.Add(1)
				}
				return nil
			},
		}
		// A drain serves task 7 and leaves the paused task 42.
		dw := w
		dw.Drain = true
		_, err = runFor(t, c, dw, time.Minute)
		require.ErrorIs(t, err, claim.ErrPaused)
		require.NotErrorIs(t, err, context.DeadlineExceeded)
		other, err := c.Scope(7)
		require.NoError(t, err)
		requireStats(t, other, 0, 0, 3, 0)
		requireStats(t, c, 12, 0, 0, 0)
		require.Zero(t, handled42.Load())

		// Without Drain: the paused scope waits, polled with backoff.
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		runErr := make(chan error, 1)
		start := time.Now()
		go func() { runErr <- c.Run(rctx, w) }()
		time.Sleep(500 * time.Millisecond)
		n := pausedClaims.Load()
		require.Less(t, n, int64(200), "Run polls a paused scope with backoff: %d paused claims in %v", n, time.Since(start))
		require.Zero(t, handled42.Load(), "nothing of the paused scope")
		_, err = p.Resume(ctx, cfg.Table, []any{42})
		require.NoError(t, err)
		await.Until(t, "the resumed scope is processed", time.Minute, func() (bool, string) {
			return handled42.Load() == 12, fmt.Sprintf("%d handled", handled42.Load())
		})
		cancel()
		require.NoError(t, <-runErr)
		requireStats(t, c, 0, 0, 12, 0)
	})
}

// Holder.Run waits while its scope is paused and holds its rows once
// resumed.
func TestPauseHolderRun(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := ctxT(t)
		c, cfg, p := pauseSetup(t, e, s, nil)
		h, err := c.Holder(claim.HoldConfig{})
		if errors.Is(err, dialect.ErrNotSupported) {
			t.Skipf("no held claims on %s: %v", e.kind, err)
		}
		require.NoError(t, err)
		_, err = p.Pause(ctx, cfg.Table, []any{42}, claim.PauseNote{})
		require.NoError(t, err)
		var held atomic.Int64
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		runErr := make(chan error, 1)
		go func() {
			runErr <- h.Run(rctx, func(ctx context.Context, b *claim.Held[job]) error {
				held.Add(int64(b.Len()))
				return nil
			})
		}()
		time.Sleep(300 * time.Millisecond)
		require.Zero(t, held.Load(), "nothing held while paused")
		_, err = p.Resume(ctx, cfg.Table, []any{42})
		require.NoError(t, err)
		await.Until(t, "the resumed scope is held and committed", time.Minute, func() (bool, string) {
			return held.Load() == 12, fmt.Sprintf("%d held", held.Load())
		})
		cancel()
		require.NoError(t, <-runErr)
	})
}

// A pause made while Run pipelines (the ack of a batch claims the next)
// stops the next claim without losing the ack: the batch's rows are done,
// none is left processing, and the rest waits for the resume.
func TestPausePipelined(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		ctx := ctxT(t)
		c, cfg, p := pauseSetup(t, e, s, nil)
		var handled atomic.Int64
		w := claim.WorkerConfig[job]{
			Pipeline: claim.PipelineOn, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
			Handler: func(ctx context.Context, r claim.Row[job]) error {
				if handled.Add(1) == 1 {
					// Paused during the first batch: its ack+claim finds it.
					if _, err := p.Pause(ctx, cfg.Table, []any{42}, claim.PauseNote{}); err != nil {
						return err
					}
				}
				return nil
			},
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		runErr := make(chan error, 1)
		go func() { runErr <- c.Run(rctx, w) }()
		await.Until(t, "the first batch is acked", time.Minute, func() (bool, string) {
			st, err := c.Stats(ctx)
			return err == nil && st.Done == 10, fmt.Sprintf("%+v %v", st, err)
		})
		select {
		case err := <-runErr:
			if errors.Is(err, dialect.ErrNotSupported) {
				t.Skipf("%s does not pipeline: %v", e.kind, err)
			}
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		requireStats(t, c, 2, 0, 10, 0)
		require.Equal(t, int64(10), handled.Load())
		_, err := p.Resume(ctx, cfg.Table, []any{42})
		require.NoError(t, err)
		await.Until(t, "the rest after the resume", time.Minute, func() (bool, string) {
			return handled.Load() == 12, fmt.Sprintf("%d handled", handled.Load())
		})
		cancel()
		require.NoError(t, <-runErr)
		requireStats(t, c, 0, 0, 12, 0)
	})
}

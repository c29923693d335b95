package zombie_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/zombie"
)

// The tests in this file run the code snippets of the documentation
// (README.md and the zombie package doc) verbatim, between the "snippet"
// markers, on every engine; the repository's snippet test checks that the
// documentation still holds exactly this code.

// deadWorker claims every row of cc's table with a claimer that never acks,
// and moves their claim time an hour back: a worker that died long ago.
func deadWorker(t *testing.T, e *env, cc claim.Config, n int) {
	t.Helper()
	ctx := context.Background()
	createTable(t, e, cc, false)
	insertRows(t, e, cc.Table, "PENDING", n, 100)
	c, err := claim.New[struct{}](e.d, cc, nil)
	require.NoError(t, err)
	b, err := c.Claim(ctx)
	require.NoError(t, err)
	require.Equal(t, n, b.Len())
	back := map[string]string{
		testengine.SQLite:   "claimed_at - 3600000",
		testengine.MySQL:    "claimed_at - INTERVAL 1 HOUR",
		testengine.Postgres: "claimed_at - interval '1 hour'",
	}[e.kind]
	e.exec(t, fmt.Sprintf("UPDATE %s SET claimed_at = %s", cc.Table, back))
}

// pendingSoon waits until n rows of cc's table are pending again.
func pendingSoon(t *testing.T, e *env, cc claim.Config, n int64) {
	t.Helper()
	spec, err := cc.Resolve()
	require.NoError(t, err)
	cs, err := store.OpenClaims(e.d, spec)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := cs.Stats(context.Background(), nil)
		return err == nil && st.Pending == n
	}, 30*time.Second, 10*time.Millisecond)
}

func TestSnippetReadmeReaper(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		claimConfig := jobsConfig(50)
		deadWorker(t, e, claimConfig, 30)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		run := func() error {
			d := e.d
			// snippet: readme-zombie
			r, err := zombie.New(d, claimConfig, zombie.Config{Timeout: time.Minute})
			if err != nil {
				return err
			}
			go r.Run(ctx, 15*time.Second) // bounded sweeps with jitter; Config.Locker makes it one per fleet
			// end snippet
			return nil
		}
		require.NoError(t, run())
		pendingSoon(t, e, claimConfig, 30)
	})
}

func TestSnippetGodocReaper(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		claimCfg := jobsConfig(50)
		deadWorker(t, e, claimCfg, 10)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		d := e.d
		// snippet: godoc-zombie
		r, err := zombie.New(d, claimCfg, zombie.Config{Timeout: 5 * time.Minute})
		go r.Run(ctx, 30*time.Second)
		// end snippet
		require.NoError(t, err)
		pendingSoon(t, e, claimCfg, 10)
	})
}

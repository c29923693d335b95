package claim_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
)

// TestKeepAliveAfterOutage: a keep-alive whose heartbeat an outage failed
// tries again within moments, so the rows are kept as soon as the database
// is back, not one interval later (the reaper's clock ran all the while).
func TestKeepAliveAfterOutage(t *testing.T) {
	t.Parallel()
	const interval = 3 * time.Second
	e, sw := openFaulty(t)
	var mu sync.Mutex
	var beats []time.Time // good background heartbeats
	_, cfg := jobSetup(t, e, dialect.StrategyTokenUpdate, 3, func(cfg *claim.Config) {
		cfg.ReapTimeout = 30 * time.Second
		cfg.HeartbeatInterval = interval
		cfg.Observer = observe.Func(func(_ context.Context, ev observe.Event) {
			if ev.Op == claim.OpHeartbeat && ev.Err == nil && ev.Background {
				mu.Lock()
				beats = append(beats, time.Now())
				mu.Unlock()
			}
		})
	})
	c, err := claim.New(e.d, cfg, jobFields)
	require.NoError(t, err)
	ctx := context.Background()
	b, err := c.Claim(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, b.Len())
	claimed := time.Now()
	stop := b.KeepAlive(ctx)
	defer stop()

	// Away from before the first tick until half an interval after it.
	sw.Down()
	time.Sleep(time.Until(claimed.Add(interval + interval/2)))
	sw.Up()
	back := time.Now()
	// Without the retry the next good heartbeat comes at the second tick,
	// half an interval from now.
	deadline := back.Add(interval/2 - 200*time.Millisecond)
	for {
		mu.Lock()
		n := len(beats)
		mu.Unlock()
		if n > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no heartbeat %v after the database came back (interval %v)", time.Since(back), interval)
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	first := beats[0]
	mu.Unlock()
	require.False(t, first.Before(back), "a heartbeat while the database was away")
	require.NoError(t, b.AckAll(ctx))
	require.Empty(t, b.Lost())
}

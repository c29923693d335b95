package redisintake_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/contrib/redisintake"
	"github.com/claimlock/claimlock/observe"
)

// Every Accept is reported as the coalescer reports its own, on the
// intake's dirty set, so that coalesce.AcceptResult (and the adapters)
// tell written, duplicate, stale and overloaded writes apart.
func TestObserveAccepts(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var events []observe.Event
	obs := observe.Func(func(_ context.Context, e observe.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	})
	b := sqliteBundle(t, redisintake.Config{MaxBacklog: 1, Observer: obs})
	ctx := context.Background()
	writes := []redisintake.Write{
		{Key: "u", Version: 2, State: state("u", 2)}, // written
		{Key: "u", Version: 2, State: state("u", 2)}, // a resend
		{Key: "u", Version: 1, State: state("u", 1)}, // stale
		{Key: "v", Version: 1, State: state("v", 1)}, // over the backlog of one dirty key
	}
	for _, w := range writes {
		_, _ = b.in.Accept(ctx, w)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, events, len(writes))
	for i, want := range []string{"recorded", "duplicate", "stale", "overloaded"} {
		e := events[i]
		require.Equal(t, want, coalesce.AcceptResult(e), "write %d", i)
		require.Equal(t, observe.SourceCoalesce, e.Source)
		require.Equal(t, coalesce.OpAccept, e.Op)
		require.Equal(t, b.prefix+"dirty", e.Table)
		require.Equal(t, writes[i].Key, e.Key)
		require.False(t, e.Start.IsZero())
		require.GreaterOrEqual(t, e.Duration, time.Duration(0))
	}
}

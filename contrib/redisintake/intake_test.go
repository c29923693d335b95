package redisintake_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/contrib/redisintake"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// sqliteBundle is a bundle on SQLite, for the tests of Redis's side.
func sqliteBundle(t *testing.T, cfg redisintake.Config) *bundle {
	t.Helper()
	rdb, prefix := newRedis(t)
	e, _ := testengine.ByName(testengine.SQLite)
	return setup(t, testengine.Open(t, e, 4), rdb, prefix, cfg)
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t, redisintake.Config{})
	for name, cfg := range map[string]redisintake.Config{
		"Source":     {Source: strings.Repeat("s", redisintake.MaxSourceLen+1)},
		"BatchSize":  {BatchSize: -1},
		"BatchSize ": {BatchSize: 10001},
		"MaxBacklog": {MaxBacklog: -1},
		"PollMax":    {PollMin: time.Second, PollMax: time.Millisecond},
	} {
		_, err := redisintake.New(b.rdb, b.co, cfg)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, name)
		require.ErrorContains(t, err, strings.TrimSpace(name))
	}
	_, err := redisintake.New(nil, b.co, redisintake.Config{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = redisintake.New(b.rdb, nil, redisintake.Config{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

// Accept: versions above the current one are written; a resend is a
// duplicate; older versions, and the current one with another state, are
// refused with coalesce's StaleError; out-of-bounds writes are refused
// before Redis is touched.
func TestAccept(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t, redisintake.Config{})
	ctx := context.Background()
	r, err := b.in.Accept(ctx, redisintake.Write{Key: "u", Version: 5, State: state("u", 5)})
	require.NoError(t, err)
	require.Equal(t, redisintake.Receipt{Key: "u", Version: 5}, r)

	r, err = b.in.Accept(ctx, redisintake.Write{Key: "u", Version: 5, State: state("u", 5)})
	require.NoError(t, err)
	require.True(t, r.Duplicate, "a resend of the current version")

	for _, w := range []redisintake.Write{
		{Key: "u", Version: 4, State: state("u", 4)},
		{Key: "u", Version: 5, State: []byte("another state")},
	} {
		_, err = b.in.Accept(ctx, w)
		var stale *coalesce.StaleError
		require.ErrorAs(t, err, &stale)
		require.ErrorIs(t, err, coalesce.ErrStale)
		require.Equal(t, coalesce.StaleError{Key: "u", Source: redisintake.DefaultSource, Seq: w.Version, Current: 5}, *stale)
	}
	_, err = b.in.Accept(ctx, redisintake.Write{Key: "u", Version: 9, State: state("u", 9)})
	require.NoError(t, err)
	accepted, persisted, err := b.in.Versions(ctx, "u")
	require.NoError(t, err)
	require.Equal(t, [2]int64{9, 0}, [2]int64{accepted, persisted})
	dirty, _, err := b.in.Backlog(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, dirty, "one dirty mark per key, however many writes")

	for _, w := range []redisintake.Write{
		{Key: "", Version: 1},
		{Key: strings.Repeat("k", coalesce.MaxKeyLen+1), Version: 1},
		{Key: "u", Version: 0},
		{Key: "u", Version: redisintake.MaxVersion + 1},
	} {
		_, err := b.in.Accept(ctx, w)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	}
	_, err = b.in.Accept(ctx, redisintake.Write{Key: "big", Version: redisintake.MaxVersion, State: []byte("x")})
	require.NoError(t, err)
	_, err = b.in.Accept(ctx, redisintake.Write{Key: "big", Version: redisintake.MaxVersion - 1, State: []byte("y")})
	require.ErrorIs(t, err, coalesce.ErrStale, "versions compare exactly up to MaxVersion")

	b.settle(t, ctx)
	for key, want := range map[string]int64{"u": 9, "big": redisintake.MaxVersion} {
		v, _, writes, found := b.stateOf(t, key)
		require.True(t, found, key)
		require.Equal(t, want, v, key)
		require.EqualValues(t, 1, writes, "%s: one drain, one state write", key)
	}
	accepted, persisted, err = b.in.Versions(ctx, "u")
	require.NoError(t, err)
	require.Equal(t, [2]int64{9, 9}, [2]int64{accepted, persisted})
	require.Zero(t, b.backwards.Load())
}

// MaxBacklog refuses writes of clean keys once that many keys are dirty,
// with coalesce's OverloadError; dirty keys still take writes.
func TestAcceptBackpressure(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t, redisintake.Config{MaxBacklog: 2, RetryAfter: 3 * time.Second})
	ctx := context.Background()
	for _, k := range []string{"a", "b"} {
		_, err := b.in.Accept(ctx, redisintake.Write{Key: k, Version: 1, State: state(k, 1)})
		require.NoError(t, err)
	}
	_, err := b.in.Accept(ctx, redisintake.Write{Key: "c", Version: 1, State: state("c", 1)})
	var over *coalesce.OverloadError
	require.ErrorAs(t, err, &over)
	require.ErrorIs(t, err, coalesce.ErrOverloaded)
	require.Equal(t, coalesce.OverloadError{RetryAfter: 3 * time.Second, Backlog: 2}, *over)
	_, err = b.in.Accept(ctx, redisintake.Write{Key: "a", Version: 2, State: state("a", 2)})
	require.NoError(t, err, "a dirty key takes writes")
	accepted, _, err := b.in.Versions(ctx, "c")
	require.NoError(t, err)
	require.Zero(t, accepted, "the refused write left nothing")

	b.settle(t, ctx)
	_, err = b.in.Accept(ctx, redisintake.Write{Key: "c", Version: 1, State: state("c", 1)})
	require.NoError(t, err, "accepted once the backlog drained")
}

// A write accepted while its key is being drained (after its previous
// version is in SQL, before the dirty mark is compared and deleted) keeps
// the key dirty, and the next drain moves it: nothing is lost.
func TestWriteDuringDrain(t *testing.T) {
	forEachEngine(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		_, err := b.in.Accept(ctx, redisintake.Write{Key: "u", Version: 1, State: state("u", 1)})
		require.NoError(t, err)
		hooked := 0
		redisintake.SetAfterRecord(b.in, func(ctx context.Context, key string, v int64) {
			if hooked++; hooked == 1 {
				require.EqualValues(t, 1, v)
				_, err := b.in.Accept(ctx, redisintake.Write{Key: "u", Version: 2, State: state("u", 2)})
				require.NoError(t, err)
			}
		})
		n, err := b.in.Drain(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		dirty, _, err := b.in.Backlog(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, dirty, "the write during the drain kept the key dirty")
		// Version 1 reaches the state first.
		_, err = b.f.Flush(ctx)
		require.NoError(t, err)
		v, st, _, _ := b.stateOf(t, "u")
		require.Equal(t, [2]any{int64(1), "u@1"}, [2]any{v, st})

		b.settle(t, ctx)
		require.Equal(t, 2, hooked)
		v, st, writes, _ := b.stateOf(t, "u")
		require.Equal(t, [3]any{int64(2), "u@2", int64(2)}, [3]any{v, st, writes})
		require.EqualValues(t, 2, b.count(t, "SELECT COUNT(*) FROM coalesce_changes WHERE change_key = ?", "u"))
		accepted, persisted, err := b.in.Versions(ctx, "u")
		require.NoError(t, err)
		require.Equal(t, [2]int64{2, 2}, [2]int64{accepted, persisted})
		require.Zero(t, b.backwards.Load())
	})
}

// A drain that stops between the SQL commit and the compare-and-delete in
// Redis (its context cancelled there) leaves the key dirty; the next
// drain records nothing twice, and the state holds the version once.
func TestDrainStoppedBeforeClean(t *testing.T) {
	forEachEngine(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		for _, k := range []string{"a", "b"} {
			_, err := b.in.Accept(ctx, redisintake.Write{Key: k, Version: 7, State: state(k, 7)})
			require.NoError(t, err)
		}
		dctx, cancel := context.WithCancel(ctx)
		redisintake.SetAfterRecord(b.in, func(context.Context, string, int64) { cancel() })
		_, err := b.in.Drain(dctx)
		require.ErrorIs(t, err, context.Canceled)
		require.EqualValues(t, 1, b.count(t, "SELECT COUNT(*) FROM coalesce_changes"), "the first key recorded, the round stopped")
		dirty, _, err := b.in.Backlog(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 2, dirty, "both keys still dirty in Redis")

		redisintake.SetAfterRecord(b.in, nil)
		b.settle(t, ctx)
		require.EqualValues(t, 2, b.count(t, "SELECT COUNT(*) FROM coalesce_changes"), "one change per key and version")
		for _, k := range []string{"a", "b"} {
			require.EqualValues(t, 1, b.count(t, "SELECT COUNT(*) FROM coalesce_changes WHERE event_id = ?", redisintake.EventID(redisintake.DefaultSource, k, 7)))
			v, st, writes, _ := b.stateOf(t, k)
			require.Equal(t, [3]any{int64(7), k + "@7", int64(1)}, [3]any{v, st, writes})
		}
	})
}

// Redis lost writes it had moved (here: its copy deleted and an older
// version written again): SQL keeps its newer state, the drain drops the
// older version's mark and raises the key's version in Redis to SQL's, so
// older versions are refused again; newer versions go through.
func TestRedisLostWrites(t *testing.T) {
	t.Parallel()
	var logged strings.Builder
	b := sqliteBundle(t, redisintake.Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	ctx := context.Background()
	_, err := b.in.Accept(ctx, redisintake.Write{Key: "u", Version: 4, State: state("u", 4)})
	require.NoError(t, err)
	b.settle(t, ctx)
	require.NoError(t, b.rdb.Del(ctx, b.prefix+"k:u").Err())
	_, err = b.in.Accept(ctx, redisintake.Write{Key: "u", Version: 3, State: state("u", 3)})
	require.NoError(t, err, "Redis alone cannot know version 4")
	b.settle(t, ctx)
	v, st, _, _ := b.stateOf(t, "u")
	require.Equal(t, [2]any{int64(4), "u@4"}, [2]any{v, st}, "SQL kept the newer state")
	accepted, persisted, err := b.in.Versions(ctx, "u")
	require.NoError(t, err)
	require.Equal(t, [2]int64{4, 4}, [2]int64{accepted, persisted}, "Redis learnt SQL's version")
	require.Contains(t, logged.String(), "Redis lost writes")
	require.Contains(t, logged.String(), "redis=3 sql=4")
	for _, w := range []redisintake.Write{{Key: "u", Version: 2, State: state("u", 2)}, {Key: "u", Version: 4, State: state("u", 3)}} {
		_, err = b.in.Accept(ctx, w)
		require.ErrorIs(t, err, coalesce.ErrStale, "version %d", w.Version)
	}
	_, err = b.in.Accept(ctx, redisintake.Write{Key: "u", Version: 5, State: state("u", 5)})
	require.NoError(t, err)
	b.settle(t, ctx)
	v, st, _, _ = b.stateOf(t, "u")
	require.Equal(t, [2]any{int64(5), "u@5"}, [2]any{v, st})
	require.Zero(t, b.backwards.Load())
}

// Concurrent writers of a few keys, versions from a shared counter per
// key (so they arrive out of order), each accepted write resent; two
// drains and two flushers run meanwhile. Every resend is a duplicate or
// stale, never a new write; at the end SQL holds, for every key, the
// highest version accepted with its state, and no fold ever found a newer
// version than the one it wrote.
func TestConcurrentWriters(t *testing.T) {
	forEachEngine(t, func(t *testing.T, b *bundle) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		keys := []string{"hot", "k1", "k2", "k3"}
		counters := make([]atomic.Int64, len(keys))
		var mu sync.Mutex
		best := map[string]int64{}
		var stale, dups atomic.Int64
		var bg sync.WaitGroup
		for range 2 {
			bg.Go(func() { assert.NoError(t, b.in.Run(ctx)) })
			bg.Go(func() { assert.NoError(t, b.f.Run(ctx)) })
		}
		var writers sync.WaitGroup
		for w := range 8 {
			writers.Go(func() {
				for i := range 150 {
					ki := 0
					if (w+i)%2 == 1 {
						ki = 1 + (w+i)%3
					}
					key := keys[ki]
					v := counters[ki].Add(1)
					wr := redisintake.Write{Key: key, Version: v, State: state(key, v)}
					r, err := b.in.Accept(ctx, wr)
					if errors.Is(err, coalesce.ErrStale) {
						stale.Add(1)
						continue
					}
					if !assert.NoError(t, err) || !assert.False(t, r.Duplicate) {
						return
					}
					mu.Lock()
					best[key] = max(best[key], v)
					mu.Unlock()
					r, err = b.in.Accept(ctx, wr)
					if errors.Is(err, coalesce.ErrStale) {
						stale.Add(1)
						continue
					}
					if !assert.NoError(t, err) || !assert.True(t, r.Duplicate, "a resend is never a new write") {
						return
					}
					dups.Add(1)
				}
			})
		}
		writers.Wait()
		deadline := time.Now().Add(60 * time.Second)
		for !b.idle(t, ctx) {
			require.True(t, time.Now().Before(deadline), "backlog not drained in 60 s")
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		bg.Wait()
		ctx = context.Background()
		var writes int64
		for _, key := range keys {
			v, st, w, found := b.stateOf(t, key)
			require.True(t, found, key)
			require.Equal(t, best[key], v, key)
			require.Equal(t, string(state(key, v)), st, key)
			writes += w
			accepted, persisted, err := b.in.Versions(ctx, key)
			require.NoError(t, err)
			require.Equal(t, [2]int64{best[key], best[key]}, [2]int64{accepted, persisted}, key)
		}
		require.Zero(t, b.backwards.Load(), "an older version met a newer one in SQL")
		t.Logf("%s: 1200 writes, %d stale, %d duplicates, %d state writes", b.c.Engine, stale.Load(), dups.Load(), writes)
		require.LessOrEqual(t, writes, 1200-stale.Load())
	})
}

package redisintake_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// Environment of the Redis the tests use.
const (
	// EnvRedisAddr is the address of a Redis server (host:port); default
	// 127.0.0.1:6379.
	envRedisAddr = "CLAIMLOCK_REDIS_ADDR"
	// EnvRequireRedis=1 makes an unreachable Redis a failure instead of a
	// skip.
	envRequireRedis = "CLAIMLOCK_REQUIRE_REDIS"
)

var redisSkips atomic.Int64

// TestMain runs a child process's role when it is one, else the tests,
// and reports the tests that skipped for want of a server.
func TestMain(m *testing.M) {
	if childMain() {
		return
	}
	defer func() {
		if n := redisSkips.Load(); n > 0 {
			fmt.Fprintf(os.Stderr, "redisintake: SKIPPED %d tests: no Redis at %s (set %s; %s=1 makes this a failure)\n",
				n, redisAddr(), envRedisAddr, envRequireRedis)
		}
	}()
	dbtest.Main(m)
}

func redisAddr() string {
	if a := os.Getenv(envRedisAddr); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// newRedis returns a client of the test Redis and a key prefix of the
// test's own (deleted with its keys when the test ends); without a Redis
// the test skips, or fails with CLAIMLOCK_REQUIRE_REDIS=1.
func newRedis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(), PoolSize: 16})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		msg := fmt.Sprintf("no Redis at %s (set %s): %v", redisAddr(), envRedisAddr, err)
		if os.Getenv(envRequireRedis) == "1" {
			t.Fatalf("%s; %s=1 makes this a failure", msg, envRequireRedis)
		}
		redisSkips.Add(1)
		t.Skipf("SKIPPING: %s", msg)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "claimlock-test:{" + hex.EncodeToString(b[:]) + "}:"
	t.Cleanup(func() {
		defer rdb.Close()
		ctx := context.Background()
		var keys []string
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		require.NoError(t, iter.Err())
		if len(keys) > 0 {
			require.NoError(t, rdb.Del(ctx, keys...).Err())
		}
	})
	return rdb, prefix
}

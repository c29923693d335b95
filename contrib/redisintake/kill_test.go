package redisintake_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/contrib/redisintake"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/zombie"
)

// A child process is this test binary re-run with envRole set: it drains
// and flushes, and SIGKILLs itself at a chosen point.
const (
	envRole   = "REDISINTAKE_TEST_ROLE" // "after-record" or "in-fold"
	envEngine = "REDISINTAKE_TEST_ENGINE"
	envDSN    = "REDISINTAKE_TEST_DSN"
	envPrefix = "REDISINTAKE_TEST_PREFIX"
	envKillAt = "REDISINTAKE_TEST_KILL_AT"
)

// The children heartbeat their claims ten times per reaper timeout.
const (
	killHeartbeat = 100 * time.Millisecond
	killTimeout   = time.Second
)

// childMain runs a child's role and exits; it returns false in the test
// process.
func childMain() bool {
	if os.Getenv(envRole) == "" {
		return false
	}
	if err := runChild(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// runChild drains and flushes until its kill point: with role
// after-record, the killAt-th key recorded in SQL, before its dirty mark
// is compared and deleted in Redis; with role in-fold, the killAt-th
// fold, after its state write and before its commit.
func runChild() error {
	ctx := context.Background()
	killAt, err := strconv.Atoi(os.Getenv(envKillAt))
	if err != nil {
		return err
	}
	var seen atomic.Int64
	point := func() {
		if seen.Add(1) == int64(killAt) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	c, closeDB, err := testengine.Connect(ctx, os.Getenv(envEngine), os.Getenv(envDSN), 4, dialect.Options{})
	if err != nil {
		return err
	}
	defer closeDB()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	co, err := coalesce.New(c.Dialect, c.DB, coalesce.Config{})
	if err != nil {
		return err
	}
	in, err := redisintake.New(rdb, co, redisintake.Config{Prefix: os.Getenv(envPrefix), BatchSize: 4})
	if err != nil {
		return err
	}
	fold := latestFold(c.Dollar, new(atomic.Int64))
	if os.Getenv(envRole) == "after-record" {
		redisintake.SetAfterRecord(in, func(context.Context, string, int64) { point() })
	} else {
		inner := fold
		fold = func(ctx context.Context, tx *sql.Tx, key string, chs []coalesce.Record) error {
			if err := inner(ctx, tx, key, chs); err != nil {
				return err
			}
			point()
			return nil
		}
	}
	f, err := co.Flusher(coalesce.FlusherConfig{Fold: fold, BatchSize: 3, PollMax: 20 * time.Millisecond, HeartbeatInterval: killHeartbeat})
	if err != nil {
		return err
	}
	errs := make(chan error, 2)
	go func() { errs <- in.Run(ctx) }()
	go func() { errs <- f.Run(ctx) }()
	return <-errs
}

// runUntilKilled runs a child in role on b's database and Redis prefix and
// waits until it has SIGKILLed itself.
func runUntilKilled(t *testing.T, b *bundle, role string, killAt int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envEngine+"="+b.c.Engine, envDSN+"="+b.c.DSN,
		envPrefix+"="+b.prefix, envKillAt+"="+strconv.Itoa(killAt))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%s child: %v", role, err)
		ws, _ := ee.Sys().(syscall.WaitStatus)
		require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "%s child ended with %v, not its SIGKILL", role, err)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s child did not reach its kill point %d in 60 s", role, killAt)
	}
}

// TestKillMidFlush: while writers write new versions of a dozen keys, a
// child that drains and flushes kills itself between a key's SQL commit
// and its compare-and-delete in Redis, then another in a fold before its
// commit. A reaper returns the dead flusher's keys, and a drain and a
// flusher in this process finish: every key's state in SQL is the latest
// version accepted, each version recorded at most once.
func TestKillMidFlush(t *testing.T) {
	forEachEngine(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		latest := make([]atomic.Int64, 12)
		write := func(i int) {
			key := "k" + strconv.Itoa(i)
			v := latest[i].Load() + 1
			_, err := b.in.Accept(ctx, redisintake.Write{Key: key, Version: v, State: state(key, v)})
			if assert.NoError(t, err) {
				latest[i].Store(v)
			}
		}
		for i := range latest {
			write(i)
		}
		var stop atomic.Bool
		var writers sync.WaitGroup
		writers.Go(func() {
			for n := 0; !stop.Load(); n++ {
				write(n % len(latest))
				time.Sleep(time.Millisecond)
			}
		})
		runUntilKilled(t, b, "after-record", 5)
		runUntilKilled(t, b, "in-fold", 4)
		stop.Store(true)
		writers.Wait()

		f, err := b.co.Flusher(coalesce.FlusherConfig{Fold: latestFold(b.c.Dollar, b.backwards), HeartbeatInterval: killHeartbeat})
		require.NoError(t, err)
		b.f = f
		reaper, err := zombie.New(b.c.Dialect, f.ClaimConfig(), zombie.Config{Timeout: killTimeout})
		require.NoError(t, err)
		deadline := time.Now().Add(30 * time.Second)
		for b.count(t, "SELECT COUNT(*) FROM coalesce_keys WHERE status = 'PROCESSING'") > 0 {
			require.True(t, time.Now().Before(deadline), "keys still processing")
			_, err := reaper.Sweep(ctx)
			require.NoError(t, err)
			time.Sleep(100 * time.Millisecond)
		}
		b.settle(t, ctx)
		var writes int64
		for i := range latest {
			key := "k" + strconv.Itoa(i)
			v, st, w, found := b.stateOf(t, key)
			require.True(t, found, key)
			require.Equal(t, latest[i].Load(), v, key)
			require.Equal(t, string(state(key, v)), st, key)
			writes += w
			require.Zero(t, b.count(t, "SELECT COUNT(*) FROM coalesce_changes WHERE change_key = ? AND folded_at IS NULL", key))
		}
		require.Zero(t, b.backwards.Load())
		t.Logf("%s: %d versions written, %d changes recorded, %d state writes", b.c.Engine,
			sum(latest), b.count(t, "SELECT COUNT(*) FROM coalesce_changes"), writes)
	})
}

func sum(vs []atomic.Int64) int64 {
	var s int64
	for i := range vs {
		s += vs[i].Load()
	}
	return s
}

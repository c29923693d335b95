package leader_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/leader"
	"github.com/claimlock/claimlock/tasklock"
)

const leaseTable = "claimlock_lease"

// forEachEngine runs fn as a parallel subtest per engine, on a fresh
// database with the lease table.
func forEachEngine(t *testing.T, fn func(t *testing.T, c *testengine.Conn)) {
	t.Helper()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			c := testengine.Open(t, e, 0)
			require.NoError(t, tasklock.CreateTable(context.Background(), c.Dialect, leaseTable))
			fn(t, c)
		})
	}
}

func newElector(t testing.TB, d dialect.Dialect, ttl time.Duration) *leader.Elector {
	t.Helper()
	el, err := leader.New(d, leader.Config{Table: tasklock.KeyTable(leaseTable), Name: "the-election", TTL: ttl, RetryInterval: ttl / 10})
	require.NoError(t, err)
	return el
}

// TestOneLeaderAtATime: four electors on one database; each term steps
// down after 100 ms, so leadership moves around. At no moment do two
// terms overlap, and fences strictly increase from term to term.
func TestOneLeaderAtATime(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var active, overlaps atomic.Int32
		var mu sync.Mutex
		var fences []int64
		var wg sync.WaitGroup
		els := make([]*leader.Elector, 4)
		for i := range els {
			els[i] = newElector(t, c.Dialect, time.Second)
			wg.Go(func() {
				err := els[i].Run(ctx, func(ctx context.Context, term leader.Term) error {
					if active.Add(1) > 1 {
						overlaps.Add(1)
					}
					defer active.Add(-1)
					assert.NoError(t, els[i].IsLeader(ctx)) // on Run's goroutine: no require
					mu.Lock()
					fences = append(fences, term.Fence)
					mu.Unlock()
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
					return nil
				})
				assert.NoError(t, err) // on a goroutine of wg: no require
			})
		}
		wg.Wait()
		require.Zero(t, overlaps.Load())
		require.GreaterOrEqual(t, len(fences), 5, "leadership should move around")
		for i := 1; i < len(fences); i++ {
			require.Greater(t, fences[i], fences[i-1], "fences %v", fences)
		}
		for _, el := range els {
			require.ErrorIs(t, el.IsLeader(ctx), leader.ErrNotLeader)
		}
		t.Logf("%s: %d terms, fences %d..%d", c.Engine, len(fences), fences[0], fences[len(fences)-1])
	})
}

// TestCampaign: Campaign holds leadership until its context ends; IsLeader
// says so on exactly one elector, and another takes over after the
// leader's campaign ends.
func TestCampaign(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		a, b := newElector(t, c.Dialect, time.Second), newElector(t, c.Dialect, time.Second)
		actx, acancel := context.WithCancel(context.Background())
		bctx, bcancel := context.WithCancel(context.Background())
		defer bcancel()
		done := make(chan error, 2)
		go func() { done <- a.Campaign(actx) }()
		require.Eventually(t, func() bool { return a.IsLeader(actx) == nil }, 5*time.Second, 10*time.Millisecond)
		go func() { done <- b.Campaign(bctx) }()
		time.Sleep(300 * time.Millisecond)
		require.ErrorIs(t, b.IsLeader(bctx), leader.ErrNotLeader)
		ta, ok := a.Leader()
		require.True(t, ok)
		acancel()
		require.NoError(t, <-done)
		require.ErrorIs(t, a.IsLeader(actx), leader.ErrNotLeader)
		require.Eventually(t, func() bool { return b.IsLeader(bctx) == nil }, 5*time.Second, 10*time.Millisecond)
		tb, ok := b.Leader()
		require.True(t, ok)
		require.Greater(t, tb.Fence, ta.Fence)
		bcancel()
		require.NoError(t, <-done)
	})
}

func TestConfigErrors(t *testing.T) {
	e, _ := testengine.ByName(testengine.SQLite)
	c := testengine.Open(t, e, 0)
	for _, cfg := range []leader.Config{
		{Table: tasklock.KeyTable(leaseTable), TTL: time.Second},
		{Table: tasklock.TaskTable("tasks"), Name: "x", TTL: time.Second},
		{Table: tasklock.KeyTable(leaseTable), Name: "x"},
		{Table: tasklock.KeyTable("bad name"), Name: "x", TTL: time.Second},
		{Table: tasklock.KeyTable(leaseTable), Name: "x", TTL: time.Second, RetryInterval: -1},
	} {
		_, err := leader.New(c.Dialect, cfg)
		require.True(t, errors.Is(err, dialect.ErrInvalidConfig), "%+v: %v", cfg, err)
	}
	_, err := leader.New(nil, leader.Config{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

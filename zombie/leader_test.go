package zombie_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// failingRenewals wraps a dialect so that lease renewals fail (a transient
// error: the database is unreachable for them) while fail is set.
type failingRenewals struct {
	dialect.Dialect
	fail atomic.Bool
}

type failingRenewalStore struct {
	store.LeaseStore
	f *failingRenewals
}

func (f *failingRenewals) WrapLeases(s store.LeaseStore) store.LeaseStore {
	return failingRenewalStore{LeaseStore: s, f: f}
}

// Inner implements the store's test wrapping.
func (f *failingRenewals) Inner() dialect.Dialect { return f.Dialect }

func (s failingRenewalStore) Renew(ctx context.Context, key any, owner string, ttl time.Duration) (store.LeaseInfo, error) {
	if s.f.fail.Load() {
		return store.LeaseInfo{}, errors.New("injected: renewal failed")
	}
	return s.LeaseStore.Renew(ctx, key, owner, ttl)
}

// leaderLog records what a reaper's Observer is told: leadership changes
// and how many sweeps succeeded or failed.
type leaderLog struct {
	mu              sync.Mutex
	took, gaveUp    int
	swept, failures int
	cutShort        int // sweeps under a context that had ended: a lost lease's
	lastErr         error
}

func (l *leaderLog) observer() observe.Observer {
	return observe.Func(func(ctx context.Context, e observe.Event) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch {
		case e.Op == zombie.OpLeader && e.Leading:
			l.took++
		case e.Op == zombie.OpLeader:
			l.gaveUp++
		case e.Op == zombie.OpSweep && ctx.Err() != nil:
			l.cutShort++
		case e.Op == zombie.OpSweep && e.Err != nil:
			l.failures++
			l.lastErr = e.Err
		case e.Op == zombie.OpSweep:
			l.swept++
		}
	})
}

func (l *leaderLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("took the lease %d times, gave it up %d times; %d sweeps done, %d failed (last: %v), %d under an ended context",
		l.took, l.gaveUp, l.swept, l.failures, l.lastErr, l.cutShort)
}

func (l *leaderLog) tookLease() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.took
}

// TestRunRetakesLostLease: a reaper whose lease is lost while Run runs
// (force-released by an operator, or expired while its renewals failed)
// gives it up, takes it again once it is free, and sweeps again: rows
// abandoned after the loss go back to pending. A Run that kept the lost
// lease would sweep under an ended context forever, and with one reaper
// stale rows would stay processing.
func TestRunRetakesLostLease(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"force-released", "expired"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			forEachEngine(t, func(t *testing.T, e *env) {
				ctx := ctxT(t)
				d := &failingRenewals{Dialect: e.d}
				cc := jobsConfig(10)
				createTable(t, e, cc, false)
				insertRows(t, e, cc.Table, "PENDING", 5, 10)
				leases := cc.Table + "_leases"
				require.NoError(t, tasklock.CreateTable(ctx, e.d, leases))
				const ttl = 1500 * time.Millisecond
				lk, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable(leases), TTL: ttl})
				require.NoError(t, err)
				key := "zombie:" + cc.Table
				log := &leaderLog{}
				const timeout = 500 * time.Millisecond
				r, err := zombie.New(e.d, cc, zombie.Config{Timeout: timeout, Locker: lk, LockKey: key, Observer: log.observer()})
				require.NoError(t, err)
				rctx, stop := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- r.Run(rctx, 20*time.Millisecond) }()
				defer func() {
					stop()
					require.NoError(t, <-done)
				}()
				waitUntil(t, 10*time.Second, func() bool { return log.tookLease() == 1 }, "the reaper to take its lease", log.String)
				first, err := lk.Inspect(ctx, key)
				require.NoError(t, err)
				require.NotEmpty(t, first.Owner)

				switch how {
				case "force-released":
					ok, err := lk.ForceRelease(ctx, key)
					require.NoError(t, err)
					require.True(t, ok)
				case "expired":
					// Renewals fail until the lease's local deadline has
					// ended it; then the database is back.
					d.fail.Store(true)
					time.AfterFunc(ttl, func() { d.fail.Store(false) })
				}

				// Correct: the loss is seen at the next renewal (at most
				// TTL/3 away) or at the local deadline (TTL), and the lease
				// is free then or at the database expiry (TTL + the
				// column's resolution). 10 s is far beyond that.
				var again tasklock.State
				waitUntil(t, 10*time.Second, func() bool {
					again, err = lk.Inspect(ctx, key)
					require.NoError(t, err)
					return again.Owner != "" && again.Owner != first.Owner && log.tookLease() >= 2
				}, "the reaper to take its lost lease again (a new owner in the table, and the Observer told)", func() string { return fmt.Sprintf("%s; lease %+v", log, again) })
				require.Greater(t, again.Fence, first.Fence)

				// A worker dies holding every row: the sweeps under the new
				// lease return them after the claim timeout.
				c, err := claim.New[struct{}](e.d, cc, nil)
				require.NoError(t, err)
				// Before the claim: its claimed-at is the database's time
				// during the statement, so no sweep may return the rows
				// earlier than the timeout after this.
				abandoned := time.Now()
				b, err := c.Claim(ctx)
				require.NoError(t, err)
				require.Equal(t, 5, b.Len())
				waitUntil(t, 10*time.Second, func() bool {
					st, err := c.Stats(ctx)
					require.NoError(t, err)
					return st.Processing == 0 && st.Pending == 5
				}, "the rows abandoned after the reaper took its lease again to be returned by its sweeps", log.String)
				require.GreaterOrEqual(t, time.Since(abandoned), timeout, "returned before the claim timeout")
			})
		})
	}
}

// waitUntil polls cond every 20 ms until it holds, failing the test after
// limit with what was awaited and what status says was seen.
func waitUntil(t *testing.T, limit time.Duration, cond func() bool, what string, status func() string) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("waited %v for %s; saw: %s", limit, what, status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package postgres

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// eventually polls cond every few milliseconds for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
		time.Sleep(5 * time.Millisecond)
	}
}

// listening starts d's listener with a subscription of spec's scope 1 and
// waits until it listens. It returns the count of wake-ups.
func listening(t *testing.T, d *Dialect, spec dialect.ClaimTable) *atomic.Int64 {
	t.Helper()
	var wakes atomic.Int64
	cancelSub := d.n.Subscribe(spec, []any{1}, func() { wakes.Add(1) })
	t.Cleanup(cancelSub)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- d.Listen(ctx, ListenConfig{ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-errc)
	})
	eventually(t, "the listener", d.Listening)
	eventually(t, "the wake-up of the first connection", func() bool { return wakes.Load() == 1 })
	return &wakes
}

func TestListenWakesOnNotifyReleaseAndReap(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, d, st := setupJobs(t)
	spec := jobSpec(t)
	// Another process: its own pool and dialect on the same database.
	other, err := pgxpool.New(ctx, pool.Config().ConnString())
	require.NoError(t, err)
	t.Cleanup(other.Close)
	od, err := New(ctx, other, dialect.Options{})
	require.NoError(t, err)
	ost, err := store.OpenClaims(od, spec)
	require.NoError(t, err)
	require.NoError(t, ost.VerifySchema(ctx))
	wakes := listening(t, d, spec)

	// An application's insert, notified in its transaction: nothing
	// arrives before the commit, the wake-up arrives after it.
	tx, err := other.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO "+spec.Table+" (task_id, payload) VALUES (1, 'a')")
	require.NoError(t, err)
	require.NoError(t, Notify(ctx, tx, spec, 1))
	require.NoError(t, tx.Commit(ctx))
	eventually(t, "the insert's notification", func() bool { return wakes.Load() == 2 })

	// Another scope's notification does not wake this subscriber; a
	// rolled-back one is never delivered.
	require.NoError(t, Notify(ctx, other, spec, 2))
	tx, err = other.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, Notify(ctx, tx, spec, 1))
	require.NoError(t, tx.Rollback(ctx))

	// The library's own release notifies (the table as a whole).
	tok, ids := claimIDs(t, ost, dialect.StrategySkipLocked, 1, 10)
	require.Len(t, ids, 1)
	n, err := ost.Release(ctx, tok, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	eventually(t, "the release's notification", func() bool { return wakes.Load() >= 3 })
	require.EqualValues(t, 3, wakes.Load(), "the other scope's and the rolled-back notifications woke nobody")

	// So does a reap that returns rows.
	_, ids = claimIDs(t, ost, dialect.StrategySkipLocked, 1, 10)
	require.Len(t, ids, 1)
	time.Sleep(5 * time.Millisecond) // older than the reap's timeout below
	res, err := ost.Reap(ctx, &store.ReapParams{Timeout: time.Millisecond, Limit: 10})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Returned)
	eventually(t, "the reap's notification", func() bool { return wakes.Load() == 4 })
	_ = st
}

func TestListenReconnectsAndWakesEveryone(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, d, _ := setupJobs(t)
	spec := jobSpec(t)
	wakes := listening(t, d, spec)
	pid := d.n.pid.Load()
	_, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", int64(pid))
	require.NoError(t, err)
	// After the reconnection every subscriber is woken once (notifications
	// sent while nobody listened are lost), and notifications arrive again.
	eventually(t, "a new listening connection", func() bool { return d.Listening() && d.n.pid.Load() != pid })
	eventually(t, "the reconnection's wake-up", func() bool { return wakes.Load() == 2 })
	require.NoError(t, Notify(ctx, pool, spec, 1))
	eventually(t, "a notification after the reconnection", func() bool { return wakes.Load() == 3 })
}

// A claimer that subscribes while the listener runs is woken once its
// table's channel is listened to: a notification sent between its first
// claim and the LISTEN would otherwise wait for its next poll.
func TestListenWakesNewSubscription(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, d, _ := setupJobs(t)
	spec := jobSpec(t)
	first := listening(t, d, spec)
	other := spec
	other.Table = "jobs_other"
	var wakes atomic.Int64
	cancelSub := d.n.Subscribe(other, nil, func() { wakes.Add(1) })
	t.Cleanup(cancelSub)
	eventually(t, "the new channel listened to", d.Listening)
	eventually(t, "the new subscription's wake-up", func() bool { return wakes.Load() == 1 })
	require.EqualValues(t, 1, first.Load(), "the other table's claimers are not woken")
	require.NoError(t, Notify(ctx, pool, other))
	eventually(t, "a notification of the new table", func() bool { return wakes.Load() == 2 })
}

func TestListenAndNotifyRejectBadInput(t *testing.T) {
	t.Parallel()
	d, err := New(context.Background(), dbtest.PostgresPool(t), dialect.Options{})
	require.NoError(t, err)
	err = d.Listen(context.Background(), ListenConfig{ReconnectMin: time.Second, ReconnectMax: time.Millisecond})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	err = d.Listen(context.Background(), ListenConfig{ReconnectMin: -1})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Listen(ctx, ListenConfig{}) }()
	eventually(t, "the listener", d.Listening)
	require.ErrorIs(t, d.Listen(ctx, ListenConfig{}), dialect.ErrInvalidConfig, "a second listener")
	cancel()
	require.NoError(t, <-errc)

	spec := dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}}
	_, _, err = NotifyStatement(spec, 1, 2)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, _, err = NotifyStatement(spec, nil)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, _, err = NotifyStatement(dialect.ClaimTable{Table: "bad name"})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	q, args, err := NotifyStatement(spec, 42)
	require.NoError(t, err)
	require.Equal(t, notifySQL, q)
	_, _, err2 := NotifyStatement(spec, int64(42))
	require.NoError(t, err2)
	q2, args2, _ := NotifyStatement(spec, int64(42))
	require.Equal(t, q, q2)
	require.Equal(t, args, args2, "42 as an int and as an int64 name the same scope")
}

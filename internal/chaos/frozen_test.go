package chaos

import (
	"context"
	"errors"
	"os"
	"strconv"
	"syscall"
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

const (
	frozenTTL   = time.Second
	frozenRows  = 5
	frozenLease = "job"
)

func lockerConfig(ttl time.Duration) tasklock.Config {
	return tasklock.Config{Table: store.KeyedLeaseTable(leaseTable, 64), TTL: ttl}
}

// fencedWrite is the protected write a lease holder makes: it lands only if
// no newer holder (larger fence) wrote before.
func fencedWrite(ctx context.Context, d *db, fence int64, writer string) (int64, error) {
	res, err := d.sql.ExecContext(ctx, d.sqlf("UPDATE {chaos_fenced} SET {fence} = $1, {writer} = $2 WHERE {k} = $3 AND {fence} < $4"),
		fence, writer, frozenLease, fence)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// leaseHolderRole takes the lease with KeepAlive, makes a fenced write, and
// waits. When the lease ends (it was frozen past its TTL) it reports the
// cause, then tries what a confused holder would: renew, a fenced write,
// release.
func leaseHolderRole(ctx context.Context, out *emitter) error {
	d, err := openRetry(ctx, os.Getenv(envDriver), os.Getenv(envDSN))
	if err != nil {
		return err
	}
	defer d.close()
	cfg := lockerConfig(envDuration(envTTL, frozenTTL))
	cfg.Observer = observe.Func(func(_ context.Context, e observe.Event) {
		if e.Op == tasklock.OpRenew && e.Err == nil {
			out.emit(event{Ev: "renewed"})
		}
	})
	k, err := tasklock.New(d.d, cfg)
	if err != nil {
		return err
	}
	l, err := k.AcquireWait(ctx, frozenLease)
	if err != nil {
		return err
	}
	n, err := fencedWrite(ctx, d, l.Fence(), "frozen")
	if err != nil {
		return err
	}
	out.emit(event{Ev: "acquired", Fence: l.Fence(), Owner: l.Owner(), N: n})
	defer l.KeepAlive(context.Background())()
	lctx, cancel := l.Context(ctx)
	defer cancel()
	<-lctx.Done()
	cause := context.Cause(lctx)
	out.emit(event{Ev: "lost", Lost: errors.Is(cause, dialect.ErrLeaseLost), Err: cause.Error()})
	err = l.Renew(ctx)
	out.emit(event{Ev: "renew", Lost: errors.Is(err, dialect.ErrLeaseLost), Err: errString(err)})
	// A holder that ignores the loss and writes anyway is stopped by the
	// fence: the newer holder's write has a larger one.
	n, err = fencedWrite(ctx, d, l.Fence(), "frozen-late")
	out.emit(event{Ev: "fenced", N: n, Fence: l.Fence(), Err: errString(err)})
	ok, err := l.Release(ctx)
	out.emit(event{Ev: "release", OK: ok, Err: errString(err)})
	return nil
}

// frozenClaimerRole claims one batch with KeepAlive and reports it, then
// waits a moment (the test freezes it meanwhile). Resumed, it heartbeats,
// acks and releases the batch, reporting each outcome.
func frozenClaimerRole(ctx context.Context, out *emitter) error {
	d, err := openRetry(ctx, os.Getenv(envDriver), os.Getenv(envDSN))
	if err != nil {
		return err
	}
	defer d.close()
	cfg := itemsConfig(envInt(envBatch, frozenRows))
	cfg.ReapTimeout = frozenTTL // the test's reaper timeout
	cfg.HeartbeatInterval = envDuration(envHeartbeat, 200*time.Millisecond)
	c, err := claim.New(d.d, cfg, itemFields)
	if err != nil {
		return err
	}
	b, err := c.Claim(ctx)
	if err != nil {
		return err
	}
	ids := make([]int64, b.Len())
	for i, r := range b.Rows() {
		ids[i] = r.ID.(int64)
	}
	out.emit(event{Ev: "claim", Tok: b.Token(), IDs: ids, T: time.Now().UnixNano()})
	stop := b.KeepAlive(ctx)
	defer stop()
	wctx, cancel := b.Context(ctx)
	defer cancel()
	// The test freezes the process here; resumed, the pause is over.
	pause(ctx, frozenTTL)
	// What a handler sees first on resuming: the batch has ended, and its
	// deadline (reported, T) was before the other worker's claim.
	stale := b.Err()
	<-wctx.Done()
	deadline, _ := b.Deadline()
	out.emit(event{Ev: "ctx", T: deadline.UnixNano(), OK: stale != nil, Lost: errors.Is(context.Cause(wctx), dialect.ErrClaimLost), Err: context.Cause(wctx).Error()})
	n, err := b.Heartbeat(ctx)
	out.emit(event{Ev: "heartbeat", N: n, IDs: lostIDs(err), Lost: errors.Is(err, dialect.ErrClaimLost), Err: errString(err)})
	err = b.AckAll(ctx)
	out.emit(event{Ev: "frozenack", Tok: b.Token(), IDs: lostIDs(err), Lost: errors.Is(err, dialect.ErrClaimLost), Err: errString(err)})
	n, err = b.Release(ctx)
	out.emit(event{Ev: "release", N: n, Err: errString(err)})
	return nil
}

// lostIDs returns the keys a *claim.LostError in err lists, empty without one.
func lostIDs(err error) []int64 {
	var le *claim.LostError
	ids := []int64{}
	if errors.As(err, &le) {
		for _, id := range le.IDs {
			ids = append(ids, id.(int64))
		}
	}
	return ids
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

type rowState struct {
	id       int64
	status   string
	token    *string
	attempts int64
}

func snapshot(t *testing.T, d *db) []rowState {
	t.Helper()
	res, err := d.sql.QueryContext(context.Background(), d.sqlf("SELECT {id}, {status}, {token}, {attempts} FROM {chaos_items} ORDER BY {id}"))
	require.NoError(t, err)
	defer res.Close()
	var out []rowState
	for res.Next() {
		var r rowState
		require.NoError(t, res.Scan(&r.id, &r.status, &r.token, &r.attempts))
		out = append(out, r)
	}
	require.NoError(t, res.Err())
	return out
}

// TestFrozenHolder freezes (SIGSTOP) a lease holder and a claimer past the
// TTL and the reap timeout, lets others take over, and resumes them (SIGCONT):
// the frozen processes notice the loss and change nothing.
func TestFrozenHolder(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := e.dsn(t)
			d := openT(t, e.driver, dsn)
			setup(t, d, frozenRows)
			env := []string{envDriver + "=" + e.driver, envDSN + "=" + dsn, envTTL + "=" + frozenTTL.String(),
				envBatch + "=" + strconv.Itoa(frozenRows), envLifetime + "=60s"}
			holder := spawn(t, "leaseholder", env...)
			claimer := spawn(t, "frozenclaimer", env...)

			// Freeze each right after a completed statement, so that it holds
			// no database lock while stopped.
			frozen, _ := claimer.waitEvent(t, "claim", 0, 30*time.Second)
			require.NoError(t, claimer.cmd.Process.Signal(syscall.SIGSTOP))
			acq, i := holder.waitEvent(t, "acquired", 0, 30*time.Second)
			require.EqualValues(t, 1, acq.N, "the first holder's fenced write lands")
			holder.waitEvent(t, "renewed", i, 10*time.Second)
			require.NoError(t, holder.cmd.Process.Signal(syscall.SIGSTOP))
			require.Len(t, frozen.IDs, frozenRows)
			stopped := time.Now()

			// Take over the lease once the TTL passed.
			k, err := tasklock.New(d.d, lockerConfig(frozenTTL))
			require.NoError(t, err)
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			lease, err := k.AcquireWait(actx, frozenLease)
			cancel()
			require.NoError(t, err)
			require.Greater(t, lease.Fence(), acq.Fence, "the new holder's fence is larger")
			require.Greater(t, time.Since(stopped), frozenTTL/2, "the lease cannot be taken while the frozen holder's TTL runs")
			n, err := fencedWrite(ctx, d, lease.Fence(), "new")
			require.NoError(t, err)
			require.EqualValues(t, 1, n)

			// Reap the frozen claim, re-claim and ack it.
			time.Sleep(time.Until(stopped.Add(frozenTTL + 300*time.Millisecond)))
			r, err := zombie.New(d.d, itemsConfig(frozenRows), zombie.Config{Timeout: frozenTTL})
			require.NoError(t, err)
			sweepStart := time.Now().UnixNano()
			swept, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.EqualValues(t, frozenRows, swept.Returned)
			c, err := claim.New(d.d, itemsConfig(frozenRows), itemFields)
			require.NoError(t, err)
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			ids := make([]int64, b.Len())
			for i, row := range b.Rows() {
				ids[i] = row.ID.(int64)
				require.NoError(t, send(ctx, d, ids[i], b.Token(), row.Value.Attempts))
				require.EqualValues(t, 2, row.Value.Attempts, "second attempt")
			}
			require.Equal(t, frozen.IDs, ids, "the reaped rows are claimed again")
			claimedAt := time.Now().UnixNano()
			ack0 := time.Now().UnixNano()
			require.NoError(t, b.AckAll(ctx))
			before := snapshot(t, d)

			// Resume both.
			require.NoError(t, holder.cmd.Process.Signal(syscall.SIGCONT))
			require.NoError(t, claimer.cmd.Process.Signal(syscall.SIGCONT))
			holder.wait(t, 30*time.Second)
			claimer.wait(t, 30*time.Second)
			require.NoError(t, holder.err)
			require.NoError(t, claimer.err)

			lost, i := holder.waitEvent(t, "lost", 0, time.Second)
			require.True(t, lost.Lost, "lease context cancelled with ErrLeaseLost: %s", lost.Err)
			renew, i := holder.waitEvent(t, "renew", i, time.Second)
			require.True(t, renew.Lost, "renew after the loss gives ErrLeaseLost: %s", renew.Err)
			fenced, i := holder.waitEvent(t, "fenced", i, time.Second)
			require.Empty(t, fenced.Err)
			require.Zero(t, fenced.N, "the stale holder's fenced write is refused")
			rel, _ := holder.waitEvent(t, "release", i, time.Second)
			require.Empty(t, rel.Err)
			require.False(t, rel.OK, "release by the stale holder is a no-op")
			st, err := k.Inspect(ctx, frozenLease)
			require.NoError(t, err)
			require.Equal(t, lease.Owner(), st.Owner)
			require.Equal(t, lease.Fence(), st.Fence)
			var fence int64
			var writer string
			require.NoError(t, d.sql.QueryRowContext(ctx, d.sqlf("SELECT {fence}, {writer} FROM {chaos_fenced}")).Scan(&fence, &writer))
			require.Equal(t, lease.Fence(), fence)
			require.Equal(t, "new", writer)
			released, err := lease.Release(ctx)
			require.NoError(t, err)
			require.True(t, released)

			cev, i := claimer.waitEvent(t, "ctx", 0, time.Second)
			require.True(t, cev.OK, "Batch.Err reported the loss as soon as the frozen claimer resumed")
			require.True(t, cev.Lost, "the frozen batch's context was cancelled with ErrClaimLost: %s", cev.Err)
			require.Contains(t, cev.Err, dialect.ErrLocalDeadline.Error())
			require.Less(t, cev.T, sweepStart, "the frozen batch's deadline passed before its rows were reaped and claimed again")
			hb, i := claimer.waitEvent(t, "heartbeat", i, time.Second)
			require.True(t, hb.Lost, "heartbeat after the reap gives ErrClaimLost: %s", hb.Err)
			require.Zero(t, hb.N)
			require.Equal(t, frozen.IDs, hb.IDs, "the heartbeat lists every row of the frozen batch lost")
			ack, i := claimer.waitEvent(t, "frozenack", i, time.Second)
			// The resumed process's KeepAlive and its own heartbeat race for
			// the first statement. Rows KeepAlive found lost are reported by
			// the heartbeat and again by AckAll (nobody had acted on them
			// yet); rows the caller's own heartbeat found lost were reported
			// to it, and AckAll, holding nothing, writes nothing.
			if ack.Lost {
				require.Equal(t, frozen.IDs, ack.IDs, "AckAll reports every row KeepAlive found lost")
			} else {
				require.Empty(t, ack.Err, "AckAll of a batch holding nothing")
				require.Empty(t, ack.IDs)
			}
			crel, _ := claimer.waitEvent(t, "release", i, time.Second)
			require.Empty(t, crel.Err)
			require.Zero(t, crel.N)
			require.Equal(t, before, snapshot(t, d), "the resumed claimer changed nothing")

			evs := append(claimer.Events(), event{Ev: "claim", Pid: os.Getpid(), Tok: b.Token(), IDs: ids, T: claimedAt})
			for _, id := range ids {
				evs = append(evs, event{Ev: "ack", Pid: os.Getpid(), Tok: b.Token(), IDs: []int64{id}, T0: ack0})
			}
			rep := check(t, d, frozenRows, evs, nil)
			rep.faults = 2
			rep.drain = time.Since(stopped)
			rep.log(t, "frozen", e.name)
			require.Zero(t, rep.lost)
			require.Zero(t, rep.overlaps)
			t.Logf("fences: frozen holder %d, new holder %d", acq.Fence, lease.Fence())
		})
	}
}

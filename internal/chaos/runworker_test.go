package chaos

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// envReap is the workers' Config.ReapTimeout (the reaper's Timeout), which
// sets their batches' local deadline; envMaxAttempts is their MaxAttempts.
const (
	envReap        = "CHAOS_REAP"
	envMaxAttempts = "CHAOS_MAX_ATTEMPTS"
)

// runWorkerRole drains the task with claim.Claimer.Run, as an application
// would: the handler "sends" its row (an insert into the sends log keyed by
// row and claim) and returns nil; Run acks, heartbeats and, after an
// outage, tries again. The sends log's token is the worker's pid and the
// row's attempt (the handler does not see the claim token), so a send that
// an outage interrupted and the handler repeated is recorded once. It exits
// once the task has nothing pending or processing.
func runWorkerRole(ctx context.Context, out *emitter) error {
	d, err := openRetry(ctx, os.Getenv(envDriver), os.Getenv(envDSN))
	if err != nil {
		return err
	}
	defer d.close()
	cfg := itemsConfig(envInt(envBatch, 10))
	cfg.HeartbeatInterval = envDuration(envHeartbeat, 200*time.Millisecond)
	cfg.ReapTimeout = envDuration(envReap, 0)
	cfg.MaxAttempts = envInt(envMaxAttempts, 5)
	c, err := claim.New(d.d, cfg, itemFields)
	if err != nil {
		return err
	}
	delay := envDuration(envSendDelay, 0)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // stop when the task has drained
		for rctx.Err() == nil {
			pause(rctx, 250*time.Millisecond)
			st, err := c.Stats(rctx)
			if err == nil && st.Pending == 0 && st.Processing == 0 {
				cancel()
			}
		}
	}()
	err = c.Run(rctx, claim.WorkerConfig[item]{
		PollMin: 5 * time.Millisecond, PollMax: 100 * time.Millisecond,
		Handler: func(hctx context.Context, r claim.Row[item]) error {
			pause(hctx, delay)
			return sendPatiently(hctx, d, r.ID.(int64), fmt.Sprintf("run-%d-%d", os.Getpid(), r.Attempts), r.Attempts)
		},
	})
	out.emit(event{Ev: "exit"})
	return err
}

// sendPatiently is send, tried again for as long as a server restart can
// take: an outage is not the send's failure.
func sendPatiently(ctx context.Context, d *db, id int64, token string, attempt int64) error {
	var err error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && ctx.Err() == nil; {
		if err = send(ctx, d, id, token, attempt); err == nil {
			return nil
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// runFigures is what a drain with Run cost, beside the report's figures:
// the rows sent more than once and the attempts the rows ended with.
type runFigures struct {
	resent      int // rows sent by more than one claim
	stuck       int // rows left under a claim token
	maxAttempts int64
	atMax       int // rows whose attempts reached MaxAttempts
	parked      int
}

func (r report) logRun(t *testing.T, scenario, engine string) {
	f := r.run
	line := fmt.Sprintf("chaos: scenario=%s engine=%s outages=%d rows=%d sent-more-than-once=%d (%.2f%%) max-attempts=%d rows-at-MaxAttempts=%d parked=%d lost=%d stuck=%d drain=%v",
		scenario, engine, r.faults, r.rows, f.resent, 100*float64(f.resent)/float64(max(r.rows, 1)), f.maxAttempts, f.atMax, f.parked, r.lost, f.stuck, r.drain.Round(time.Millisecond))
	t.Log(line)
	fmt.Println(line)
}

// checkRun reads the final state of a Run drain: every row done and under
// no token (else lost or stuck), sent at least once; it counts the rows sent
// by more than one claim and the attempts rows ended with.
func checkRun(t *testing.T, d *db, rows, maxAttempts int) report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := report{rows: rows}
	f := &r.run
	res, err := d.sql.QueryContext(ctx, d.sqlf("SELECT {id}, {status}, {token}, {attempts} FROM {chaos_items} WHERE {task_id} = $1"), taskID)
	require.NoError(t, err)
	status := map[int64]string{}
	for res.Next() {
		var id, att int64
		var st string
		var tok *string
		require.NoError(t, res.Scan(&id, &st, &tok, &att))
		status[id] = st
		switch {
		case st == "FAILED":
			f.parked++
		case st != "DONE":
			r.lost++
			t.Errorf("row %d not done: %s", id, st)
		}
		if tok != nil {
			f.stuck++
			t.Errorf("row %d still under token %s", id, *tok)
		}
		f.maxAttempts = max(f.maxAttempts, att)
		if att >= int64(maxAttempts) {
			f.atMax++
		}
	}
	require.NoError(t, res.Err())
	res.Close()
	require.Len(t, status, rows)
	sends := map[int64]int{}
	res, err = d.sql.QueryContext(ctx, d.sqlf("SELECT {row_id} FROM {chaos_sends}"))
	require.NoError(t, err)
	for res.Next() {
		var id int64
		require.NoError(t, res.Scan(&id))
		sends[id]++
		r.sends++
	}
	require.NoError(t, res.Err())
	res.Close()
	for id, st := range status {
		switch n := sends[id]; {
		case n == 0 && st == "DONE":
			r.lost++
			t.Errorf("row %d done but never sent", id)
		case n > 1:
			f.resent++
		}
	}
	return r
}

// envContest is how long a lease contender contends.
const envContest = "CHAOS_CONTEST"

// contestLease is the key the contenders take turns on.
const contestLease = "contest"

// leaseContenderRole takes the contest lease again and again for envContest:
// it holds it with KeepAlive for fenced writes (stopping at once if
// the lease's context ends), then releases it, and reports each tenure as
// a "held" event: the fence, when it held the lease (T0, after Acquire
// returned) and when its work on it had stopped (T, before Release).
func leaseContenderRole(ctx context.Context, out *emitter) error {
	d, err := openRetry(ctx, os.Getenv(envDriver), os.Getenv(envDSN))
	if err != nil {
		return err
	}
	defer d.close()
	k, err := tasklock.New(d.d, tasklock.Config{Table: store.KeyedLeaseTable(leaseTable, 64), TTL: envDuration(envTTL, 2*time.Second)})
	if err != nil {
		return err
	}
	me := fmt.Sprintf("pid-%d", os.Getpid())
	until := time.Now().Add(envDuration(envContest, 20*time.Second))
	for time.Now().Before(until) && ctx.Err() == nil {
		actx, cancel := context.WithDeadline(ctx, until)
		l, err := k.AcquireWait(actx, contestLease)
		cancel()
		if err != nil {
			pause(ctx, 50*time.Millisecond) // an outage, or the contest is over
			continue
		}
		t0 := time.Now().UnixNano()
		stop := l.KeepAlive(context.WithoutCancel(ctx))
		lctx, lcancel := l.Context(ctx)
		var wrote int64
		// About 1.5 s of work; a holder whose writes fail (the server is
		// away) keeps at it for up to 5 s, past the lease's local deadline
		// (TTL 2 s), which then ends it.
		start := time.Now()
		for lctx.Err() == nil {
			n, err := fencedWrite(lctx, d, l.Fence(), me)
			wrote += n
			if since := time.Since(start); since > 5*time.Second || err == nil && since > 1500*time.Millisecond {
				break
			}
			pause(lctx, 50*time.Millisecond)
		}
		end := time.Now().UnixNano()
		lost := lctx.Err() != nil
		lcancel()
		stop()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, _ = l.Release(rctx)
		rcancel()
		out.emit(event{Ev: "held", Fence: l.Fence(), T0: t0, T: end, N: wrote, Lost: lost, Owner: me})
		pause(ctx, 10*time.Millisecond)
	}
	return nil
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// envReap is the workers' Config.ReapTimeout (the reaper's Timeout), which
// sets their batches' local deadline; envMaxAttempts is their MaxAttempts.
// envFailEvery makes the handler fail the first attempt of every row whose
// id is a multiple of it (fleetSpec.failEvery).
const (
	envReap        = "CHAOS_REAP"
	envMaxAttempts = "CHAOS_MAX_ATTEMPTS"
	envFailEvery   = "CHAOS_FAIL_EVERY"
)

// errFirstAttempt is the handler's own failure of a row told to fail
// (envFailEvery).
var errFirstAttempt = errors.New("chaos: this row fails its first attempt")

// failing reports whether the handler fails row id's first attempt.
func failing(id int64, every int) bool { return every > 0 && id%int64(every) == 0 }

// runWorkerRole drains the task with claim.Claimer.Run, as an application
// would: the handler "sends" its row (an insert into the sends log keyed by
// row and handler call) and returns nil; Run acks, heartbeats and, after an
// outage, tries again. The sends log's token names the worker's pid, the
// row's attempt and the handler call, so a send that an outage interrupted
// and the handler repeated within one call is recorded once, and every
// handler call that sent is recorded. Rows envFailEvery names fail their
// first attempt before sending. It exits once the task has nothing pending
// or processing.
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
	failEvery := envInt(envFailEvery, 0)
	var calls atomic.Int64
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
			if r.Attempts == 1 && failing(r.ID.(int64), failEvery) {
				return errFirstAttempt
			}
			tok := fmt.Sprintf("run-%d-%d-%d", os.Getpid(), r.Attempts, calls.Add(1))
			return sendPatiently(hctx, d, r.ID.(int64), tok, r.Attempts)
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
// the rows sent more than once and the attempts the rows ended with. A
// healthy row is one whose handler never failed (fleetSpec.failEvery names
// the others): every attempt of it past the first is an outage's.
type runFigures struct {
	resent      int // rows sent by more than one handler call
	stuck       int // rows left under a claim token
	maxAttempts int64
	atMax       int // rows whose attempts reached MaxAttempts
	parked      int
	failing     int           // rows whose handler fails their first attempt
	healthyMax  int64         // the highest attempts of a healthy row
	healthyRe   int           // healthy rows whose attempts ended above 1
	attempts    map[int64]int // rows by final attempts
}

func (r report) logRun(t *testing.T, scenario, engine string) {
	f := r.run
	line := fmt.Sprintf("chaos: scenario=%s engine=%s outages=%d rows=%d sent-more-than-once=%d (%.2f%%) max-attempts=%d rows-at-MaxAttempts=%d parked=%d failing-rows=%d healthy-rows-above-1-attempt=%d (highest %d) attempts=%v lost=%d stuck=%d drain=%v",
		scenario, engine, r.faults, r.rows, f.resent, 100*float64(f.resent)/float64(max(r.rows, 1)), f.maxAttempts, f.atMax, f.parked,
		f.failing, f.healthyRe, f.healthyMax, f.attempts, r.lost, f.stuck, r.drain.Round(time.Millisecond))
	t.Log(line)
	fmt.Println(line)
}

// runSend is one handler call's send of a row, from the sends log.
type runSend struct {
	tok     string
	pid     int
	attempt int64
}

// checkRun reads the final state of a Run drain: every row done and under
// no token (else lost or stuck), sent at least once; it counts the rows sent
// by more than one handler call and the attempts rows ended with, healthy
// rows apart (failEvery names the rows whose first attempt fails), and logs
// the first rows run again with their sends.
func checkRun(t *testing.T, d *db, rows, maxAttempts, failEvery int) report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := report{rows: rows}
	f := &r.run
	f.attempts = map[int64]int{}
	res, err := d.sql.QueryContext(ctx, d.sqlf("SELECT {id}, {status}, {token}, {attempts} FROM {chaos_items} WHERE {task_id} = $1"), taskID)
	require.NoError(t, err)
	status, attempts := map[int64]string{}, map[int64]int64{}
	for res.Next() {
		var id, att int64
		var st string
		var tok *string
		require.NoError(t, res.Scan(&id, &st, &tok, &att))
		status[id], attempts[id] = st, att
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
		f.attempts[att]++
		if att >= int64(maxAttempts) {
			f.atMax++
		}
		if failing(id, failEvery) {
			f.failing++
		} else if f.healthyMax = max(f.healthyMax, att); att > 1 {
			f.healthyRe++
		}
	}
	require.NoError(t, res.Err())
	res.Close()
	require.Len(t, status, rows)
	sends := readSends(t, ctx, d)
	var again []int64
	for id, st := range status {
		r.sends += len(sends[id])
		switch n := len(sends[id]); {
		case n == 0 && st == "DONE":
			r.lost++
			t.Errorf("row %d done but never sent", id)
		case n > 1:
			f.resent++
			again = append(again, id)
		}
	}
	sort.Slice(again, func(i, j int) bool { return again[i] < again[j] })
	for _, id := range again[:min(len(again), 20)] {
		t.Logf("row %d (attempts %d) run %d times: %+v", id, attempts[id], len(sends[id]), sends[id])
	}
	return r
}

// readSends reads the sends log by row.
func readSends(t *testing.T, ctx context.Context, d *db) map[int64][]runSend {
	t.Helper()
	sends := map[int64][]runSend{}
	res, err := d.sql.QueryContext(ctx, d.sqlf("SELECT {row_id}, {token}, {pid}, {attempt} FROM {chaos_sends}"))
	require.NoError(t, err)
	defer res.Close()
	for res.Next() {
		var id int64
		var s runSend
		require.NoError(t, res.Scan(&id, &s.tok, &s.pid, &s.attempt))
		sends[id] = append(sends[id], s)
	}
	require.NoError(t, res.Err())
	return sends
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

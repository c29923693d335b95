package chaos

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/zombie"
)

// fleetSpec sizes one multi-process run.
type fleetSpec struct {
	scenario  string
	rows      int
	workers   int
	batch     int
	sendDelay time.Duration
	// ackBatch sends a batch's rows in one insert and acks them in one
	// statement after sending them all, instead of one of each per row.
	ackBatch bool
	// txAck sends each row and acks it in one transaction
	// (Batch.AckTx): a send exists if and only if its ack committed.
	txAck bool
	// drain bounds the wait for the task to drain; zero means drainLimit().
	drain       time.Duration
	heartbeat   time.Duration
	reapTimeout time.Duration
	// workerDSN adjusts the workers' DSN (an application_name to target
	// their sessions); nil keeps it.
	workerDSN func(dsn string) string
	// inject runs the faults while the workers run and returns how many it
	// injected.
	inject func(f *fleet) int
	// run makes the workers drain with claim.Claimer.Run (runworker_test.go)
	// with MaxAttempts maxAttempts, and the report count outages' costs.
	run         bool
	maxAttempts int
	// batches, if not empty, gives worker i the batch size batches[i %
	// len(batches)] instead of batch.
	batches []int
	// failEvery, if positive, makes Run workers' handlers fail the first
	// attempt of every row whose id is a multiple of it (before sending
	// it): the only rows whose handler ever fails.
	failEvery int
}

// fleet is a running set of worker processes on one database, with a reaper
// in the test process.
type fleet struct {
	t    *testing.T
	e    engine
	spec fleetSpec
	dsn  string
	d    *db

	mu       sync.Mutex
	children []*child
	killed   map[int]bool
}

// startWorker spawns one more worker process.
func (f *fleet) startWorker() *child {
	dsn := f.dsn
	if f.spec.workerDSN != nil {
		dsn = f.spec.workerDSN(dsn)
	}
	role := "worker"
	if f.spec.run {
		role = "runworker"
	}
	batch := f.spec.batch
	f.mu.Lock()
	if n := len(f.spec.batches); n > 0 {
		batch = f.spec.batches[len(f.children)%n]
	}
	f.mu.Unlock()
	c := spawn(f.t, role,
		envDriver+"="+f.e.driver, envDSN+"="+dsn,
		envReap+"="+f.spec.reapTimeout.String(), envMaxAttempts+"="+strconv.Itoa(f.spec.maxAttempts),
		envBatch+"="+strconv.Itoa(batch), envFailEvery+"="+strconv.Itoa(f.spec.failEvery),
		envSendDelay+"="+f.spec.sendDelay.String(),
		envHeartbeat+"="+f.spec.heartbeat.String(),
		envAckBatch+"="+strconv.FormatBool(f.spec.ackBatch),
		envTxAck+"="+strconv.FormatBool(f.spec.txAck),
		envLifetime+"="+(3*drainLimit()).String())
	f.mu.Lock()
	f.children = append(f.children, c)
	f.mu.Unlock()
	return c
}

// live returns the workers still running.
func (f *fleet) live() []*child {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*child
	for _, c := range f.children {
		if !c.exited() && !f.killed[c.pid] {
			out = append(out, c)
		}
	}
	return out
}

// kill SIGKILLs c and records its pid.
func (f *fleet) kill(c *child) {
	f.mu.Lock()
	f.killed[c.pid] = true
	f.mu.Unlock()
	_ = c.cmd.Process.Kill()
	<-c.done
}

func drainLimit() time.Duration {
	if long() {
		return 5 * time.Minute
	}
	return 3 * time.Minute // a hang, not a slow run on a loaded 2-core machine with the race detector
}

// report is one scenario's figures.
type report struct {
	faults, rows                  int
	dupKilled, dupAcked, dupOther int
	lost, overlaps                int
	sends                         int // rows in the sends log
	drain                         time.Duration
	run                           runFigures // drains with Run (runworker_test.go)
}

func (r report) log(t *testing.T, scenario, engine string) {
	line := fmt.Sprintf("chaos: scenario=%s engine=%s faults=%d rows=%d duplicates=%d (killed-between-send-and-ack=%d, ack-failed-or-lost=%d, other=%d) lost=%d overlaps=%d drain=%v",
		scenario, engine, r.faults, r.rows, r.dupKilled+r.dupAcked+r.dupOther, r.dupKilled, r.dupAcked, r.dupOther, r.lost, r.overlaps, r.drain.Round(time.Millisecond))
	t.Log(line)
	fmt.Println(line)
}

// runFleet sets up the database, starts the workers and the reaper, runs
// the faults, waits for the task to drain and checks the invariants.
func runFleet(t *testing.T, e engine, spec fleetSpec) report {
	dsn := e.dsn(t)
	d := openT(t, e.driver, dsn)
	setup(t, d, spec.rows)
	f := &fleet{t: t, e: e, spec: spec, dsn: dsn, d: d, killed: map[int]bool{}}

	rcfg := itemsConfig(spec.batch)
	if spec.run {
		rcfg.MaxAttempts = spec.maxAttempts
	}
	reaper, err := zombie.New(d.d, rcfg, zombie.Config{Timeout: spec.reapTimeout})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		_ = reaper.Run(ctx, spec.reapTimeout/4)
	}()
	defer func() { cancel(); <-reaped }()

	for range spec.workers {
		f.startWorker()
	}
	faults := spec.inject(f)
	limit := spec.drain
	if limit == 0 {
		limit = drainLimit()
	}
	drain := waitDrained(t, d, limit, max(time.Minute, 3*spec.reapTimeout))
	f.mu.Lock()
	children := append([]*child(nil), f.children...)
	f.mu.Unlock()
	var evs []event
	for _, c := range children {
		c.wait(t, 30*time.Second)
		if !f.killed[c.pid] {
			require.NoError(t, c.err, "worker %d", c.pid)
		}
		evs = append(evs, c.Events()...)
	}
	if spec.run {
		r := checkRun(t, d, spec.rows, spec.maxAttempts, spec.failEvery)
		r.faults, r.drain = faults, drain
		r.logRun(t, spec.scenario, e.name)
		return r
	}
	r := check(t, d, spec.rows, evs, f.killed)
	r.faults, r.drain = faults, drain
	r.log(t, spec.scenario, e.name)
	return r
}

// claimRec is one claim of one row as a worker reported it.
type claimRec struct {
	tok  string
	pid  int
	t    int64 // the claim had certainly committed by then
	ack0 int64 // an ack that succeeded started then (0: none reported)
}

// check reads the final state and the workers' events and verifies the
// invariants: every row done, none pending, processing or still under a
// token; each row acked once; no row held by two claims at once; rows of
// the other task untouched; duplicate sends explained by a killed worker or
// a failed or lost ack.
func check(t *testing.T, d *db, rows int, evs []event, killed map[int]bool) report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := report{rows: rows}

	// Final state of the rows.
	status := map[int64]string{}
	res, err := d.sql.QueryContext(ctx, d.sqlf("SELECT {id}, {status}, {token} FROM {chaos_items} WHERE {task_id} = $1"), taskID)
	require.NoError(t, err)
	var underToken int
	for res.Next() {
		var id int64
		var st string
		var tok *string
		require.NoError(t, res.Scan(&id, &st, &tok))
		status[id] = st
		if tok != nil {
			underToken++
		}
	}
	require.NoError(t, res.Err())
	res.Close()
	require.Len(t, status, rows)
	require.Zero(t, underToken, "rows left under a claim token")
	var other int
	require.NoError(t, d.sql.QueryRowContext(ctx, d.sqlf("SELECT COUNT(*) FROM {chaos_items} WHERE {task_id} = $1 AND {status} = 'PENDING' AND {token} IS NULL"), taskID+1).Scan(&other))
	require.Equal(t, 3, other, "rows outside the scope changed")

	// The sends log.
	sends := map[int64][]claimRec{}
	res, err = d.sql.QueryContext(ctx, d.sqlf("SELECT {row_id}, {token}, {pid} FROM {chaos_sends}"))
	require.NoError(t, err)
	for res.Next() {
		var id int64
		var c claimRec
		require.NoError(t, res.Scan(&id, &c.tok, &c.pid))
		sends[id] = append(sends[id], c)
		r.sends++
	}
	require.NoError(t, res.Err())
	res.Close()

	// The workers' reports.
	claims := map[int64][]*claimRec{}
	byTok := map[string]map[int64]*claimRec{}
	failedTok := map[string]bool{} // an ack or send of the token failed or found the claim lost
	for _, ev := range evs {
		switch ev.Ev {
		case "claim":
			byTok[ev.Tok] = map[int64]*claimRec{}
			for _, id := range ev.IDs {
				c := &claimRec{tok: ev.Tok, pid: ev.Pid, t: ev.T}
				claims[id] = append(claims[id], c)
				byTok[ev.Tok][id] = c
			}
		}
	}
	acks := map[int64]int{}
	ackTok := map[int64]string{}
	for _, ev := range evs {
		switch ev.Ev {
		case "ack":
			for _, id := range ev.IDs {
				acks[id]++
				ackTok[id] = ev.Tok
				if c := byTok[ev.Tok][id]; c != nil {
					c.ack0 = ev.T0
				}
			}
		case "lost", "ackerr", "senderr":
			failedTok[ev.Tok] = true
		}
	}

	for id, st := range status {
		if st != "DONE" || len(sends[id]) == 0 {
			r.lost++
			t.Errorf("row %d lost: status %s, %d sends", id, st, len(sends[id]))
		}
		switch n := acks[id]; {
		case n > 1:
			r.overlaps++
			t.Errorf("row %d acked %d times", id, n)
		case n == 0:
			// The ack landed but its report did not: the acking worker was
			// killed right after it, or the ack's answer was lost.
			cs := claims[id]
			if len(cs) == 0 || !(killed[cs[len(cs)-1].pid] || failedTok[cs[len(cs)-1].tok]) {
				t.Errorf("row %d is done but no worker reported acking it (claims %+v)", id, cs)
			}
		}
		// Overlap: another claim of the row committed while an acked claim
		// certainly held it (between its claim and its successful ack).
		for _, x := range claims[id] {
			if x.ack0 == 0 {
				continue
			}
			for _, y := range claims[id] {
				if y != x && y.t > x.t && y.t < x.ack0 {
					r.overlaps++
					t.Errorf("row %d: claim %s (pid %d) at %d while claim %s held it until its ack at %d", id, y.tok, y.pid, y.t, x.tok, x.ack0)
				}
			}
		}
		// Duplicates by cause.
		if ss := sends[id]; len(ss) > 1 {
			cause := 0 // 1 killed, 2 ack failed or lost, 3 other
			for _, s := range ss {
				if s.tok == ackTok[id] {
					continue
				}
				c := 3
				switch {
				case killed[s.pid]:
					c = 1
				case failedTok[s.tok]:
					c = 2
				}
				cause = max(cause, c)
			}
			switch cause {
			case 1:
				r.dupKilled++
			case 2:
				r.dupAcked++
			case 3:
				r.dupOther++
				t.Errorf("row %d sent %d times without a killed worker or failed ack to explain it: %+v", id, len(ss), ss)
			}
		}
	}
	return r
}

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
)

// heldRunnerRole drains the task with claim.Holder.Run (two batches in
// flight): each handler run "sends" its rows by inserting them into the
// sends log, under a token of its own, in the batch's transaction, so a
// send exists if and only if its batch committed. It writes a "run" event
// per handler run, and once nothing is pending or processing, the
// observer's counts of commits, rollbacks and lost batches, then exits.
func heldRunnerRole(ctx context.Context, out *emitter) error {
	d, err := openRetry(ctx, os.Getenv(envDriver), os.Getenv(envDSN))
	if err != nil {
		return err
	}
	defer d.close()
	var commits, commitErrs, rollbacks, lost, holdErrs atomic.Int64
	cfg := itemsConfig(envInt(envBatch, 10))
	cfg.Observer = observe.Func(func(_ context.Context, e observe.Event) {
		switch {
		case e.Op == claim.OpCommit && e.Err == nil:
			commits.Add(1)
		case e.Op == claim.OpCommit:
			commitErrs.Add(1)
		case e.Op == claim.OpRollback:
			rollbacks.Add(1)
		case e.Op == claim.OpLost:
			lost.Add(1)
		case e.Op == claim.OpClaim && e.Err != nil:
			holdErrs.Add(1)
		}
	})
	c, err := claim.New(d.d, cfg, itemFields)
	if err != nil {
		return err
	}
	h, err := c.Holder(claim.HoldConfig{Limit: envDuration(envTTL, 2*time.Second), MaxInFlight: 2})
	if err != nil {
		return err
	}
	delay := envDuration(envSendDelay, 0)
	insert := d.sqlf("INSERT INTO {chaos_sends} ({row_id}, {token}, {pid}, {attempt}) VALUES ($1, $2, $3, $4)")
	pid := os.Getpid()
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		// Stop once the task has drained (the check may fail during an
		// outage: then it is simply asked again).
		for rctx.Err() == nil {
			pause(rctx, 200*time.Millisecond)
			sctx, cancel := context.WithTimeout(rctx, 5*time.Second)
			st, err := c.Stats(sctx)
			cancel()
			if err == nil && st.Pending == 0 && st.Processing == 0 {
				stop()
			}
		}
	}()
	err = h.Run(rctx, func(ctx context.Context, b *claim.Held[item]) error {
		tok := store.NewToken()
		ids := make([]int64, b.Len())
		for i, r := range b.Rows() {
			ids[i] = r.ID.(int64)
		}
		out.emit(event{Ev: "run", Tok: tok, IDs: ids, T: time.Now().UnixNano()})
		for _, r := range b.Rows() {
			pause(ctx, delay)
			if _, err := b.Exec(ctx, insert, r.ID, tok, pid, r.Value.Attempts); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, n := range []struct {
		ev string
		n  int64
	}{{"commits", commits.Load()}, {"commiterrs", commitErrs.Load()}, {"rollbacks", rollbacks.Load()}, {"lost", lost.Load()}, {"holderrs", holdErrs.Load()}} {
		out.emit(event{Ev: n.ev, N: n.n})
	}
	out.emit(event{Ev: "exit"})
	return ctx.Err()
}

// TestHeldServerOutages drains a task with three worker processes running
// claim.Holder.Run while the server is SIGKILLed three times and shut down
// cleanly once (the outages of TestServerOutages). Each handler run writes
// its rows' sends in the batch's transaction. Every row ends done with
// exactly one send (its committed effect), none lost or stuck, no attempt
// counted (an outage is not a row's failure), and the test reports how many
// handler runs the outages rolled back and ran again: expected for held
// claims, whose effects roll back with them.
func TestHeldServerOutages(t *testing.T) {
	script := os.Getenv(envOutage)
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			if e.driver == "sqlite" {
				t.Skip("SQLite has no server to restart (and no held claims)")
			}
			if script == "" {
				t.Skipf("SKIPPING: set %s to scripts/restart-servers.sh (and the DSNs to its servers) to run it", envOutage)
			}
			which := map[string]string{"postgres": "pg", "mysql": "mysql"}[e.driver]
			rows := size(3000, 15000)
			dsn := e.dsn(t)
			d := openT(t, e.driver, dsn)
			setup(t, d, rows)
			var workers []*child
			for range 3 {
				workers = append(workers, spawn(t, "heldrunner", envDriver+"="+e.driver, envDSN+"="+dsn, envBatch+"=10",
					envSendDelay+"=1ms", envTTL+"=2s", envLifetime+"="+(3*drainLimit()).String()))
			}
			start := time.Now()
			for i, o := range outages {
				want := int64(rows * (i + 1) / (len(outages) + 2))
				for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
					st, err := stats(context.Background(), d)
					if err == nil && st.Done >= want {
						break
					}
					require.True(t, time.Now().Before(deadline), "no progress before outage %d", i+1)
				}
				t0 := time.Now()
				out, err := exec.Command(script, o.how, which, o.down).CombinedOutput()
				require.NoError(t, err, "%s: %s", script, out)
				fmt.Printf("chaos: held %s %s (down %ss) answering again after %v\n", e.name, o.how, o.down, time.Since(t0).Round(time.Millisecond))
			}
			waitDrained(t, d, drainLimit(), time.Minute)
			drain := time.Since(start)
			var evs []event
			for _, w := range workers {
				w.wait(t, time.Minute)
				require.NoError(t, w.err, "worker %d", w.pid)
				evs = append(evs, w.Events()...)
			}
			r := checkHeldOutages(t, d, rows, evs)
			line := fmt.Sprintf("chaos: scenario=held-server-outages engine=%s outages=%d rows=%d sends=%d rows-sent-twice=%d rows-without-send=%d attempts=%d handler-runs=%d (rows run again after a rollback: %d) commits=%d commit-errors=%d rollbacks=%d lost-batches=%d hold-errors=%d drain=%v",
				e.name, len(outages), rows, r.sends, r.twice, r.unsent, r.attempts, r.runs, r.rerun, r.commits, r.commitErrs, r.rollbacks, r.lost, r.holdErrs, drain.Round(time.Millisecond))
			t.Log(line)
			fmt.Println(line)
			require.Equal(t, rows, r.sends, "one committed send per row")
			require.Zero(t, r.twice, "a row sent by two committed batches")
			require.Zero(t, r.unsent, "a row done without its send")
			require.Zero(t, r.attempts, "an outage counted as a row's failure")
			require.GreaterOrEqual(t, r.runs, rows)
			require.Equal(t, r.runs-rows, r.rerun)
		})
	}
}

// heldOutageReport is what TestHeldServerOutages measured.
type heldOutageReport struct {
	sends, twice, unsent, attempts                 int
	runs, rerun                                    int
	commits, commitErrs, rollbacks, lost, holdErrs int64
}

// checkHeldOutages reads the final state: every row of the task done, the
// other task untouched, the sends per row, the attempts counted; and sums
// the workers' handler runs and observer counts.
func checkHeldOutages(t *testing.T, d *db, rows int, evs []event) heldOutageReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var r heldOutageReport
	var done, other int
	require.NoError(t, d.sql.QueryRowContext(ctx, d.sqlf("SELECT COUNT(*), COALESCE(SUM({attempts}), 0) FROM {chaos_items} WHERE {task_id} = $1 AND {status} = 'DONE'"), taskID).Scan(&done, &r.attempts))
	require.Equal(t, rows, done, "rows of the task not done (lost or stuck)")
	require.NoError(t, d.sql.QueryRowContext(ctx, d.sqlf("SELECT COUNT(*) FROM {chaos_items} WHERE {task_id} = $1 AND {status} = 'PENDING' AND {attempts} = 0"), taskID+1).Scan(&other))
	require.Equal(t, 3, other, "rows outside the scope changed")
	require.NoError(t, d.sql.QueryRowContext(ctx, d.sqlf("SELECT COUNT(*) FROM {chaos_sends}")).Scan(&r.sends))
	require.NoError(t, d.sql.QueryRowContext(ctx, d.sqlf("SELECT COUNT(*) FROM (SELECT {row_id} FROM {chaos_sends} GROUP BY {row_id} HAVING COUNT(*) > 1) x")).Scan(&r.twice))
	require.NoError(t, d.sql.QueryRowContext(ctx, d.sqlf("SELECT COUNT(*) FROM {chaos_items} i WHERE i.{task_id} = $1 AND NOT EXISTS (SELECT 1 FROM {chaos_sends} s WHERE s.{row_id} = i.{id})"), taskID).Scan(&r.unsent))
	for _, ev := range evs {
		switch ev.Ev {
		case "run":
			r.runs += len(ev.IDs)
		case "commits":
			r.commits += ev.N
		case "commiterrs":
			r.commitErrs += ev.N
		case "rollbacks":
			r.rollbacks += ev.N
		case "lost":
			r.lost += ev.N
		case "holderrs":
			r.holdErrs += ev.N
		}
	}
	r.rerun = r.runs - rows
	return r
}

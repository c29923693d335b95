package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/examples/internal/exdb"
	"github.com/claimlock/claimlock/hold"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// The story's tables, as a user already has them.
const (
	taskTable   = "xxx_task"
	targetTable = "xxx_task_target"
	sendsTable  = "xxx_sends"
	callsTable  = "xxx_calls"
	leaseTTL    = 2 * time.Second
)

// The seed's statuses: xxx_task_target.status 0 pending, 1 processing
// (being sent), 2 sent, 3 failed; xxx_task.status 0 open, 2 done.
const (
	statusPending int64 = iota
	statusProcessing
	statusSent
	statusFailed
)

// targetSpec describes xxx_task_target to claimlock: the seed's columns,
// nothing added. cron_token holds the claim token, send_at (integer unix
// seconds, PHP's time()) the claim time, renewed by heartbeats. Without an
// attempts column a row is never parked for being claimed too often: a
// reaped row goes back to pending however often it is reaped.
var targetSpec = dialect.ClaimTable{
	Table: targetTable, ID: "id", Status: "status", Token: "cron_token",
	ClaimedAt: "send_at", ClaimedAtFormat: dialect.UnixSeconds,
	Columns: []string{"openid"}, Scope: []string{"task_id"},
	Pending: dialect.StatusInt(statusPending), Processing: dialect.StatusInt(statusProcessing),
	Done: dialect.StatusInt(statusSent), Failed: dialect.StatusInt(statusFailed),
}

// taskSpec describes the task lease on xxx_task as the seed has it: no
// owner and no fence column, lock_at in unix seconds. The lease is held
// by the lock_at value its acquisition wrote (tasklock.TaskTableNoOwner).
var taskSpec = func() dialect.LeaseTable {
	t := tasklock.TaskTableNoOwner(taskTable)
	t.LockedAtFormat = dialect.UnixSeconds
	return t
}()

// target is the part of a row the sender needs.
type target struct{ OpenID string }

type app struct {
	o       options
	db      *exdb.DB
	log     *slog.Logger
	claims  claim.Config
	claimer *claim.Claimer[target]
	locker  *tasklock.Locker
	reaper  *zombie.Reaper // scoped to the task, for workers and the reaper role
	lost    atomic.Int64
}

func open(ctx context.Context, o options) (*app, error) {
	db, err := exdb.Open(ctx, o.driver, o.dsn, o.role != "all")
	if err != nil {
		return nil, err
	}
	a := &app{o: o, db: db, log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	// The target table as the seed has it: (id, task_id, openid, status,
	// cron_token, send_at), integer statuses, send_at in unix seconds and
	// no attempts column. send_at doubles as the claim/heartbeat time.
	a.claims = claim.Config{
		ClaimTable:  targetSpec,
		ScopeValues: []any{o.task}, RequireScope: true,
		BatchSize: o.batch, Logger: a.log,
		ReapTimeout: o.reapAfter, HeartbeatInterval: o.reapAfter / 4,
		Observer: observe.Func(func(_ context.Context, e observe.Event) { a.lost.Add(int64(e.Lost)) }),
	}
	a.claimer, err = claim.New(db.Dialect, a.claims, func(t *target) []any { return []any{&t.OpenID} })
	if err != nil {
		db.Close()
		return nil, err
	}
	a.locker, err = tasklock.New(db.Dialect, tasklock.Config{Table: taskSpec, TTL: leaseTTL, Logger: a.log})
	if err != nil {
		db.Close()
		return nil, err
	}
	// The reaper sweeps this task's rows only, as its claim config does.
	a.reaper, err = zombie.New(db.Dialect, a.claims, zombie.Config{Timeout: o.reapAfter, Logger: a.log})
	if err != nil {
		db.Close()
		return nil, err
	}
	return a, nil
}

func (a *app) close() { a.db.Close() }

// setup creates the tables (if absent), the recommended indexes, the task
// row and its targets (unless the task has targets already).
func (a *app) setup(ctx context.Context) error {
	// The seed's two tables exactly as the PHP shop has them, and two logs
	// that only this example keeps (to count sends and remote calls).
	tables := []exdb.Table{
		{Name: taskTable, PrimaryKey: []string{"id"}, Columns: []exdb.Column{
			{Name: "id", Kind: exdb.Int, NotNull: true},
			{Name: "status", Kind: exdb.Int, NotNull: true, Default: "0"},
			{Name: "lock_at", Kind: exdb.Int},
		}},
		{Name: targetTable, Columns: []exdb.Column{
			{Name: "id", Kind: exdb.Serial},
			{Name: "task_id", Kind: exdb.Int, NotNull: true},
			{Name: "openid", Kind: exdb.Text, Len: 64, NotNull: true},
			{Name: "status", Kind: exdb.Int, NotNull: true, Default: "0"},
			{Name: "cron_token", Kind: exdb.Text, Len: 40},
			{Name: "send_at", Kind: exdb.Int},
		}},
		{Name: sendsTable, Columns: []exdb.Column{
			{Name: "id", Kind: exdb.Serial},
			{Name: "task_id", Kind: exdb.Int, NotNull: true},
			{Name: "target_id", Kind: exdb.Int, NotNull: true},
			{Name: "worker", Kind: exdb.Text, Len: 80, NotNull: true},
		}, Indexes: [][]string{{"xxx_sends_target", "task_id", "target_id"}}},
		{Name: callsTable, Columns: []exdb.Column{
			{Name: "id", Kind: exdb.Serial},
			{Name: "task_id", Kind: exdb.Int, NotNull: true},
			{Name: "target_id", Kind: exdb.Int, NotNull: true},
			{Name: "worker", Kind: exdb.Text, Len: 80, NotNull: true},
		}, Indexes: [][]string{{"xxx_calls_target", "task_id", "target_id"}}},
	}
	for _, t := range tables {
		if err := a.db.CreateTable(ctx, t); err != nil {
			return err
		}
	}
	// The indexes claimlock's statements need, created once.
	missing, err := a.claimer.MissingIndexes(ctx)
	if err != nil {
		return err
	}
	for _, q := range missing {
		if _, err := a.db.SQL.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return a.createTask(ctx)
}

// createTask inserts the task row and its targets in one transaction, unless
// the task exists already.
func (a *app) createTask(ctx context.Context) error {
	db := a.db
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s = %s", db.Q(taskTable), db.Q("id"), db.Ph(1)), a.o.task).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (%s, 0)", db.Q(taskTable), db.Q("id"), db.Q("status"), db.Ph(1)), a.o.task); err != nil {
		return err
	}
	const chunk = 500
	for start := 0; start < a.o.targets; start += chunk {
		end := min(start+chunk, a.o.targets)
		q := fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES ", db.Q(targetTable), db.Q("task_id"), db.Q("openid"))
		args := make([]any, 0, 2*(end-start))
		for i := start; i < end; i++ {
			if i > start {
				q += ", "
			}
			q += fmt.Sprintf("(%s, %s)", db.Ph(len(args)+1), db.Ph(len(args)+2))
			args = append(args, a.o.task, fmt.Sprintf("openid-%d-%06d", a.o.task, i))
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// send is the side effect: a short sleep (the remote call) and a row in the
// sends log, so duplicates can be counted afterwards.
func (a *app) send(ctx context.Context, worker string, id any) error {
	if a.o.sendDelay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.o.sendDelay):
		}
	}
	db := a.db
	_, err := db.SQL.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s, %s, %s)",
		db.Q(sendsTable), db.Q("task_id"), db.Q("target_id"), db.Q("worker"), db.Ph(1), db.Ph(2), db.Ph(3)), a.o.task, id, worker)
	return err
}

// sendTx is a send with -ack tx: the remote call (a short sleep, logged in
// the calls table at once, as a remote service's own log would be), then
// the sends log row and the row's ack in one transaction. It reports
// whether the row was acked; a lost claim rolls the log row back (the
// row's new owner sends it).
func (a *app) sendTx(ctx context.Context, b *claim.Batch[target], worker string, id any) (bool, error) {
	db := a.db
	if a.o.sendDelay > 0 {
		sleep(ctx, a.o.sendDelay)
	}
	if _, err := db.SQL.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s, %s, %s)",
		db.Q(callsTable), db.Q("task_id"), db.Q("target_id"), db.Q("worker"), db.Ph(1), db.Ph(2), db.Ph(3)), a.o.task, id, worker); err != nil {
		return false, err
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s, %s, %s)",
		db.Q(sendsTable), db.Q("task_id"), db.Q("target_id"), db.Q("worker"), db.Ph(1), db.Ph(2), db.Ph(3)), a.o.task, id, worker); err != nil {
		return false, err
	}
	if err := b.AckTx(ctx, dialect.SQLTx(tx), id); err != nil {
		if errors.Is(err, dialect.ErrClaimLost) {
			return false, nil
		}
		return false, err
	}
	return true, tx.Commit()
}

// finished reports whether the task has nothing pending and nothing
// processing.
func (a *app) finished(ctx context.Context) (bool, error) {
	st, err := a.claimer.Stats(ctx)
	if err != nil {
		return false, err
	}
	return st.Pending == 0 && st.Processing == 0, nil
}

func (a *app) worker(ctx context.Context, name string) error {
	if a.o.mode == "naive" {
		return a.naiveWorker(ctx, name)
	}
	return a.claimWorker(ctx, name)
}

// claimWorker is one cron process in claim mode: take the task lease, claim
// and send batches until the budget runs out, release the lease early (as
// the story did) and go on sending the claimed batch. Overlapping runs are
// harmless because every row is claimed under a token first. When nothing
// is pending it sweeps the task's stale claims, and it ends once the task
// has nothing pending and nothing processing.
func (a *app) claimWorker(ctx context.Context, name string) error {
	for polls := 0; ctx.Err() == nil; polls++ {
		lease, err := a.locker.Acquire(ctx, a.o.task)
		if errors.Is(err, dialect.ErrLeaseHeld) {
			if done, err := a.finished(ctx); err != nil || done {
				return err
			}
			sleep(ctx, backoff(polls, 5*time.Millisecond, 200*time.Millisecond))
			continue
		}
		if err != nil {
			return err
		}
		more, released, err := a.claimRun(ctx, lease, name)
		if !released {
			if _, rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
				err = rerr
			}
		}
		if err != nil {
			return err
		}
		if more {
			polls = -1
			continue
		}
		// Nothing pending: like the story's cron, return this task's stale
		// claims (a crashed run's rows), then stop if everything is done.
		if _, err := a.reaper.Sweep(ctx); err != nil {
			return err
		}
		if done, err := a.finished(ctx); err != nil || done {
			return err
		}
		sleep(ctx, backoff(polls, 20*time.Millisecond, 500*time.Millisecond))
	}
	return nil
}

// claimRun claims and sends batches under the task lease; it returns whether
// a claim found rows and whether it released the lease.
func (a *app) claimRun(ctx context.Context, lease *tasklock.Lease, name string) (found, released bool, err error) {
	start := time.Now()
	for {
		b, err := a.claimer.Claim(ctx)
		if err != nil {
			return found, released, err
		}
		if b.Len() == 0 {
			return found, released, nil
		}
		found = true
		stop := b.KeepAlive(ctx)
		for _, r := range b.Rows() {
			if !released && time.Since(start) > a.o.budget {
				// The story's early release: the next cron run may start
				// now, while this batch is still being sent.
				released = true
				if _, err := lease.Release(ctx); err != nil {
					stop()
					return found, released, err
				}
			}
			if a.o.ack == "tx" {
				if _, err := a.sendTx(ctx, b, name, r.ID); err != nil {
					stop()
					_, _ = b.Release(context.WithoutCancel(ctx))
					return found, released, err
				}
				continue
			}
			// The last check before the side effect, from the clock: a row
			// lost (reaped, taken by another worker) or past the batch's
			// local deadline is not sent; its ack reports it lost.
			rctx, rcancel := b.RowContext(ctx, r.ID)
			if hold.Check(rctx) != nil {
				rcancel()
				continue
			}
			err := a.send(rctx, name, r.ID)
			rcancel()
			if err != nil {
				stop()
				_, _ = b.Release(context.WithoutCancel(ctx))
				return found, released, err
			}
		}
		if a.o.ack == "tx" {
			// Each row was acked with its send; release what a rolled-back
			// transaction left held.
			_, err = b.Release(ctx)
		} else {
			err = b.AckAll(ctx)
		}
		stop()
		if err != nil && !errors.Is(err, dialect.ErrClaimLost) {
			return found, released, err
		}
		if released {
			return found, released, nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// runReaper sweeps every reap-after/4 until ctx ends.
func (a *app) runReaper(ctx context.Context) error {
	return a.reaper.Run(ctx, a.o.reapAfter/4)
}

// all runs setup, the workers, a reaper and the report in this process.
func (a *app) all(ctx context.Context, stdout, stderr io.Writer) error {
	if err := a.setup(ctx); err != nil {
		return err
	}
	started := time.Now()
	rctx, stopReaper := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if a.o.mode == "claim" {
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.runReaper(rctx) }()
	}
	errs := make(chan error, a.o.workers)
	var workers sync.WaitGroup
	for i := 0; i < a.o.workers; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			errs <- a.worker(ctx, fmt.Sprintf("%s#%d", workerName(), i))
		}()
	}
	done := make(chan struct{})
	go func() { workers.Wait(); close(done) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			if !a.o.quiet {
				if r, err := a.report(ctx); err == nil {
					fmt.Fprintf(stderr, "progress: %d/%d sent, %d processing, %d sends logged\n", r.Sent, r.Targets, r.Processing, r.Sends)
				}
			}
		}
	}
	stopReaper()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	elapsed := time.Since(started)
	r, err := a.report(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	r.writeSummary(stdout, a.o, elapsed, a.lost.Load())
	return nil
}

// backoff is the pause before poll n+1 of a loop that found nothing to do:
// base doubled n times, at most max, with jitter (claim's own backoff for
// failed rows, reused for polling).
func backoff(n int, base, max time.Duration) time.Duration {
	return claim.ExponentialBackoff(base, max)(n + 1)
}

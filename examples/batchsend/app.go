package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/examples/internal/exdb"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/schedule"
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

	taskOpen int64 = 0
	taskDone int64 = 2
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
	o      options
	db     *exdb.DB
	log    *slog.Logger
	locker *tasklock.Locker // the task lease on xxx_task
	lost   atomic.Int64     // rows whose claims were found lost, over every task

	mu    sync.Mutex
	tasks map[int64]*taskParts
}

// taskParts are what works on one task's targets: a claimer and a reaper
// scoped to the task (task_id = id), as the story's cron works on one task
// at a time.
type taskParts struct {
	id      int64
	claimer *claim.Claimer[target]
	reaper  *zombie.Reaper
}

func open(ctx context.Context, o options) (*app, error) {
	db, err := exdb.Open(ctx, o.driver, o.dsn, o.role != "all")
	if err != nil {
		return nil, err
	}
	a := &app{o: o, db: db, tasks: map[int64]*taskParts{},
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	a.locker, err = tasklock.New(db.Dialect, tasklock.Config{Table: taskSpec, TTL: leaseTTL, Logger: a.log})
	if err == nil {
		_, err = a.task(o.task) // checks the claim and reaper configuration at once
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return a, nil
}

// task returns the claimer and reaper of task id, made on first use.
func (a *app) task(id int64) (*taskParts, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tp, ok := a.tasks[id]; ok {
		return tp, nil
	}
	cfg := claim.Config{
		ClaimTable:  targetSpec,
		ScopeValues: []any{id}, RequireScope: true,
		BatchSize: a.o.batch, Logger: a.log,
		// A batch stops (its context ends, RowContext refuses the next
		// send) before the reaper may take its rows back: heartbeats
		// every quarter of the timeout keep send_at fresh meanwhile.
		ReapTimeout: a.o.reapAfter, HeartbeatInterval: a.o.reapAfter / 4,
		Observer: observe.Func(func(_ context.Context, e observe.Event) { a.lost.Add(int64(e.Lost)) }),
	}
	c, err := claim.New(a.db.Dialect, cfg, func(t *target) []any { return []any{&t.OpenID} })
	if err != nil {
		return nil, err
	}
	// The reaper sweeps this task's rows only, as its claimer claims them.
	r, err := zombie.New(a.db.Dialect, cfg, zombie.Config{Timeout: a.o.reapAfter, Logger: a.log})
	if err != nil {
		return nil, err
	}
	tp := &taskParts{id: id, claimer: c, reaper: r}
	a.tasks[id] = tp
	return tp, nil
}

func (a *app) close() { a.db.Close() }

// setup creates the tables (if absent), the recommended indexes, the
// scheduler's tables, the task row and its targets (unless the task has
// targets already).
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
	// The indexes claimlock's statements need, created once: indexes, not
	// columns; the seed's columns stay as they are.
	tp, err := a.task(a.o.task)
	if err != nil {
		return err
	}
	missing, err := tp.claimer.MissingIndexes(ctx)
	if err != nil {
		return err
	}
	for _, q := range missing {
		if _, err := a.db.SQL.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	// The scheduler's own two tables (the job's cursor and lease, and its
	// run history), for -schedule.
	if err := schedule.CreateTables(ctx, a.db.Dialect, "", ""); err != nil {
		return err
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
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (%s, %d)", db.Q(taskTable), db.Q("id"), db.Q("status"), db.Ph(1), taskOpen), a.o.task); err != nil {
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

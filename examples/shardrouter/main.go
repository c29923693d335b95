// Command shardrouter shows how to spread work over several databases by
// scope: every task (the claim table's scope value) lives on exactly one
// shard, chosen by a router, and a worker host runs one claimer per task it
// serves, on that task's shard. Each shard is an ordinary claimlock
// database, so both guarantees hold per shard as on one server; nothing
// spans two shards.
//
//	go run ./examples/shardrouter                       # two SQLite shards in a temporary directory
//	go run ./examples/shardrouter -driver postgres -dsn 'postgres://.../shard0,postgres://.../shard1'
//
// -dsn lists one DSN per shard, separated by commas.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/examples/internal/exdb"
)

const table = "shard_jobs"

// Router maps a task to its shard. Modulo of the task id is the simplest
// stable rule; a lookup table (task -> shard) lets tasks move, provided a
// task moves only while none of its rows is processing.
type Router struct{ shards []*exdb.DB }

// Shard returns the index of task's shard.
func (r Router) Shard(task int64) int { return int(task % int64(len(r.shards))) }

// DB returns task's shard.
func (r Router) DB(task int64) *exdb.DB { return r.shards[r.Shard(task)] }

// config is the claim configuration of one task.
func config(task int64) claim.Config {
	return claim.Config{
		ClaimTable:  dialect.ClaimTable{Table: table, Scope: []string{"task_id"}},
		ScopeValues: []any{task}, RequireScope: true, BatchSize: 50,
	}
}

// result is what a run did: rows handled per shard and per task.
type result struct {
	perShard []int64
	perTask  map[int64]int64
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shardrouter:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	_, err := runResult(ctx, args, out)
	return err
}

func runResult(ctx context.Context, args []string, out io.Writer) (*result, error) {
	fs := flag.NewFlagSet("shardrouter", flag.ContinueOnError)
	fs.SetOutput(out)
	driver := fs.String("driver", "sqlite", "sqlite, postgres or mysql")
	dsns := fs.String("dsn", "", "comma-separated DSNs, one per shard (sqlite: empty for temporary files)")
	shards := fs.Int("shards", 2, "number of SQLite shards when -dsn is empty")
	tasks := fs.Int("tasks", 6, "number of tasks")
	rows := fs.Int("rows", 200, "rows per task")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	list := strings.Split(*dsns, ",")
	if *dsns == "" {
		if *driver != "sqlite" {
			return nil, errors.New("-dsn is required for servers")
		}
		list = make([]string, *shards)
	}
	if len(list) == 0 || *tasks <= 0 || *rows <= 0 {
		return nil, errors.New("-shards, -tasks and -rows must be positive")
	}
	var r Router
	for _, dsn := range list {
		db, err := exdb.Open(ctx, *driver, strings.TrimSpace(dsn), false)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		if err := createTable(ctx, db); err != nil {
			return nil, err
		}
		r.shards = append(r.shards, db)
	}
	for task := int64(1); task <= int64(*tasks); task++ {
		if err := insertRows(ctx, r.DB(task), task, *rows); err != nil {
			return nil, err
		}
	}

	// One claimer per task, on the task's shard, each with two workers;
	// every claimer stops once its task is drained.
	res := &result{perShard: make([]int64, len(r.shards)), perTask: map[int64]int64{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, *tasks)
	for task := int64(1); task <= int64(*tasks); task++ {
		shard := r.Shard(task)
		c, err := claim.New(r.DB(task).Dialect, config(task), func(*struct{}) []any { return nil })
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var done atomic.Int64
			tctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				for tctx.Err() == nil {
					st, err := c.Stats(tctx)
					if err == nil && st.Pending == 0 && st.Processing == 0 {
						cancel()
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
			err := c.Run(tctx, claim.WorkerConfig[struct{}]{
				Workers: 2, PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond,
				Handler: func(context.Context, claim.Row[struct{}]) error { done.Add(1); return nil },
			})
			if err != nil {
				errs <- err
			}
			mu.Lock()
			res.perShard[shard] += done.Load()
			res.perTask[task] += done.Load()
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	for i, n := range res.perShard {
		fmt.Fprintf(out, "shard %d: %d rows handled\n", i, n)
	}
	return res, nil
}

// createTable creates the jobs table and its recommended indexes.
func createTable(ctx context.Context, db *exdb.DB) error {
	err := db.CreateTable(ctx, exdb.Table{Name: table, Columns: []exdb.Column{
		{Name: "id", Kind: exdb.Serial},
		{Name: "task_id", Kind: exdb.Int, NotNull: true},
		{Name: "status", Kind: exdb.Text, Len: 32, NotNull: true, Default: "'PENDING'"},
		{Name: "token", Kind: exdb.Text, Len: 40},
		{Name: "claimed_at", Kind: exdb.Time},
	}})
	if err != nil {
		return err
	}
	c, err := claim.New(db.Dialect, config(1), func(*struct{}) []any { return nil })
	if err != nil {
		return err
	}
	missing, err := c.MissingIndexes(ctx)
	if err != nil {
		return err
	}
	for _, q := range missing {
		if _, err := db.SQL.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// insertRows adds n pending rows of task.
func insertRows(ctx context.Context, db *exdb.DB, task int64, n int) error {
	q := fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (%s, 'PENDING')", db.Q(table), db.Q("task_id"), db.Q("status"), db.Ph(1))
	for range n {
		if _, err := db.SQL.ExecContext(ctx, q, task); err != nil {
			return err
		}
	}
	return nil
}

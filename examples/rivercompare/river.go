package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

const (
	// riverSchema is the schema River's tables are migrated into, dropped
	// and created again for every River line.
	riverSchema = "rivercompare_river"
	// riverInsertChunk is the number of jobs per InsertMany call.
	riverInsertChunk = 1000
	// riverMaxWorkers is the most River accepts in QueueConfig.MaxWorkers.
	riverMaxWorkers = 10_000
)

// noopArgs are the arguments of a River job: its number.
type noopArgs struct {
	Seq int64 `json:"seq"`
}

// Kind is the River job kind.
func (noopArgs) Kind() string { return "rivercompare_noop" }

// noopWorker records each execution of a job and does nothing else.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	t *tracker
}

// Work runs one job.
func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	w.t.start(job.Args.Seq)
	w.t.end(job.Args.Seq)
	return nil
}

// riverConfig is the River configuration of one line.
type riverConfig struct {
	clients, queues int
	// slots is MaxWorkers of each queue of each client.
	slots              int
	cooldown, poll     time.Duration
	completedRetention time.Duration
}

func (rc riverConfig) String() string {
	return fmt.Sprintf("clients=%d queues/client=%d MaxWorkers/queue=%d FetchCooldown=%s FetchPollInterval=%s CompletedJobRetentionPeriod=%s",
		rc.clients, rc.queues, rc.slots, rc.cooldown, rc.poll, rc.completedRetention)
}

// String is the line as the -river flag spells it.
func (l riverLine) String() string {
	if l.clients == 1 {
		return fmt.Sprint(l.mult)
	}
	return fmt.Sprintf("%d/%d", l.mult, l.clients)
}

// riverConfig is the configuration of River line l at a worker count.
func (c *compare) riverConfig(workers int, l riverLine) riverConfig {
	return riverConfig{clients: l.clients, queues: c.o.riverQueues,
		slots:    max(1, workers*l.mult/(l.clients*c.o.riverQueues)),
		cooldown: c.o.riverCooldown, poll: c.o.riverPoll, completedRetention: c.o.riverKeep}
}

func queueName(i int) string { return fmt.Sprintf("q%d", i) }

// river migrates River's schema afresh, inserts the jobs (not timed), then
// starts the clients and times until every job is completed.
func (c *compare) river(ctx context.Context, workers int, l riverLine) (result, error) {
	rc := c.riverConfig(workers, l)
	r := c.base("river", "river/x"+l.String(), workers)
	r.Config = rc.String()
	// Every client keeps a few connections of its own (the listener, the
	// completer, leader election and the maintenance services) besides its
	// fetches.
	pool, err := c.pool(ctx, workers+4+4*rc.clients)
	if err != nil {
		return r, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident(riverSchema)+" CASCADE"); err != nil {
		return r, err
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+ident(riverSchema)); err != nil {
		return r, err
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: riverSchema, Logger: c.log})
	if err != nil {
		return r, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return r, fmt.Errorf("migrate: %w", err)
	}

	t := newTracker(c.o.jobs)
	workersReg := river.NewWorkers()
	if err := river.AddWorkerSafely(workersReg, &noopWorker{t: t}); err != nil {
		return r, err
	}
	queues := map[string]river.QueueConfig{}
	for q := range rc.queues {
		queues[queueName(q)] = river.QueueConfig{MaxWorkers: rc.slots}
	}
	clients := make([]*river.Client[pgx.Tx], rc.clients)
	for i := range clients {
		cl, err := river.NewClient(driver, &river.Config{
			ID:                          fmt.Sprintf("rivercompare-%d", i),
			Schema:                      riverSchema,
			Queues:                      queues,
			Workers:                     workersReg,
			FetchCooldown:               rc.cooldown,
			FetchPollInterval:           rc.poll,
			CompletedJobRetentionPeriod: rc.completedRetention,
			Logger:                      c.log,
		})
		if err != nil {
			return r, err
		}
		clients[i] = cl
	}

	// Load the jobs, spread over the queues, through the first client.
	params := make([]river.InsertManyParams, 0, riverInsertChunk)
	for start := 0; start < c.o.jobs; start += riverInsertChunk {
		params = params[:0]
		for i := start; i < min(start+riverInsertChunk, c.o.jobs); i++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{Seq: int64(i)},
				InsertOpts: &river.InsertOpts{Queue: queueName(i % rc.queues)}})
		}
		if _, err := clients[0].InsertMany(ctx, params); err != nil {
			return r, fmt.Errorf("insert: %w", err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+ident(riverSchema)+".river_job"); err != nil {
		return r, err
	}

	// Completion events come from each client's completer once it has
	// written the jobs' completed state; a channel with room for every job
	// drops none.
	done := make(chan int, c.o.jobs+1)
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	for _, cl := range clients {
		events, cancel := cl.SubscribeConfig(&river.SubscribeConfig{ChanSize: c.o.jobs + 1,
			Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled}})
		defer cancel()
		go func() {
			for {
				select {
				case <-subCtx.Done():
					return
				case e, ok := <-events:
					if !ok {
						return
					}
					if e.Kind == river.EventKindJobCompleted {
						done <- 1
					} else {
						done <- -1 // failed or cancelled: reported below
					}
				}
			}
		}()
	}

	start := time.Now()
	for _, cl := range clients {
		if err := cl.Start(ctx); err != nil {
			return r, err
		}
	}
	completed, bad := 0, 0
	for completed < c.o.jobs && bad == 0 {
		select {
		case n := <-done:
			if n > 0 {
				completed++
			} else {
				bad++
			}
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	elapsed := time.Since(start)
	var stopErr error
	for _, cl := range clients {
		stopErr = errors.Join(stopErr, cl.Stop(context.WithoutCancel(ctx)))
	}
	if bad > 0 {
		return r, fmt.Errorf("a job failed or was cancelled after %d completions", completed)
	}
	if stopErr != nil {
		return r, stopErr
	}
	if err := c.finish(&r, elapsed, t); err != nil {
		return r, err
	}
	// The database must agree: every job completed, none in another state.
	rows, err := pool.Query(ctx, "SELECT state::text, count(*) FROM "+ident(riverSchema)+".river_job GROUP BY state")
	if err != nil {
		return r, err
	}
	states := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return r, err
		}
		states[s] = n
	}
	if err := rows.Err(); err != nil {
		return r, err
	}
	if len(states) != 1 || states["completed"] != c.o.jobs {
		return r, fmt.Errorf("river_job states after the run: %v, want completed: %d", states, c.o.jobs)
	}
	return r, nil
}

// Command batchsend is the cron batch-send story, runnable, on the story's
// own schema as it is.
//
// A task has N targets to "send" (a short sleep and an insert into a sends
// log). The tables are the PHP shop's seed, with no column added:
//
//	xxx_task(id, status, lock_at)                              -- status 0 open, 2 done; lock_at unix seconds
//	xxx_task_target(id, task_id, openid, status, cron_token, send_at)  -- status 0 pending, 1 processing, 2 sent, 3 failed; send_at unix seconds
//
// The task lease lives in xxx_task without an owner or fence column (held
// by the lock_at value it wrote, tasklock.TaskTableNoOwner); a row claim
// writes its token to cron_token and its claim time to send_at; without an
// attempts column a reaped row simply goes back to pending. claimlock adds
// indexes (Claimer.MissingIndexes), and package schedule its own two
// tables (claimlock_jobs, claimlock_runs) for -schedule.
//
// Several cron workers run at once. In -mode claim they take the task
// lease, claim rows under a token, send, and ack by token, while a reaper
// returns the rows of workers that died: nothing is sent twice. In -mode
// naive they run the old algorithm — task lock, SELECT pending rows, send,
// release the lock early when the time budget runs out — and the next worker
// sends the same rows again.
//
//	go run ./examples/batchsend                        # claim mode on SQLite: duplicates = 0
//	go run ./examples/batchsend -mode naive -workers 2 # the bug: duplicates > 0
//	go run ./examples/batchsend -ack tx                # send log and ack in one transaction
//	go run ./examples/batchsend -schedule 1s           # cron processes driven by package schedule
//
// With -schedule D the workers are cron processes: each runs the job
// "batchsend" through package schedule at every multiple of D, and each
// fire time runs once across all of them, decided on the database clock. A
// run works on every open task for at most four fifths of D (the story's
// job sent for 50 s of each minute), in turns of the same algorithm: task
// lease, claims, early release. -role send is an operator's manual run of
// one task (-task-id), now, beside the cron processes: it takes no task
// lease and relies on the row claims alone, which keep it and a cron run
// on the same task from sending any row twice.
//
// With -ack tx each send is a remote call (logged in a calls table as it
// happens, outside any transaction) and a row in the sends log written in
// the same transaction as the row's ack (claim.Batch.AckTx): a worker killed
// between the call and the commit leaves neither the log row nor the ack,
// so the sends log has exactly one row per target, while the remote call,
// which no transaction can take back, is made again (at-least-once). With
// -ack batch (the default) a worker killed after sending rows and before
// acking them leaves them to be sent again: at most the batch it held.
//
// With -role, each part runs as its own process against a shared database:
// setup (tables, indexes, the task -task-id and its targets), worker (until
// the task has nothing pending or processing; with -schedule, a cron
// process until stopped), send (the manual run of -task-id), reaper (until
// stopped), report (one JSON line). SIGINT and SIGTERM stop a process
// cleanly: a batch being sent acks the rows it sent and releases the rest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

type options struct {
	driver, dsn, mode, role string
	ack                     string
	targets, workers, batch int
	task                    int64
	schedule                time.Duration
	sendDelay, budget       time.Duration
	reapAfter               time.Duration
	quiet                   bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "batchsend:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("batchsend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.driver, "driver", "sqlite", "database: sqlite, mysql or postgres")
	fs.StringVar(&o.dsn, "dsn", "", "data source name (default for sqlite: a file in a new temporary directory)")
	fs.StringVar(&o.mode, "mode", "claim", "claim (task lease + row claims + reaper) or naive (task lock only: shows the double-send bug)")
	fs.StringVar(&o.role, "role", "all", "all, setup, worker, send (a manual run of -task-id now), reaper or report")
	fs.StringVar(&o.ack, "ack", "batch", "claim mode: batch (log each send, ack the batch in one statement) or tx (log each send and ack it in one transaction)")
	fs.IntVar(&o.targets, "targets", 2000, "targets to create for the task (setup)")
	fs.IntVar(&o.workers, "workers", 4, "concurrent cron workers (role all)")
	fs.IntVar(&o.batch, "batch", 50, "rows per claim or per naive SELECT")
	fs.Int64Var(&o.task, "task-id", 1, "the task to set up, work on (worker, send), sweep (reaper) or report; cron processes (-schedule) work on every open task")
	fs.DurationVar(&o.schedule, "schedule", 0, "claim mode: workers are cron processes that run the batch-send job at every multiple of this period through package schedule, each fire time once across them (0: workers loop on -task-id until it is done)")
	fs.DurationVar(&o.sendDelay, "send-delay", time.Millisecond, "time one send takes")
	fs.DurationVar(&o.budget, "budget", 30*time.Millisecond, "time a worker keeps the task lock before releasing it for the next cron run (the story's 50 s, scaled down)")
	// Ten seconds, not less: the claim time is a column of whole seconds,
	// and on a loaded machine (a test suite beside it) a SQLite heartbeat
	// or a logged send can wait a second for the write lock; a shorter
	// timeout lets the reaper take live batches, and a send checked in time
	// is logged after the row went to another worker.
	fs.DurationVar(&o.reapAfter, "reap-after", 10*time.Second, "claim timeout: rows processing longer without a heartbeat are returned by the reaper")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.mode != "claim" && o.mode != "naive":
		return o, fmt.Errorf("-mode %q: want claim or naive", o.mode)
	case o.ack != "batch" && o.ack != "tx":
		return o, fmt.Errorf("-ack %q: want batch or tx", o.ack)
	case o.role != "all" && o.role != "setup" && o.role != "worker" && o.role != "send" && o.role != "reaper" && o.role != "report":
		return o, fmt.Errorf("-role %q: want all, setup, worker, send, reaper or report", o.role)
	case o.schedule < 0:
		return o, errors.New("-schedule must not be negative")
	case o.schedule > 0 && o.mode != "claim":
		return o, errors.New("-schedule needs -mode claim")
	case o.role == "send" && o.mode != "claim":
		return o, errors.New("-role send needs -mode claim")
	case o.targets < 0 || o.workers < 1 || o.batch < 1 || o.batch > 10000:
		return o, errors.New("-targets must be >= 0, -workers >= 1 and -batch between 1 and 10000")
	case o.sendDelay < 0 || o.budget <= 0 || o.reapAfter <= 0:
		return o, errors.New("-send-delay must be >= 0, -budget and -reap-after positive")
	case o.role != "all" && o.driver == "sqlite" && o.dsn == "":
		return o, errors.New("-role other than all needs -dsn (a SQLite file path shared by the processes)")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	app, err := open(ctx, o)
	if err != nil {
		return err
	}
	defer app.close()
	switch o.role {
	case "setup":
		return app.setup(ctx)
	case "worker":
		return app.worker(ctx, workerName())
	case "send":
		return app.sendNow(ctx, workerName())
	case "reaper":
		return app.runReaper(ctx)
	case "report":
		r, err := app.report(ctx)
		if err != nil {
			return err
		}
		return r.writeJSON(stdout)
	}
	return app.all(ctx, stdout, stderr)
}

func workerName() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", h, os.Getpid())
}

package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/claimlock/claimlock/claim"
)

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// runReaper sweeps the task's stale claims every reap-after/4 until ctx
// ends.
func (a *app) runReaper(ctx context.Context) error {
	tp, err := a.task(a.o.task)
	if err != nil {
		return err
	}
	return tp.reaper.Run(ctx, a.o.reapAfter/4)
}

// all runs setup, the workers, a reaper and the report in this process.
// With -schedule the workers are cron processes that run until the task
// is done.
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
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var workers sync.WaitGroup
	for i := 0; i < a.o.workers; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			errs <- a.worker(wctx, fmt.Sprintf("%s#%d", workerName(), i))
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
			r, err := a.report(ctx)
			if err != nil {
				continue
			}
			if !a.o.quiet {
				fmt.Fprintf(stderr, "progress: %d/%d sent, %d processing, %d sends logged\n", r.Sent, r.Targets, r.Processing, r.Sends)
			}
			if a.o.schedule > 0 && r.TaskStatus == taskDone {
				// Cron processes run until stopped: stop them once a
				// run has closed the task.
				stopWorkers()
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

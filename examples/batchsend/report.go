package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/claimlock/claimlock/schedule"
)

// report is the state of the task as read from the database.
type report struct {
	Targets        int64 `json:"targets"`
	Pending        int64 `json:"pending"`
	Processing     int64 `json:"processing"`
	Sent           int64 `json:"sent"`
	Failed         int64 `json:"failed"`
	Sends          int64 `json:"sends"`
	DuplicateSends int64 `json:"duplicate_sends"`
	// Calls and DuplicateCalls count the remote calls of -ack tx (made
	// outside any transaction).
	Calls          int64 `json:"calls"`
	DuplicateCalls int64 `json:"duplicate_calls"`
	// TaskStatus is xxx_task.status: 0 open, 2 done (set by the turn
	// that found the task finished, as it freed the task lease).
	TaskStatus int64 `json:"task_status"`
	// CronRuns counts the runs of the scheduled job (-schedule) in its
	// history, one per fire time run, over every task; CronWorkers counts
	// the processes that ran them.
	CronRuns    int64 `json:"cron_runs"`
	CronWorkers int64 `json:"cron_workers"`
}

func (a *app) report(ctx context.Context) (report, error) {
	var r report
	tp, err := a.task(a.o.task)
	if err != nil {
		return r, err
	}
	st, err := tp.claimer.Stats(ctx)
	if err != nil {
		return r, err
	}
	r.Pending, r.Processing, r.Sent, r.Failed = st.Pending, st.Processing, st.Done, st.Failed
	r.Targets = st.Pending + st.Processing + st.Done + st.Failed + st.Other
	db := a.db
	q := fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s = %s", db.Q(sendsTable), db.Q("task_id"), db.Ph(1))
	if err := db.SQL.QueryRowContext(ctx, q, a.o.task).Scan(&r.Sends); err != nil {
		return r, err
	}
	q = fmt.Sprintf("SELECT COUNT(*) FROM (SELECT %[1]s FROM %[2]s WHERE %[3]s = %[4]s GROUP BY %[1]s HAVING COUNT(*) > 1) dup",
		db.Q("target_id"), db.Q(sendsTable), db.Q("task_id"), db.Ph(1))
	if err := db.SQL.QueryRowContext(ctx, q, a.o.task).Scan(&r.DuplicateSends); err != nil {
		return r, err
	}
	q = fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s = %s", db.Q(callsTable), db.Q("task_id"), db.Ph(1))
	if err := db.SQL.QueryRowContext(ctx, q, a.o.task).Scan(&r.Calls); err != nil {
		return r, err
	}
	q = fmt.Sprintf("SELECT COUNT(*) FROM (SELECT %[1]s FROM %[2]s WHERE %[3]s = %[4]s GROUP BY %[1]s HAVING COUNT(*) > 1) dup",
		db.Q("target_id"), db.Q(callsTable), db.Q("task_id"), db.Ph(1))
	if err := db.SQL.QueryRowContext(ctx, q, a.o.task).Scan(&r.DuplicateCalls); err != nil {
		return r, err
	}
	q = fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", db.Q("status"), db.Q(taskTable), db.Q("id"), db.Ph(1))
	if err := db.SQL.QueryRowContext(ctx, q, a.o.task).Scan(&r.TaskStatus); err != nil {
		return r, err
	}
	s, err := a.newScheduler(workerName())
	if err != nil {
		return r, err
	}
	runs, err := s.History(ctx, cronJob, time.Time{}, 10000)
	if err != nil {
		return r, err
	}
	workers := map[string]bool{}
	for _, run := range runs {
		if run.Status != schedule.Skipped {
			r.CronRuns++
			workers[run.Worker] = true
		}
	}
	r.CronWorkers = int64(len(workers))
	return r, nil
}

func (r report) writeJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func (r report) writeSummary(w io.Writer, o options, elapsed time.Duration, lost int64) {
	fmt.Fprintf(w, "batchsend: mode=%s ack=%s driver=%s task=%d workers=%d batch=%d send-delay=%v budget=%v schedule=%v\n",
		o.mode, o.ack, o.driver, o.task, o.workers, o.batch, o.sendDelay, o.budget, o.schedule)
	fmt.Fprintf(w, "targets:         %d\n", r.Targets)
	fmt.Fprintf(w, "sent:            %d\n", r.Sent)
	fmt.Fprintf(w, "failed:          %d\n", r.Failed)
	fmt.Fprintf(w, "left pending:    %d (processing %d)\n", r.Pending, r.Processing)
	fmt.Fprintf(w, "sends logged:    %d\n", r.Sends)
	fmt.Fprintf(w, "duplicate sends: %d\n", r.DuplicateSends)
	if o.schedule > 0 {
		fmt.Fprintf(w, "cron runs:       %d (one per fire time, by %d of the %d processes)\n", r.CronRuns, r.CronWorkers, o.workers)
	}
	if o.ack == "tx" {
		fmt.Fprintf(w, "remote calls:    %d (%d targets called more than once: a call cannot be rolled back)\n", r.Calls, r.DuplicateCalls)
	}
	if lost > 0 {
		fmt.Fprintf(w, "lost claims:     %d (rows reaped from a slow worker; its acks changed nothing)\n", lost)
	}
	rate := 0.0
	if elapsed > 0 {
		rate = float64(r.Sent) / elapsed.Seconds()
	}
	fmt.Fprintf(w, "elapsed:         %v (%.0f rows/s)\n", elapsed.Round(time.Millisecond), rate)
}

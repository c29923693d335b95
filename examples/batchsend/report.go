package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
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
}

func (a *app) report(ctx context.Context) (report, error) {
	var r report
	st, err := a.claimer.Stats(ctx)
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
	fmt.Fprintf(w, "batchsend: mode=%s ack=%s driver=%s task=%d workers=%d batch=%d send-delay=%v budget=%v\n",
		o.mode, o.ack, o.driver, o.task, o.workers, o.batch, o.sendDelay, o.budget)
	fmt.Fprintf(w, "targets:         %d\n", r.Targets)
	fmt.Fprintf(w, "sent:            %d\n", r.Sent)
	fmt.Fprintf(w, "failed:          %d\n", r.Failed)
	fmt.Fprintf(w, "left pending:    %d (processing %d)\n", r.Pending, r.Processing)
	fmt.Fprintf(w, "sends logged:    %d\n", r.Sends)
	fmt.Fprintf(w, "duplicate sends: %d\n", r.DuplicateSends)
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

package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// claimSpec builds the claim table's description from the flags. check,
// if not nil, vets it first (the columns a command needs, its flags), so
// that a usage error never waits for the database.
func (e *env) claimSpec(check func(dialect.ClaimTable) error) (dialect.ClaimTable, error) {
	spec, err := e.o.claimTable()
	if err != nil {
		return spec, err
	}
	if check != nil {
		if err := check(spec); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

// claimer builds the claimer of spec's table for scope and verifies the
// table: it and every configured column must exist before anything is
// read or changed. A scoped table counted or swept whole has no scope
// values; its claimer gets placeholders (wholeTable), which the
// whole-table calls ignore.
func (e *env) claimer(ctx context.Context, spec dialect.ClaimTable, scope []any) (*claim.Claimer[struct{}], error) {
	if scope == nil {
		scope = wholeTable(spec)
	}
	c, err := claim.New[struct{}](e.d, claimConfig(spec, scope), nil)
	if err != nil {
		return nil, usageErr("table description: %v", err)
	}
	if err := c.Verify(ctx); err != nil {
		return nil, schemaErr(err)
	}
	return c, nil
}

// wholeTable returns scope values for a claim configuration of spec that
// is used whole (Claimer.TableStats, a reaper with AllScopes): one
// placeholder per scope column, which those calls ignore; nil for an
// unscoped table.
func wholeTable(spec dialect.ClaimTable) []any {
	if len(spec.Scope) == 0 {
		return nil
	}
	scope := make([]any, len(spec.Scope))
	for i := range scope {
		scope[i] = int64(0)
	}
	return scope
}

// scopeLabel renders scope values as "col=value,...", "" for none.
func scopeLabel(cols []string, values []any) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = fmt.Sprintf("%s=%v", cols[i], v)
	}
	return strings.Join(parts, ",")
}

// statsRow is one line of the stats command.
type statsRow struct {
	Table                   string  `json:"table"`
	Scope                   string  `json:"scope"`
	Pending                 int64   `json:"pending"`
	Processing              int64   `json:"processing"`
	Done                    int64   `json:"done"`
	Failed                  int64   `json:"failed"`
	Other                   int64   `json:"other"`
	OldestPendingSeconds    float64 `json:"oldest_pending_seconds"`
	OldestProcessingSeconds float64 `json:"oldest_processing_seconds"`

	oldestPending, oldestProcessing time.Duration
}

func cmdStats(ctx context.Context, e *env) error {
	var scopes [][]any
	spec, err := e.claimSpec(func(spec dialect.ClaimTable) (err error) {
		scopes, err = e.o.scopeValues(spec)
		return err
	})
	if err != nil {
		return err
	}
	if len(scopes) == 0 {
		scopes = [][]any{nil} // the whole table
	}
	var rows []statsRow
	for _, sv := range scopes {
		c, err := e.claimer(ctx, spec, sv)
		if err != nil {
			return err
		}
		label := scopeLabel(spec.Scope, sv)
		stats := c.Stats
		if sv == nil {
			label, stats = "(all)", c.TableStats
		}
		st, err := stats(ctx)
		if err != nil {
			return err
		}
		rows = append(rows, statsRow{
			Table: spec.Table, Scope: label, Pending: st.Pending, Processing: st.Processing, Done: st.Done,
			Failed: st.Failed, Other: st.Other, OldestPendingSeconds: seconds(st.OldestPending),
			OldestProcessingSeconds: seconds(st.OldestProcessing), oldestPending: st.OldestPending, oldestProcessing: st.OldestProcessing,
		})
	}
	if e.o.JSON {
		return printJSON(e.out, rows)
	}
	var cells [][]string
	for _, r := range rows {
		op := age(r.oldestPending)
		if spec.CreatedAt == "" {
			op = "n/a" // no creation time to measure it by
		}
		cells = append(cells, []string{r.Table, r.Scope, itoa(r.Pending), itoa(r.Processing), itoa(r.Done), itoa(r.Failed), itoa(r.Other),
			op, age(r.oldestProcessing)})
	}
	return printTable(e.out, []string{"TABLE", "SCOPE", "PENDING", "PROCESSING", "DONE", "FAILED", "OTHER", "OLDEST PENDING", "OLDEST PROCESSING"}, cells)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// rowOut is one listed row.
type rowOut struct {
	ID                any     `json:"id"`
	Token             string  `json:"token,omitempty"`
	Attempts          int64   `json:"attempts"`
	ClaimedAgeSeconds float64 `json:"claimed_age_seconds"`
	RunInSeconds      float64 `json:"run_in_seconds"`
	Error             string  `json:"error,omitempty"`
	// Worker is who holds a stuck row's claim: the worker column's text
	// (the claimer's Config.Worker), or "unknown" in a table without one,
	// which records only the token.
	Worker string `json:"worker,omitempty"`
	// Note says what the table cannot tell (no error column).
	Note string `json:"note,omitempty"`
}

// listRows lists set in the one scope given and prints the rows.
func (e *env) listRows(ctx context.Context, set claim.RowSet, olderThan time.Duration) error {
	var scope []any
	spec, err := e.claimSpec(func(spec dialect.ClaimTable) (err error) {
		if set == claim.Scheduled && spec.RunAt == "" {
			return usageErr("needs the -run-at column")
		}
		scope, err = e.o.oneScope(spec)
		return err
	})
	if err != nil {
		return err
	}
	c, err := e.claimer(ctx, spec, scope)
	if err != nil {
		return err
	}
	rows, err := c.List(ctx, set, olderThan, e.o.Limit)
	if err != nil {
		return err
	}
	out := make([]rowOut, len(rows))
	for i, r := range rows {
		ca := seconds(r.ClaimedAge)
		if r.ClaimedAge < 0 {
			ca = -1
		}
		out[i] = rowOut{ID: r.ID, Token: r.Token, Attempts: r.Attempts, ClaimedAgeSeconds: ca, RunInSeconds: seconds(r.RunIn), Error: r.Error}
		if spec.Error == "" && set != claim.Stuck {
			out[i].Note = "table has no error column"
		}
		if set == claim.Stuck {
			out[i].Worker = workerOf(spec, r)
		}
	}
	if e.o.JSON {
		return printJSON(e.out, out)
	}
	var cells [][]string
	for _, r := range rows {
		tok := r.Token
		if tok == "" {
			tok = "-"
		}
		errText := r.Error
		switch {
		case spec.Error == "":
			errText = noErrorColumn
		case errText == "":
			errText = "-"
		}
		switch set {
		case claim.Stuck:
			cells = append(cells, []string{fmt.Sprint(r.ID), tok, cut(workerOf(spec, r), 40), itoa(r.Attempts), age(r.ClaimedAge)})
		case claim.Parked:
			cells = append(cells, []string{fmt.Sprint(r.ID), itoa(r.Attempts), age(r.ClaimedAge), cut(errText, 60)})
		default:
			cells = append(cells, []string{fmt.Sprint(r.ID), itoa(r.Attempts), age(r.RunIn), cut(errText, 60)})
		}
	}
	switch set {
	case claim.Stuck:
		err = printTable(e.out, []string{"ID", "TOKEN", "WORKER", "ATTEMPTS", "CLAIMED AGO"}, cells)
	case claim.Parked:
		err = printTable(e.out, []string{"ID", "ATTEMPTS", "LAST CLAIM AGO", "ERROR"}, cells)
	default:
		err = printTable(e.out, []string{"ID", "ATTEMPTS", "RUNS IN", "ERROR"}, cells)
	}
	if err == nil && len(rows) == e.o.Limit {
		fmt.Fprintf(e.out, "(first %d rows; raise -limit for more)\n", e.o.Limit)
	}
	if err == nil && set == claim.Stuck && len(rows) > 0 && spec.Worker == "" {
		fmt.Fprintln(e.out, noWorkerNote)
	}
	return err
}

// noErrorColumn stands for the error of a row in a table without an error
// column, so that an empty cell is not read as "no error".
const noErrorColumn = "(no error column)"

// noWorkerColumn stands for the worker of a stuck row on the status page
// when the table has no worker column.
const noWorkerColumn = "(no worker column)"

// noWorkerNote says what a token tells of a worker in a table without a
// worker column: it records the claim's token, not who claimed.
const noWorkerNote = "(worker unknown: the table has no worker column (-worker) and records the claim's token only; the worker's own log or observer names its token)"

// workerOf is who holds r's claim as the table tells: its worker column's
// text, "-" when that is empty (a row claimed before the column was
// added), or "unknown" without the column.
func workerOf(spec dialect.ClaimTable, r claim.RowInfo) string {
	switch {
	case spec.Worker == "":
		return "unknown"
	case r.Worker == "":
		return "-"
	}
	return r.Worker
}

func cmdStuck(ctx context.Context, e *env) error {
	if e.o.Older <= 0 {
		return usageErr("-older must be positive")
	}
	return e.listRows(ctx, claim.Stuck, e.o.Older)
}

func cmdParked(ctx context.Context, e *env) error {
	return e.listRows(ctx, claim.Parked, 0)
}

func cmdScheduled(ctx context.Context, e *env) error {
	return e.listRows(ctx, claim.Scheduled, 0)
}

// rowTarget is what a command that changes rows acts on: the verified
// claim table's claimer for the -scope, and the -ids.
type rowTarget struct {
	spec       dialect.ClaimTable
	c          *claim.Claimer[struct{}]
	scope, ids []any
}

// rowTarget reads the target of a row command from the flags, then builds
// the claimer and verifies the table; check, if not nil, vets the
// description first.
func (e *env) rowTarget(ctx context.Context, check func(dialect.ClaimTable) error) (*rowTarget, error) {
	t := &rowTarget{}
	var err error
	t.spec, err = e.claimSpec(func(spec dialect.ClaimTable) error {
		if check != nil {
			if err := check(spec); err != nil {
				return err
			}
		}
		if t.scope, err = e.o.oneScope(spec); err != nil {
			return err
		}
		t.ids, err = e.o.ids(spec)
		return err
	})
	if err != nil {
		return t, err
	}
	t.c, err = e.claimer(ctx, t.spec, t.scope)
	return t, err
}

// String describes the target's rows for a confirmation question.
func (t *rowTarget) String() string {
	where := t.spec.Table
	if len(t.scope) > 0 {
		where += " where " + scopeLabel(t.spec.Scope, t.scope)
	}
	if len(t.ids) > 0 {
		parts := make([]string, len(t.ids))
		for i, id := range t.ids {
			parts[i] = fmt.Sprint(id)
		}
		return fmt.Sprintf("rows %s of %s", strings.Join(parts, ","), where)
	}
	return "every such row of " + where
}

// report prints the result of action on the target: rows changed, and the
// human line.
func (t *rowTarget) report(e *env, action string, rows int64, human string) error {
	return e.report(actionResult{Action: action, Table: t.spec.Table, Scope: scopeLabel(t.spec.Scope, t.scope), Rows: rows}, human)
}

func cmdUnpark(ctx context.Context, e *env) error {
	t, err := e.rowTarget(ctx, func(spec dialect.ClaimTable) error {
		if e.o.ResetAttempts && spec.Attempts == "" {
			return usageErr("-reset-attempts needs the -attempts column")
		}
		if len(e.o.LeaseDone) > 0 {
			if e.o.LeaseTable == "" {
				return usageErr("-lease-done needs the lease table (-lease-table) whose status says a task is finished")
			}
			if _, err := e.o.leaseTable(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	question := fmt.Sprintf("Unpark the parked ones among %s.", t)
	if len(t.ids) == 0 {
		st, err := t.c.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Failed == 0 {
			return t.report(e, "unpark", 0, "no parked rows; nothing changed")
		}
		question = fmt.Sprintf("Unpark %d parked row(s): %s goes back to pending.", st.Failed, t)
	}
	warning, err := e.finishedTask(ctx, t.spec, t.scope)
	if err != nil {
		return err
	}
	if warning != "" {
		question = "Warning: " + warning + ".\n" + question
	}
	if err := e.confirm(question); err != nil {
		return err
	}
	n, err := t.c.Unpark(ctx, e.o.ResetAttempts, t.ids...)
	if err != nil {
		return fmt.Errorf("%w (%d row(s) unparked before the error)", err, n)
	}
	human := fmt.Sprintf("unparked %d row(s)", n)
	if warning != "" {
		human = "warning: " + warning + "\n" + human
	}
	return e.report(actionResult{Action: "unpark", Table: t.spec.Table, Scope: scopeLabel(t.spec.Scope, t.scope), Rows: n, Warning: warning}, human)
}

// finishedTask returns a warning when the task of scope (its key, the
// one scope value) is finished by the lease table (-lease-done values of
// its status column), or has no row there: no run of it will claim rows
// unparked in it, which stay pending. It returns "" without -lease-done.
func (e *env) finishedTask(ctx context.Context, spec dialect.ClaimTable, scope []any) (string, error) {
	if len(e.o.LeaseDone) == 0 {
		return "", nil
	}
	if len(scope) != 1 {
		return "", usageErr("-lease-done: the claim table's scope must be one column, the task's key in the lease table (-scope-cols %s)", strings.Join(spec.Scope, ","))
	}
	lt, k, err := e.locker(ctx)
	if err != nil {
		return "", err
	}
	return taskWarning(ctx, e.o.LeaseDone, lt, k, scope[0])
}

// taskWarning returns a warning when the task whose key is the scope value
// v is finished (its status in lt is one of done) or has no row in lt.
func taskWarning(ctx context.Context, done []string, lt dialect.LeaseTable, k *tasklock.Locker, v any) (string, error) {
	key, err := leaseKey(lt, fmt.Sprint(v))
	if err != nil {
		return "", err
	}
	st, err := k.Inspect(ctx, key)
	if err != nil {
		return "", err
	}
	if !st.Exists {
		return fmt.Sprintf("task %v has no row in %s: no run of it will claim the unparked rows, which stay pending", key, lt.Table), nil
	}
	if slices.Contains(done, st.Status) {
		return fmt.Sprintf("task %v of %s is finished (%s = %s): no run of it will claim the unparked rows, which stay pending until the task runs again", key, lt.Table, lt.Status, st.Status), nil
	}
	return "", nil
}

func cmdRetryNow(ctx context.Context, e *env) error {
	t, err := e.rowTarget(ctx, func(spec dialect.ClaimTable) error {
		if spec.RunAt == "" {
			return usageErr("needs the -run-at column")
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := e.confirm(fmt.Sprintf("Make pending rows waiting for their run-at claimable now: %s.", t)); err != nil {
		return err
	}
	n, err := t.c.RetryNow(ctx, t.ids...)
	if err != nil {
		return fmt.Errorf("%w (%d row(s) changed before the error)", err, n)
	}
	return t.report(e, "retry-now", n, fmt.Sprintf("%d row(s) claimable now", n))
}

func cmdReap(ctx context.Context, e *env) error {
	var scope []any
	spec, err := e.claimSpec(func(spec dialect.ClaimTable) (err error) {
		switch {
		case e.o.Older <= 0:
			return usageErr("-older must be positive")
		case !e.o.AllScopes:
			scope, err = e.o.oneScope(spec)
			return err
		case len(e.o.Scopes) > 0:
			return usageErr("give -scope or -all-scopes, not both")
		}
		return nil
	})
	if err != nil {
		return err
	}
	label := scopeLabel(spec.Scope, scope)
	if scope == nil {
		// With -all-scopes the reaper ignores the scope values; the
		// claim configuration it is built from needs one per column.
		scope, label = wholeTable(spec), ""
	}
	cc := claimConfig(spec, scope)
	cc.MaxAttempts = e.o.MaxAttempts
	r, err := zombie.New(e.d, cc, zombie.Config{Timeout: e.o.Older, AllScopes: e.o.AllScopes})
	if err != nil {
		return usageErr("%v", err)
	}
	if _, err := e.claimer(ctx, spec, scope); err != nil {
		return err // the table is verified before anything changes
	}
	stale, err := r.Stale(ctx, claim.MaxListLimit)
	if err != nil {
		return err
	}
	if len(stale) == 0 {
		return e.report(actionResult{Action: "reap", Table: spec.Table, Scope: label}, "no row has been processing longer than "+e.o.Older.String()+"; nothing changed")
	}
	what := fmt.Sprintf("Return %d row(s) processing for longer than %v to pending", len(stale), e.o.Older)
	if e.o.MaxAttempts > 0 {
		what += fmt.Sprintf(" (parking those with %d attempts or more)", e.o.MaxAttempts)
	}
	if err := e.confirm(what + ": their workers are presumed dead, and a live one will find its claim lost."); err != nil {
		return err
	}
	res, err := r.Sweep(ctx)
	if err != nil {
		return fmt.Errorf("%w (%d returned, %d parked before the error)", err, res.Returned, res.Parked)
	}
	return e.report(actionResult{Action: "reap", Table: spec.Table, Scope: label, Rows: res.Returned, Parked: res.Parked},
		fmt.Sprintf("returned %d row(s) to pending, parked %d", res.Returned, res.Parked))
}

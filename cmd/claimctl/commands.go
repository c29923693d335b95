package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// claimStore builds and verifies the claim table's store: the table and
// every configured column must exist before anything is read or changed.
func (e *env) claimStore(ctx context.Context) (dialect.ClaimTable, dialect.ClaimStore, error) {
	spec, err := e.o.claimTable()
	if err != nil {
		return spec, nil, err
	}
	store, err := e.d.ClaimStore(spec)
	if err != nil {
		return spec, nil, usageErr("table description: %v", err)
	}
	if err := store.VerifySchema(ctx); err != nil {
		return spec, nil, schemaErr(err)
	}
	return spec, store, nil
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
	spec, store, err := e.claimStore(ctx)
	if err != nil {
		return err
	}
	scopes, err := e.o.scopeValues(spec)
	if err != nil {
		return err
	}
	if len(scopes) == 0 {
		scopes = [][]any{nil} // the whole table
	}
	var rows []statsRow
	for _, sv := range scopes {
		st, err := store.Stats(ctx, sv)
		if err != nil {
			return err
		}
		label := scopeLabel(spec.Scope, sv)
		if sv == nil {
			label = "(all)"
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
}

// listRows lists set in the one scope given and prints the rows.
func (e *env) listRows(ctx context.Context, set dialect.RowSet, olderThan time.Duration) error {
	spec, store, err := e.claimStore(ctx)
	if err != nil {
		return err
	}
	if set == dialect.SetScheduled && spec.RunAt == "" {
		return usageErr("needs the -run-at column")
	}
	scope, err := e.o.oneScope(spec)
	if err != nil {
		return err
	}
	rows, err := store.List(ctx, &dialect.ListParams{Set: set, ScopeValues: scope, OlderThan: olderThan, Limit: e.o.Limit})
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
		if errText == "" {
			errText = "-"
		}
		switch set {
		case dialect.SetProcessing:
			cells = append(cells, []string{fmt.Sprint(r.ID), tok, itoa(r.Attempts), age(r.ClaimedAge)})
		case dialect.SetFailed:
			cells = append(cells, []string{fmt.Sprint(r.ID), itoa(r.Attempts), age(r.ClaimedAge), cut(errText, 60)})
		default:
			cells = append(cells, []string{fmt.Sprint(r.ID), itoa(r.Attempts), age(r.RunIn), cut(errText, 60)})
		}
	}
	switch set {
	case dialect.SetProcessing:
		err = printTable(e.out, []string{"ID", "TOKEN", "ATTEMPTS", "CLAIMED AGO"}, cells)
	case dialect.SetFailed:
		err = printTable(e.out, []string{"ID", "ATTEMPTS", "LAST CLAIM AGO", "ERROR"}, cells)
	default:
		err = printTable(e.out, []string{"ID", "ATTEMPTS", "RUNS IN", "ERROR"}, cells)
	}
	if err == nil && len(rows) == e.o.Limit {
		fmt.Fprintf(e.out, "(first %d rows; raise -limit for more)\n", e.o.Limit)
	}
	return err
}

func cmdStuck(ctx context.Context, e *env) error {
	if e.o.Older <= 0 {
		return usageErr("-older must be positive")
	}
	return e.listRows(ctx, dialect.SetProcessing, e.o.Older)
}

func cmdParked(ctx context.Context, e *env) error {
	return e.listRows(ctx, dialect.SetFailed, 0)
}

func cmdScheduled(ctx context.Context, e *env) error {
	return e.listRows(ctx, dialect.SetScheduled, 0)
}

// actionResult is the JSON of an action.
type actionResult struct {
	Action string `json:"action"`
	Table  string `json:"table"`
	Scope  string `json:"scope,omitempty"`
	Rows   int64  `json:"rows"`
	Parked int64  `json:"parked,omitempty"`
}

func (e *env) report(r actionResult, human string) error {
	if e.o.JSON {
		return printJSON(e.out, r)
	}
	_, err := fmt.Fprintln(e.out, human)
	return err
}

// target describes the rows of an action for the confirmation question.
func target(spec dialect.ClaimTable, scope, ids []any) string {
	where := spec.Table
	if len(scope) > 0 {
		where += " where " + scopeLabel(spec.Scope, scope)
	}
	if len(ids) > 0 {
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = fmt.Sprint(id)
		}
		return fmt.Sprintf("rows %s of %s", strings.Join(parts, ","), where)
	}
	return "every such row of " + where
}

func cmdUnpark(ctx context.Context, e *env) error {
	spec, store, err := e.claimStore(ctx)
	if err != nil {
		return err
	}
	scope, err := e.o.oneScope(spec)
	if err != nil {
		return err
	}
	ids, err := e.o.ids(spec)
	if err != nil {
		return err
	}
	if e.o.ResetAttempts && spec.Attempts == "" {
		return usageErr("-reset-attempts needs the -attempts column")
	}
	if len(ids) == 0 {
		st, err := store.Stats(ctx, scope)
		if err != nil {
			return err
		}
		if st.Failed == 0 {
			return e.report(actionResult{Action: "unpark", Table: spec.Table, Scope: scopeLabel(spec.Scope, scope)}, "no parked rows; nothing changed")
		}
		err = e.confirm(fmt.Sprintf("Unpark %d parked row(s): %s goes back to pending.", st.Failed, target(spec, scope, nil)))
		if err != nil {
			return err
		}
	} else if err := e.confirm(fmt.Sprintf("Unpark the parked ones among %s.", target(spec, scope, ids))); err != nil {
		return err
	}
	n, err := store.Unpark(ctx, &dialect.UnparkParams{RowFilter: dialect.RowFilter{ScopeValues: scope, IDs: ids}, ResetAttempts: e.o.ResetAttempts})
	if err != nil {
		return fmt.Errorf("%w (%d row(s) unparked before the error)", err, n)
	}
	return e.report(actionResult{Action: "unpark", Table: spec.Table, Scope: scopeLabel(spec.Scope, scope), Rows: n}, fmt.Sprintf("unparked %d row(s)", n))
}

func cmdRetryNow(ctx context.Context, e *env) error {
	spec, store, err := e.claimStore(ctx)
	if err != nil {
		return err
	}
	if spec.RunAt == "" {
		return usageErr("needs the -run-at column")
	}
	scope, err := e.o.oneScope(spec)
	if err != nil {
		return err
	}
	ids, err := e.o.ids(spec)
	if err != nil {
		return err
	}
	if err := e.confirm(fmt.Sprintf("Make pending rows waiting for their run-at claimable now: %s.", target(spec, scope, ids))); err != nil {
		return err
	}
	n, err := store.RetryNow(ctx, dialect.RowFilter{ScopeValues: scope, IDs: ids})
	if err != nil {
		return fmt.Errorf("%w (%d row(s) changed before the error)", err, n)
	}
	return e.report(actionResult{Action: "retry-now", Table: spec.Table, Scope: scopeLabel(spec.Scope, scope), Rows: n}, fmt.Sprintf("%d row(s) claimable now", n))
}

func cmdReap(ctx context.Context, e *env) error {
	spec, store, err := e.claimStore(ctx)
	if err != nil {
		return err
	}
	if e.o.Older <= 0 {
		return usageErr("-older must be positive")
	}
	var scope []any
	if e.o.AllScopes {
		if len(e.o.Scopes) > 0 {
			return usageErr("give -scope or -all-scopes, not both")
		}
		// The reaper ignores these values with AllScopes; the claim
		// configuration it is built from needs one per scope column.
		scope = make([]any, len(spec.Scope))
		for i := range scope {
			scope[i] = int64(0)
		}
	} else if scope, err = e.o.oneScope(spec); err != nil {
		return err
	}
	r, err := zombie.New(e.d, claimConfig(spec, scope), zombie.Config{Timeout: e.o.Older, MaxAttempts: e.o.MaxAttempts, AllScopes: e.o.AllScopes})
	if err != nil {
		return usageErr("%v", err)
	}
	listScope := scope
	label := scopeLabel(spec.Scope, scope)
	if e.o.AllScopes {
		listScope, label = nil, ""
	}
	stale, err := store.List(ctx, &dialect.ListParams{Set: dialect.SetProcessing, ScopeValues: listScope, OlderThan: e.o.Older, Limit: dialect.MaxListLimit})
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

// locker builds and verifies the lease table's locker.
func (e *env) locker(ctx context.Context) (dialect.LeaseTable, *tasklock.Locker, error) {
	lt, err := e.o.leaseTable()
	if err != nil {
		return lt, nil, err
	}
	k, err := tasklock.New(e.d, tasklock.Config{Table: lt, TTL: time.Minute})
	if err != nil {
		return lt, nil, usageErr("lease table description: %v", err)
	}
	if err := k.Verify(ctx); err != nil {
		return lt, nil, schemaErr(err)
	}
	return lt, k, nil
}

// leaseOut is one lease as claimctl shows it.
type leaseOut struct {
	Key   any    `json:"key"`
	State string `json:"state"`
	Owner string `json:"owner,omitempty"`
	Fence int64  `json:"fence"`
	// ExpiresAt is on the database clock.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// RemainingSeconds is the time left until ExpiresAt: on the database
	// clock when DBClock is set (listing every holder), else ExpiresAt
	// minus this machine's clock, an estimate off by the skew between the
	// two.
	RemainingSeconds float64 `json:"remaining_seconds"`
	DBClock          bool    `json:"remaining_on_db_clock"`
}

// inspect reads the lease of key in lt. Its state is absent (no row),
// free, held, expired (past its expiry, neither taken again nor reaped), or,
// in a table without an expiry column, locked: a holder's TTL is its own,
// so whether it has passed is unknown.
func inspect(ctx context.Context, lt dialect.LeaseTable, k *tasklock.Locker, key any) (leaseOut, error) {
	st, err := k.Inspect(ctx, key)
	if err != nil {
		return leaseOut{}, err
	}
	l := leaseOut{Key: key, Owner: st.Owner, Fence: st.Fence}
	switch {
	case !st.Exists:
		l.State = "absent"
	case st.Owner == "":
		l.State = "free"
	case lt.ExpiresAt == "":
		l.State = "locked"
	case st.Expired:
		l.State = "expired"
	default:
		l.State = "held"
	}
	if !st.ExpiresAt.IsZero() {
		t := st.ExpiresAt.UTC()
		l.ExpiresAt = &t
		if l.State == "held" {
			l.RemainingSeconds = max(seconds(time.Until(t)), 0)
		}
	}
	return l, nil
}

func cmdLeases(ctx context.Context, e *env) error {
	lt, k, err := e.locker(ctx)
	if err != nil {
		return err
	}
	var out []leaseOut
	if len(e.o.Keys) == 0 {
		// Every held lease, soonest expiry first, with the time left on
		// the database clock.
		store, err := e.d.LeaseStore(lt)
		if err != nil {
			return usageErr("lease table description: %v", err)
		}
		holders, err := store.Held(ctx, e.o.Limit)
		if errors.Is(err, dialect.ErrNotSupported) {
			return usageErr("the lease table has no expiry column to list holders by; give each lease with -key (repeatable)")
		}
		if err != nil {
			return err
		}
		for _, h := range holders {
			t := h.ExpiresAt.UTC()
			l := leaseOut{Key: h.Key, State: "held", Owner: h.Owner, Fence: h.Fence, ExpiresAt: &t, RemainingSeconds: seconds(h.Remaining), DBClock: true}
			if h.Expired {
				l.State = "expired"
			}
			out = append(out, l)
		}
	}
	for _, s := range e.o.Keys {
		key, err := leaseKey(lt, s)
		if err != nil {
			return err
		}
		if err := k.CheckKey(key); err != nil {
			return usageErr("-key %q: %v", s, err)
		}
		l, err := inspect(ctx, lt, k, key)
		if err != nil {
			return err
		}
		out = append(out, l)
	}
	if e.o.JSON {
		return printJSON(e.out, out)
	}
	var cells [][]string
	for _, l := range out {
		owner, expires, remaining := l.Owner, "-", "-"
		if owner == "" {
			owner = "-"
		}
		if l.ExpiresAt != nil {
			expires = l.ExpiresAt.Format("2006-01-02 15:04:05.000 MST")
		}
		if l.State == "held" {
			remaining = age(time.Duration(l.RemainingSeconds * float64(time.Second)))
			if !l.DBClock {
				remaining = "~" + remaining
			}
		}
		cells = append(cells, []string{fmt.Sprint(l.Key), l.State, owner, strconv.FormatInt(l.Fence, 10), expires, remaining})
	}
	return printTable(e.out, []string{"KEY", "STATE", "OWNER", "FENCE", "EXPIRES AT (DB CLOCK)", "REMAINING"}, cells)
}

func cmdForceRelease(ctx context.Context, e *env) error {
	lt, k, err := e.locker(ctx)
	if err != nil {
		return err
	}
	if len(e.o.Keys) != 1 {
		return usageErr("give exactly one -key")
	}
	key, err := leaseKey(lt, e.o.Keys[0])
	if err != nil {
		return err
	}
	if err := k.CheckKey(key); err != nil {
		return usageErr("-key %q: %v", e.o.Keys[0], err)
	}
	l, err := inspect(ctx, lt, k, key)
	if err != nil {
		return err
	}
	if l.State == "absent" || l.State == "free" {
		return e.report(actionResult{Action: "force-release", Table: lt.Table}, fmt.Sprintf("lease %v is %s; nothing changed", key, l.State))
	}
	q := fmt.Sprintf("Force-release lease %v of %s, %s by owner %s (fence %d). A live holder keeps working until its next renewal fails: do this only when fences guard its writes or the holder is dead.",
		key, lt.Table, l.State, l.Owner, l.Fence)
	if lt.Owner == "" {
		// The holder is known by its stamp, the lock time it wrote; on a
		// whole-second column a new holder in the same second gets the
		// same stamp, and the old one would renew and release its lease.
		q = fmt.Sprintf("Force-release lease %v of %s, %s with stamp %s (fence %d). The table has no owner column: a live holder keeps working, and on a lock time of whole seconds it can take over the stamp of the next holder: do this only when the holder is dead.",
			key, lt.Table, l.State, l.Owner, l.Fence)
	}
	if err := e.confirm(q); err != nil {
		return err
	}
	ok, err := k.ForceRelease(ctx, key)
	if err != nil {
		return err
	}
	n := int64(0)
	msg := fmt.Sprintf("lease %v was freed meanwhile; nothing changed", key)
	if ok {
		n, msg = 1, fmt.Sprintf("released lease %v (was fence %d, owner %s)", key, l.Fence, l.Owner)
	}
	return e.report(actionResult{Action: "force-release", Table: lt.Table, Rows: n}, msg)
}

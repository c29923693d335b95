package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// pauseRow is one line of the pauses command.
type pauseRow struct {
	Table    string   `json:"table"`
	Scope    []string `json:"scope"`
	Reason   string   `json:"reason,omitempty"`
	By       string   `json:"by,omitempty"`
	PausedAt string   `json:"paused_at"`
	AgeSec   float64  `json:"age_seconds"`
}

// pauses opens the pause table (-pause-table, default claim's) and checks
// it against the catalog.
func (e *env) pauses(ctx context.Context) (*claim.Pauses, error) {
	p, err := claim.NewPauses(e.d, e.o.PauseTable)
	if err != nil {
		return nil, usageErr("-pause-table: %v", err)
	}
	if err := p.Verify(ctx); err != nil {
		return nil, schemaErr(err)
	}
	return p, nil
}

// pauseTargets returns the claim table and the scopes a pause or resume
// names: each -scope, or, with -all-scopes or on a table without scope
// columns, the whole table (a nil scope).
func (e *env) pauseTargets(ctx context.Context) (dialect.ClaimTable, [][]any, error) {
	spec, err := e.claimSpec(nil)
	if err != nil {
		return spec, nil, err
	}
	scopes, err := e.o.scopeValues(spec)
	if err != nil {
		return spec, nil, err
	}
	switch {
	case e.o.AllScopes && len(scopes) > 0:
		return spec, nil, usageErr("give -scope or -all-scopes, not both")
	case len(scopes) == 0 && len(spec.Scope) > 0 && !e.o.AllScopes:
		return spec, nil, usageErr("give -scope (repeatable), or -all-scopes for the whole table: it has scope column(s) %s", strings.Join(spec.Scope, ","))
	case len(scopes) == 0:
		scopes = [][]any{nil}
	}
	if _, err := e.claimer(ctx, spec, nil); err != nil {
		return spec, nil, err
	}
	return spec, scopes, nil
}

// pauseLabel names a pause of table's scope for people.
func pauseLabel(spec dialect.ClaimTable, scope []any) string {
	switch {
	case scope == nil && len(spec.Scope) == 0:
		return spec.Table
	case scope == nil:
		return spec.Table + " (every scope)"
	}
	return spec.Table + " where " + scopeLabel(spec.Scope, scope)
}

// cmdPause pauses claims of the -scope (or the whole table).
func cmdPause(ctx context.Context, e *env) error { return e.pauseOrResume(ctx, true) }

// cmdResume ends pauses of the -scope (or the whole table).
func cmdResume(ctx context.Context, e *env) error { return e.pauseOrResume(ctx, false) }

func (e *env) pauseOrResume(ctx context.Context, pause bool) error {
	spec, scopes, err := e.pauseTargets(ctx)
	if err != nil {
		return err
	}
	p, err := e.pauses(ctx)
	if err != nil {
		return err
	}
	labels := make([]string, len(scopes))
	for i, s := range scopes {
		labels[i] = pauseLabel(spec, s)
	}
	action, q := "resume", fmt.Sprintf("Resume claims of %s.", strings.Join(labels, "; "))
	if pause {
		action = "pause"
		q = fmt.Sprintf("Pause claims of %s: claimers whose PauseTable is %s stop taking its rows within their PauseRefresh; rows already claimed finish.",
			strings.Join(labels, "; "), p.Table())
	}
	if err := e.confirm(q); err != nil {
		return err
	}
	var n int64
	var lines []string
	for i, s := range scopes {
		var ok bool
		if pause {
			ok, err = p.Pause(ctx, spec.Table, s, claim.PauseNote{Reason: e.o.Reason, By: cmp.Or(e.o.By, os.Getenv("USER"))})
		} else {
			ok, err = p.Resume(ctx, spec.Table, s)
		}
		if err != nil {
			return fmt.Errorf("%w (%d changed before the error)", err, n)
		}
		switch {
		case ok:
			n++
			lines = append(lines, action+"d "+labels[i])
		case pause:
			lines = append(lines, labels[i]+" was paused already; nothing changed")
		default:
			lines = append(lines, labels[i]+" was not paused; nothing changed")
		}
	}
	return e.report(actionResult{Action: action, Table: spec.Table, Scope: scopesText(scopes), Rows: n}, strings.Join(lines, "\n"))
}

// scopesText is the JSON scope of an action on scopes ("" for the whole
// table).
func scopesText(scopes [][]any) string {
	parts := make([]string, 0, len(scopes))
	for _, s := range scopes {
		if s == nil {
			continue
		}
		text, _ := claim.PauseScope(s...)
		parts = append(parts, text)
	}
	return strings.Join(parts, " ")
}

// cmdPauses lists the pauses of the pause table.
func cmdPauses(ctx context.Context, e *env) error {
	p, err := e.pauses(ctx)
	if err != nil {
		return err
	}
	list, err := p.List(ctx, e.o.Limit)
	if err != nil {
		return err
	}
	rows := make([]pauseRow, len(list))
	for i, ps := range list {
		rows[i] = pauseRow{Table: ps.Table, Scope: ps.Scope, Reason: ps.Reason, By: ps.By,
			PausedAt: ps.PausedAt.Format(time.RFC3339), AgeSec: seconds(ps.Age)}
		if rows[i].Scope == nil {
			rows[i].Scope = []string{}
		}
	}
	if e.o.JSON {
		return printJSON(e.out, rows)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintf(e.out, "no pauses in %s\n", p.Table())
		return err
	}
	cells := make([][]string, len(list))
	for i, ps := range list {
		scope := "(every scope)"
		if len(ps.Scope) > 0 {
			scope = strings.Join(ps.Scope, ",")
		}
		cells[i] = []string{ps.Table, scope, rows[i].PausedAt, age(ps.Age), cut(ps.By, 20), cut(ps.Reason, 60)}
	}
	return printTable(e.out, []string{"TABLE", "SCOPE", "PAUSED AT", "AGE", "BY", "REASON"}, cells)
}

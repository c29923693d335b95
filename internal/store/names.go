package store

import (
	"fmt"
	"strings"

	"github.com/claimlock/claimlock/dialect"
)

// Names are what an engine's templates see: the table's quoted identifiers
// and rendered status literals, plus the variant flags of the statement
// being rendered. Values never appear here; they are placeholders, written
// {{arg "name"}}.
type Names struct {
	// Table and the column names, quoted. Optional columns are "".
	Table, ID, Status, Token, ClaimedAt, Attempts, Version, CreatedAt string
	// RunAt and Error are the optional run-at and error columns, quoted.
	RunAt, Error string
	// Archive is the quoted archive table (ClaimTable.Archive), or "".
	Archive string
	// Scope are the quoted scope columns (for {{scope .Scope}}).
	Scope []string
	// Returned are the columns a claim returns, quoted: the key, the
	// version (if any), the attempts (if any, NULL read as 0), then the
	// extra columns.
	Returned []string
	// Status literals; Failed is "" without a failed status.
	Pending, Processing, Done, Failed string
	// TextKey is true for text keys.
	TextKey bool
	// ClearClaimedAt: rows going back to pending get a NULL ClaimedAt
	// ({{template "cleartime" .}}).
	ClearClaimedAt bool
	// TextTimes: the time columns hold text dates (SQLite): ClaimedAt,
	// CreatedAt and RunAt of a claim table, LockedAt and ExpiresAt of a
	// lease table.
	TextTimes bool
	// ClaimIndex, TokenIndex, ReapIndex, ScopeIndex (scoped tables only)
	// and SchedIndex (tables with RunAt only) are the recommended indexes' quoted names; IndexCols the current
	// index's quoted columns.
	ClaimIndex, TokenIndex, ReapIndex, ScopeIndex, SchedIndex string

	// Lease tables: the quoted key, owner, locked-at, expires-at, fence and
	// status columns (optional ones "").
	Key, Owner, LockedAt, ExpiresAt, Fence, TaskStatus string

	// ClaimedAtPer, CreatedAtPer, RunAtPer (claim tables), LockedAtPer and
	// ExpiresAtPer (lease tables) are "" for a time column in the engine's
	// own convention and, for one holding integer unix time
	// ([dialect.TimeFormat]), how many of the engine's time units
	// ([Dialect.TimeUnit]) make one of the column's, as SQL text: "1000000"
	// for unix seconds on an engine counting microseconds. Templates write
	// the two forms side by side ({{if .ClaimedAtPer}}...{{else}}...{{end}}),
	// usually through {{tc .ClaimedAt .ClaimedAtPer "arg"...}}, which packs
	// a column, its Per and placeholder names for a {{template}} call.
	ClaimedAtPer, CreatedAtPer, RunAtPer, LockedAtPer, ExpiresAtPer string

	// Variant flags set by the store for the statement being rendered.
	Scoped    bool   // reap, stats: restricted to the scope
	Park      bool   // reap: park stale rows at MaxAttempts instead of returning them
	Below     bool   // reap: return only rows with fewer attempts than "below"
	KeyHint   bool   // key-list statements: read the primary key (Engine.KeyHint)
	ByKeys    bool   // release: only the listed keys
	Undo      bool   // ack, release: undo the claim's attempts increment
	ParkAt    bool   // ack: park rows whose attempts reached MaxAttempts
	Target    string // ack: the status literal to set
	Delete    bool   // ack to done: delete the rows instead (ClaimTable.DeleteDone)
	Snooze    bool   // release: set RunAt to now + "delay" (a snooze)
	Reset     bool   // unpark: reset the attempts
	Set       int    // list: the RowSet listed
	Hint      bool   // mysql claim: with FORCE INDEX
	From      bool   // mysql claim: above the key cursor
	Pipelined bool   // ack+claim: the ack's token is {{arg "ack_token"}}
	IndexCols string // index DDL: the quoted columns
	IndexName string // index DDL: the quoted index name, qualified by the table's schema
	Online    bool   // index DDL: build without blocking writes (IndexOptions.Online)
}

// quoteOpt quotes an optional column name ("" stays "").
func (e *Engine) quoteOpt(c string) string {
	if c == "" {
		return ""
	}
	return e.Quote(c)
}

// claimNames quotes a validated claim table description.
func (e *Engine) claimNames(t dialect.ClaimTable) Names {
	q := e.quoteOpt
	n := Names{
		Table: e.QuoteName(t.Table), ID: q(t.ID), Status: q(t.Status), Token: q(t.Token),
		ClaimedAt: q(t.ClaimedAt), Attempts: q(t.Attempts), Version: q(t.Version), CreatedAt: q(t.CreatedAt),
		RunAt: q(t.RunAt), Error: q(t.Error),
		Pending: t.Pending.Literal(), Processing: t.Processing.Literal(), Done: t.Done.Literal(),
		TextKey: t.IDKind == dialect.IDText, ClearClaimedAt: t.ClearClaimedAt, TextTimes: t.TextTimes,
	}
	n.ClaimedAtPer, n.CreatedAtPer, n.RunAtPer = e.timePer(t.ClaimedAtFormat), e.timePer(t.CreatedAtFormat), e.timePer(t.RunAtFormat)
	if t.Failed.IsSet() {
		n.Failed = t.Failed.Literal()
	}
	if t.Archive != "" {
		n.Archive = e.QuoteName(t.Archive)
	}
	for _, c := range t.Scope {
		n.Scope = append(n.Scope, q(c))
	}
	n.Returned = append(n.Returned, n.ID)
	if n.Version != "" {
		n.Returned = append(n.Returned, n.Version)
	}
	if n.Attempts != "" {
		n.Returned = append(n.Returned, "COALESCE("+n.Attempts+", 0)")
	}
	for _, c := range t.Columns {
		n.Returned = append(n.Returned, q(c))
	}
	ix := Indexes(t)
	n.ClaimIndex, n.TokenIndex, n.ReapIndex = q(ix[0].Name), q(ix[1].Name), q(ix[2].Name)
	if len(t.Scope) > 0 {
		n.ScopeIndex = q(IndexName(t.Table, "scope"))
	}
	if t.RunAt != "" {
		n.SchedIndex = q(IndexName(t.Table, "sched"))
	}
	return n
}

// timePer returns the Names...Per value of a column of format f: the
// number of the engine's time units in one unit of the column, or "" where
// the column holds the engine's own convention (native types; on SQLite,
// whose own convention is integer milliseconds, unix milliseconds too).
func (e *Engine) timePer(f dialect.TimeFormat) string {
	ms := e.Dialect.TimeUnit == Milliseconds
	switch {
	case f == dialect.UnixSeconds && ms:
		return "1000"
	case f == dialect.UnixSeconds:
		return "1000000"
	case f == dialect.UnixMillis && !ms:
		return "1000"
	}
	return ""
}

// timeArg is what {{tc}} passes to an engine's time fragments: a quoted
// time column, its Names...Per, and placeholder names.
type timeArg struct {
	C, Per string
	Args   []string
}

// Rendered is one statement a store rendered: its name with the variant
// it was rendered for, its SQL text and its placeholders' names in order.
// The engines' golden files list them.
type Rendered struct {
	Name string
	SQL  string
	Args []string
}

// variant describes the variant flags of n that are set, for the name of a
// rendered statement.
func variant(n Names) string {
	var parts []string
	flag := func(on bool, name string) {
		if on {
			parts = append(parts, name)
		}
	}
	flag(n.Scoped, "scoped")
	flag(n.Park, "park")
	flag(n.Below, "below")
	flag(n.ByKeys, "by keys")
	flag(n.KeyHint, "key hint")
	flag(n.Undo, "undo")
	flag(n.ParkAt, "park at max")
	flag(n.Target != "", "to "+n.Target)
	flag(n.Delete, "delete")
	flag(n.Snooze, "snooze")
	flag(n.Reset, "reset")
	flag(n.Hint, "force index")
	flag(n.From, "from cursor")
	flag(n.Pipelined, "pipelined")
	flag(n.Online, "online")
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// renderer renders a store's statements against its names, recording each
// in out, and collects the first error.
type renderer struct {
	e   *Engine
	n   Names
	out *[]Rendered
	err error
}

// render renders one template, with vary adjusting the variant flags.
func (r *renderer) render(name, src string, vary func(*Names)) (Stmt, error) {
	n := r.n
	if vary != nil {
		vary(&n)
	}
	st, err := r.e.Dialect.render(name, src, n, n.TextKey)
	if err != nil {
		return Stmt{}, fmt.Errorf("%s: %w", r.e.Name, err)
	}
	*r.out = append(*r.out, Rendered{Name: name + variant(n), SQL: st.SQL, Args: st.names})
	return st, nil
}

// stmt renders one template unless an earlier one failed or src is empty
// (the engine has no such statement).
func (r *renderer) stmt(name, src string, vary func(*Names)) Stmt {
	if r.err != nil || src == "" {
		return Stmt{}
	}
	st, err := r.render(name, src, vary)
	if err != nil {
		r.err = err
	}
	return st
}

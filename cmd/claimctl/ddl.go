package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// ddlSection is one part of the ddl command's output.
type ddlSection struct {
	Title      string   `json:"title"`
	Statements []string `json:"statements"`
}

// cmdDDL prints the statements a migration needs for the claim table (and
// the lease table, when one is described) on the connected engine: what
// the database lacks, so that the output applies cleanly as it is.
func cmdDDL(ctx context.Context, e *env) error {
	adder, err := store.Of(e.d)
	if err != nil {
		return err
	}
	var sections []ddlSection
	if e.o.Table != "" {
		s, err := e.claimDDL(ctx, adder)
		if err != nil {
			return err
		}
		sections = append(sections, s...)
	}
	if e.o.LeaseTable != "" {
		s, err := e.leaseDDL(ctx, adder)
		if err != nil {
			return err
		}
		sections = append(sections, s)
	}
	if len(sections) == 0 {
		return usageErr("ddl: describe a claim table (-table) or a lease table (-lease-table)")
	}
	if e.o.JSON {
		return printJSON(e.out, sections)
	}
	caps := e.d.Capabilities()
	var b strings.Builder
	fmt.Fprintf(&b, "-- claimlock schema for %s %s\n", caps.Engine, caps.Version)
	for _, s := range sections {
		fmt.Fprintf(&b, "\n-- %s\n", s.Title)
		if len(s.Statements) == 0 {
			b.WriteString("-- (nothing to do)\n")
		}
		for _, st := range s.Statements {
			if strings.HasPrefix(st, "--") {
				b.WriteString(st + "\n")
				continue
			}
			b.WriteString(st + ";\n")
		}
	}
	_, err = fmt.Fprint(e.out, b.String())
	return err
}

// claimDDL returns the claim table's sections: CREATE TABLE and every
// recommended index when the table does not exist; otherwise the columns it
// lacks and the recommended indexes it lacks (all with -all-indexes), built
// online where the engine can ([store.IndexOptions.Online]), since an
// existing table may be in use: PostgreSQL's CREATE INDEX CONCURRENTLY
// does not block writes, but cannot run inside a transaction block.
func (e *env) claimDDL(ctx context.Context, adder store.ColumnAdder) ([]ddlSection, error) {
	spec, err := e.o.claimTable()
	if err != nil {
		return nil, err
	}
	cs, err := store.OpenClaims(e.d, spec)
	if err != nil {
		return nil, usageErr("table description: %v", err)
	}
	def := store.ClaimTableDef(spec)
	// Columns a migration can add: the library's own, not the key, the
	// scope columns or the payload columns, whose types only the table's
	// owner knows.
	skip := map[string]bool{spec.ID: true}
	for _, c := range append(append([]string{}, spec.Scope...), spec.Columns...) {
		skip[c] = true
	}
	var addable []store.ColumnDef
	for _, c := range def.Columns {
		if !skip[c.Name] {
			addable = append(addable, c)
		}
	}
	alter, err := adder.AddColumnsDDL(ctx, spec.Table, addable)
	if errors.Is(err, dialect.ErrInvalidConfig) && strings.Contains(err.Error(), "not found") {
		create, err := store.CreateTableDDL(e.d, def)
		if err != nil {
			return nil, usageErr("ddl: %v", err)
		}
		return []ddlSection{
			{Title: fmt.Sprintf("claim table %s does not exist: create it (scope columns as BIGINT, payload columns as text: adjust)", spec.Table), Statements: create},
			{Title: "recommended indexes of " + spec.Table, Statements: cs.IndexDDL()},
		}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ddl: %w", err)
	}
	indexDDL, missingIndexes := cs.IndexDDL, cs.MissingIndexes
	onlineNote := ""
	if ix, ok := cs.(store.IndexDDLer); ok {
		online := store.IndexOptions{Online: true}
		indexDDL = func() []string { return ix.IndexDDLWith(online) }
		missingIndexes = func(ctx context.Context) ([]string, error) { return ix.MissingIndexesWith(ctx, online) }
		onlineNote = ", built online where the engine can: run them outside a transaction block"
	}
	var idx []string
	title := "recommended indexes " + spec.Table + " lacks" + onlineNote
	if e.o.AllIndexes {
		idx, title = indexDDL(), "recommended indexes of "+spec.Table+onlineNote
	} else if idx, err = missingIndexes(ctx); err != nil {
		return nil, fmt.Errorf("ddl: %w", err)
	}
	return []ddlSection{
		{Title: "columns " + spec.Table + " lacks", Statements: alter},
		{Title: title, Statements: idx},
	}, nil
}

// leaseDDL returns the lease table's section: CREATE TABLE IF NOT EXISTS
// for a library key table, the columns a task table lacks otherwise.
func (e *env) leaseDDL(ctx context.Context, adder store.ColumnAdder) (ddlSection, error) {
	lt, err := e.o.leaseTable()
	if err != nil {
		return ddlSection{}, err
	}
	if lt.Keyed {
		stmts, err := tasklock.CreateTableDDL(e.d, lt.Table)
		if err != nil {
			return ddlSection{}, usageErr("ddl: %v", err)
		}
		return ddlSection{Title: "lease key table " + lt.Table + " (created if it does not exist)", Statements: stmts}, nil
	}
	zero := dialect.StatusInt(0)
	var cols []store.ColumnDef
	if lt.Owner != "" {
		cols = append(cols, store.ColumnDef{Name: lt.Owner, Type: store.TypeText, Len: store.MaxTokenLen})
	}
	if lt.Fence != "" {
		cols = append(cols, store.ColumnDef{Name: lt.Fence, Type: store.TypeInt, NotNull: true, Default: &zero})
	}
	if lt.ExpiresAt != "" {
		cols = append(cols, store.ColumnDef{Name: lt.ExpiresAt, Type: store.TypeTime})
	}
	stmts, err := adder.AddColumnsDDL(ctx, lt.Table, cols)
	if err != nil {
		return ddlSection{}, schemaErr(fmt.Errorf("ddl: lease table: %w", err))
	}
	for i, s := range stmts {
		if lt.ExpiresAt != "" && strings.Contains(s, quoted(e.d, lt.ExpiresAt)) {
			// It must have the type of the lock time column, which only
			// the table's owner knows: a statement to complete.
			stmts[i] = fmt.Sprintf("-- ALTER TABLE %s ADD COLUMN %s <the type of %s>", quoted(e.d, lt.Table), quoted(e.d, lt.ExpiresAt), quoted(e.d, lt.LockedAt))
		}
	}
	return ddlSection{Title: "columns lease task table " + lt.Table + " lacks", Statements: stmts}, nil
}

func quoted(d dialect.Dialect, name string) string {
	q, err := store.QuoteIdent(d, "name", name)
	if err != nil {
		return name
	}
	return q
}

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/claimlock/claimlock/claim"
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
	var sections []ddlSection
	if e.o.Coalesce {
		s, err := e.coalesceDDL()
		if err != nil {
			return err
		}
		sections = append(sections, s)
	} else if e.o.Table != "" {
		s, err := e.claimDDL(ctx)
		if err != nil {
			return err
		}
		sections = append(sections, s...)
	}
	if e.o.LeaseTable != "" {
		s, err := e.leaseDDL(ctx)
		if err != nil {
			return err
		}
		sections = append(sections, s)
	}
	if e.o.PauseTable != "" {
		ddl, err := claim.PauseTableDDL(e.d, e.o.PauseTable)
		if err != nil {
			return usageErr("-pause-table: %v", err)
		}
		sections = append(sections, ddlSection{Title: "pause table " + e.o.PauseTable + " (claim.Pauses)", Statements: ddl})
	}
	if len(sections) == 0 {
		return usageErr("describe a claim table (-table), a coalescer (-coalesce), a lease table (-lease-table) or a pause table (-pause-table)")
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
	_, err := fmt.Fprint(e.out, b.String())
	return err
}

// claimDDL returns the claim table's sections ([claim.Claimer.Migration]):
// CREATE TABLE and every recommended index when the table does not exist;
// otherwise the columns it lacks and the recommended indexes it lacks (all
// with -all-indexes), built online where the engine can, since an
// existing table may be in use: PostgreSQL's CREATE INDEX CONCURRENTLY
// does not block writes, but cannot run inside a transaction block.
func (e *env) claimDDL(ctx context.Context) ([]ddlSection, error) {
	spec, err := e.claimSpec(nil)
	if err != nil {
		return nil, err
	}
	c, err := claim.New[struct{}](e.d, claimConfig(spec, wholeTable(spec)), nil)
	if err != nil {
		return nil, usageErr("table description: %v", err)
	}
	m, err := c.Migration(ctx, true)
	if err != nil {
		return nil, err
	}
	if m.Create != nil {
		return []ddlSection{
			{Title: fmt.Sprintf("claim table %s does not exist: create it (scope columns as BIGINT, payload columns as text: adjust)", spec.Table), Statements: m.Create},
			{Title: "recommended indexes of " + spec.Table, Statements: m.Indexes},
		}, nil
	}
	const onlineNote = ", built online where the engine can: run them outside a transaction block"
	idx, title := m.Indexes, "recommended indexes "+spec.Table+" lacks"+onlineNote
	if e.o.AllIndexes {
		idx, title = c.IndexDDL(true), "recommended indexes of "+spec.Table+onlineNote
	}
	return []ddlSection{
		{Title: "columns " + spec.Table + " lacks", Statements: m.Columns},
		{Title: title, Statements: idx},
	}, nil
}

// leaseDDL returns the lease table's section: CREATE TABLE IF NOT EXISTS
// for a library key table, the columns a task table lacks otherwise.
func (e *env) leaseDDL(ctx context.Context) (ddlSection, error) {
	lt, err := e.o.leaseTable()
	if err != nil {
		return ddlSection{}, err
	}
	if lt.Keyed {
		stmts, err := tasklock.CreateTableDDL(e.d, lt.Table)
		if err != nil {
			return ddlSection{}, usageErr("%v", err)
		}
		return ddlSection{Title: "lease key table " + lt.Table + " (created if it does not exist)", Statements: stmts}, nil
	}
	k, err := tasklock.New(e.d, tasklock.Config{Table: lt, TTL: time.Minute})
	if err != nil {
		return ddlSection{}, usageErr("lease table description: %v", err)
	}
	stmts, err := k.MissingColumnsDDL(ctx)
	if err != nil {
		return ddlSection{}, schemaErr(err)
	}
	return ddlSection{Title: "columns lease task table " + lt.Table + " lacks", Statements: stmts}, nil
}

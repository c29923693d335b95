package main

import (
	"context"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
)

// backlogOut is the backlog command's report.
type backlogOut struct {
	ChangesTable string `json:"changes_table"`
	KeysTable    string `json:"keys_table"`
	// Dirty is the keys pending or being flushed; OldestUnfoldedSeconds
	// the age of the oldest change not folded yet, leaving out the
	// changes of parked keys, on the database clock (Coalescer.Backlog).
	Dirty                 int64   `json:"dirty"`
	OldestUnfoldedSeconds float64 `json:"oldest_unfolded_seconds"`
	// The keys by status (the keys table's counts).
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Done       int64 `json:"done"`
	Parked     int64 `json:"parked"`
	// ParkedKeys are the first -limit parked keys with their attempts and
	// the error of their last fold; MoreParked says there are more.
	ParkedKeys []rowOut `json:"parked_keys"`
	MoreParked bool     `json:"more_parked"`

	oldest time.Duration
}

// coalescer returns the coalescer of the -coalesce tables and the verified
// claimer of its keys table.
func (e *env) coalescer(ctx context.Context) (*coalesce.Coalescer, *claim.Claimer[struct{}], coalesce.Config, error) {
	cfg, err := e.o.coalesceConfig()
	if err != nil {
		return nil, nil, cfg, err
	}
	co, err := coalesce.New(e.d, e.db, cfg)
	if err != nil {
		return nil, nil, cfg, usageErr("coalescer tables: %v", err)
	}
	spec, err := coalesce.KeysTable(cfg)
	if err != nil {
		return nil, nil, cfg, usageErr("coalescer tables: %v", err)
	}
	c, err := e.claimer(ctx, spec, nil)
	if err != nil {
		return nil, nil, cfg, err
	}
	return co, c, cfg, nil
}

// readBacklog reads the coalescer's backlog, its keys by status and its
// first limit parked keys.
func readBacklog(ctx context.Context, co *coalesce.Coalescer, c *claim.Claimer[struct{}], cfg coalesce.Config, limit int) (backlogOut, error) {
	out := backlogOut{ChangesTable: cfg.ChangesTable, KeysTable: cfg.KeysTable, ParkedKeys: []rowOut{}}
	if out.ChangesTable == "" {
		out.ChangesTable = coalesce.DefaultChangesTable
	}
	if out.KeysTable == "" {
		out.KeysTable = coalesce.DefaultKeysTable
	}
	dirty, oldest, err := co.Backlog(ctx)
	if err != nil {
		return out, err
	}
	out.Dirty, out.oldest, out.OldestUnfoldedSeconds = dirty, oldest, seconds(oldest)
	st, err := c.TableStats(ctx)
	if err != nil {
		return out, err
	}
	out.Pending, out.Processing, out.Done, out.Parked = st.Pending, st.Processing, st.Done, st.Failed
	rows, err := c.List(ctx, claim.Parked, 0, limit)
	if err != nil {
		return out, err
	}
	for _, r := range rows {
		ca := seconds(r.ClaimedAge)
		if r.ClaimedAge < 0 {
			ca = -1
		}
		out.ParkedKeys = append(out.ParkedKeys, rowOut{ID: r.ID, Attempts: r.Attempts, ClaimedAgeSeconds: ca, Error: r.Error})
	}
	out.MoreParked = int64(len(rows)) < out.Parked
	return out, nil
}

// cmdBacklog prints a coalescer's backlog: its dirty keys, the age of its
// oldest unfolded change, its keys by status and its parked keys with the
// error of their last fold.
func cmdBacklog(ctx context.Context, e *env) error {
	co, c, cfg, err := e.coalescer(ctx)
	if err != nil {
		return err
	}
	b, err := readBacklog(ctx, co, c, cfg, e.o.Limit)
	if err != nil {
		return err
	}
	if e.o.JSON {
		return printJSON(e.out, b)
	}
	oldest := age(b.oldest)
	if b.oldest == 0 {
		oldest = "-"
	}
	err = printTable(e.out, []string{"KEYS TABLE", "DIRTY", "OLDEST UNFOLDED", "PENDING", "PROCESSING", "DONE", "PARKED"},
		[][]string{{b.KeysTable, itoa(b.Dirty), oldest, itoa(b.Pending), itoa(b.Processing), itoa(b.Done), itoa(b.Parked)}})
	if err != nil || len(b.ParkedKeys) == 0 {
		return err
	}
	fmt.Fprintln(e.out, "\nparked keys (unpark -coalesce -ids KEY,... once the fold can succeed):")
	var cells [][]string
	for _, r := range b.ParkedKeys {
		errText := r.Error
		if errText == "" {
			errText = "-"
		}
		ago := "-"
		if r.ClaimedAgeSeconds >= 0 {
			ago = age(time.Duration(r.ClaimedAgeSeconds * float64(time.Second)))
		}
		cells = append(cells, []string{fmt.Sprint(r.ID), itoa(r.Attempts), ago, cut(errText, 60)})
	}
	if err := printTable(e.out, []string{"KEY", "ATTEMPTS", "LAST CLAIM AGO", "ERROR"}, cells); err != nil {
		return err
	}
	if b.MoreParked {
		fmt.Fprintf(e.out, "(first %d of %d parked keys; raise -limit for more)\n", len(b.ParkedKeys), b.Parked)
	}
	return nil
}

// coalesceDDL returns the coalescer's section of the ddl command: its
// three tables and their indexes (coalesce.CreateTablesDDL).
func (e *env) coalesceDDL() (ddlSection, error) {
	cfg, err := e.o.coalesceConfig()
	if err != nil {
		return ddlSection{}, err
	}
	stmts, err := coalesce.CreateTablesDDL(e.d, cfg)
	if err != nil {
		return ddlSection{}, usageErr("coalescer tables: %v", err)
	}
	keys := cfg.KeysTable
	if keys == "" {
		keys = coalesce.DefaultKeysTable
	}
	return ddlSection{
		Title:      "coalescer tables (created if they do not exist; on MySQL and MariaDB the indexes of " + keys + " have no IF NOT EXISTS: run them once)",
		Statements: stmts,
	}, nil
}

package store

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store/render"
)

// This file is the engine-neutral side of pauses (claim.Pauses): one
// library-managed table with a row per paused claim table or scope,
// keyed by (claim_table, scope). A scope is the text of a claimer's scope
// values ([PauseScopeText]); "" pauses the whole table. Claimers read the
// rows of their table before they claim.

// Lengths of the pause table's text columns, in characters.
const (
	// MaxPauseTableLen is the longest claim table name a pause holds.
	MaxPauseTableLen = 255
	// MaxPauseScopeLen is the longest scope text a pause holds.
	MaxPauseScopeLen = 255
	// maxPauseReason bounds a pause's reason.
	maxPauseReason = 1000
	// maxPauseBy bounds who paused.
	maxPauseBy = 255
)

// PauseTableDef returns the definition of the pause table named table.
func PauseTableDef(table string) TableDef {
	return TableDef{
		Table: table,
		Columns: []ColumnDef{
			{Name: "claim_table", Type: TypeText, Len: MaxPauseTableLen, NotNull: true},
			{Name: "scope", Type: TypeText, Len: MaxPauseScopeLen, NotNull: true},
			{Name: "reason", Type: TypeText, Len: maxPauseReason},
			{Name: "paused_by", Type: TypeText, Len: maxPauseBy},
			{Name: "paused_us", Type: TypeInt, NotNull: true},
		},
		PrimaryKey: []string{"claim_table", "scope"},
	}
}

// PauseNames are what pause templates see of the table: the quoted table
// and columns.
type PauseNames struct {
	Pauses                                  string
	ClaimTable, Scope, Reason, By, PausedAt string
}

// pauseTmpl names a pause statement.
type pauseTmpl uint8

const (
	pInsert pauseTmpl = iota
	pDelete
	pOf
	pList
	pColumns
)

// pauseSQL are the pause statements, the same on every engine but for the
// database clock ({{template "usnow"}}, from the engine's schedule
// statements) and the catalog query (the engine's).
var pauseSQL = map[pauseTmpl]string{
	pInsert: `
INSERT INTO {{.Pauses}} ({{.ClaimTable}}, {{.Scope}}, {{.Reason}}, {{.By}}, {{.PausedAt}})
VALUES ({{arg "table"}}, {{arg "pause_scope"}}, {{arg "reason"}}, {{arg "by"}}, {{template "usnow"}})`,

	pDelete: `
DELETE FROM {{.Pauses}} WHERE {{.ClaimTable}} = {{arg "table"}} AND {{.Scope}} = {{arg "pause_scope"}}`,

	// A claimer reads the pauses of its table: the primary key's prefix.
	pOf: `
SELECT {{.Scope}} FROM {{.Pauses}} WHERE {{.ClaimTable}} = {{arg "table"}}`,

	pList: `
SELECT {{.ClaimTable}}, {{.Scope}}, COALESCE({{.Reason}}, ''), COALESCE({{.By}}, ''), {{.PausedAt}}, {{template "usnow"}}
FROM {{.Pauses}} ORDER BY {{.ClaimTable}}, {{.Scope}} LIMIT {{arg "limit"}}`,
}

// pauseTable is every statement a pause store renders, in the order of the
// golden files.
var pauseTable = []struct {
	name string
	t    pauseTmpl
}{
	{"pause insert", pInsert},
	{"pause delete", pDelete},
	{"pause of table", pOf},
	{"pause list", pList},
	{"pause columns", pColumns},
}

// Pauses runs the statements on one pause table.
type Pauses struct {
	b     *Backend
	table string
	stmts statements[pauseTmpl]
}

// OpenPauses validates table and renders d's pause statements for it.
// Errors wrap [dialect.ErrInvalidConfig].
func OpenPauses(d dialect.Dialect, table string) (*Pauses, error) {
	b, err := Of(d)
	if err != nil {
		return nil, err
	}
	if err := ValidateIdent("PauseTable", table); err != nil {
		return nil, err
	}
	if b.schedules.Common == "" {
		return nil, fmt.Errorf("%w: %s has no pause statements", dialect.ErrNotSupported, b.drv.Name())
	}
	q := b.drv.Quote
	names := PauseNames{
		Pauses: b.quoteName(table), ClaimTable: q("claim_table"), Scope: q("scope"),
		Reason: q("reason"), By: q("paused_by"), PausedAt: q("paused_us"),
	}
	p := &Pauses{b: b, table: table}
	for _, e := range pauseTable {
		src := pauseSQL[e.t]
		if e.t == pColumns {
			src = b.schedules.Columns
		}
		if err := p.stmts.add(b, e.t, e.name, "", b.schedules.Common+src, names, true); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Rendered returns every statement rendered, in order: for the golden
// files.
func (p *Pauses) Rendered() []Rendered { return p.stmts.rendered }

// Table returns the pause table's name.
func (p *Pauses) Table() string { return p.table }

// PauseScopeText returns the text a pause keeps of scope values: each
// value as text (integers in decimal, floats in Go's shortest form, times
// in RFC 3339 UTC, bools as true or false), joined by commas, with commas
// and backslashes inside a value escaped by a backslash; "" for no values
// (the whole table). Values are those database/sql can send (checked).
func PauseScopeText(values []any) (string, error) {
	parts := make([]string, len(values))
	for i, v := range values {
		cv, err := driver.DefaultParameterConverter.ConvertValue(v)
		if err != nil || cv == nil {
			return "", fmt.Errorf("%w: scope value %d (%T) cannot be a pause's scope", dialect.ErrInvalidConfig, i, v)
		}
		var s string
		switch x := cv.(type) {
		case int64:
			s = strconv.FormatInt(x, 10)
		case float64:
			s = strconv.FormatFloat(x, 'g', -1, 64)
		case bool:
			s = strconv.FormatBool(x)
		case []byte:
			s = string(x)
		case string:
			s = x
		case time.Time:
			s = x.UTC().Format(time.RFC3339Nano)
		default:
			s = fmt.Sprint(x)
		}
		parts[i] = strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(s)
	}
	text := strings.Join(parts, ",")
	if len(values) > 0 && text == "" {
		// One empty value would read as the whole table.
		return "", fmt.Errorf("%w: an empty scope value cannot be paused", dialect.ErrInvalidConfig)
	}
	if utf8.RuneCountInString(text) > MaxPauseScopeLen || !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
		return "", fmt.Errorf("%w: scope %q is not UTF-8 text of at most %d characters without NUL", dialect.ErrInvalidConfig, text, MaxPauseScopeLen)
	}
	return text, nil
}

// SplitPauseScope returns the values of a scope text ([PauseScopeText]),
// unescaped; nil for "".
func SplitPauseScope(text string) []string {
	if text == "" {
		return nil
	}
	var out []string
	var cur strings.Builder
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '\\' && i+1 < len(text):
			i++
			cur.WriteByte(text[i])
		case c == ',':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(out, cur.String())
}

// checkPauseKey validates the claim table and scope text of a pause.
func checkPauseKey(table, scope string) error {
	if err := ValidateIdent("Table", table); err != nil {
		return err
	}
	if len(table) > MaxPauseTableLen {
		return fmt.Errorf("%w: table name is %d bytes; the pause table holds %d", dialect.ErrInvalidConfig, len(table), MaxPauseTableLen)
	}
	if utf8.RuneCountInString(scope) > MaxPauseScopeLen {
		return fmt.Errorf("%w: scope is longer than %d characters", dialect.ErrInvalidConfig, MaxPauseScopeLen)
	}
	return nil
}

// Pause records a pause of scope (a [PauseScopeText]; "" for the whole
// table) of the claim table, with reason and by ("" for none). It reports
// false when that pause existed already (it is left as it was).
func (p *Pauses) Pause(ctx context.Context, table, scope, reason, by string) (bool, error) {
	if err := checkPauseKey(table, scope); err != nil {
		return false, err
	}
	a := &render.Args{Table: table, PauseScope: scope, Reason: cutText(reason, maxPauseReason), By: cutText(by, maxPauseBy)}
	// Idempotent: a re-run after a broken connection finds its own row
	// and reports it as existing.
	err := p.b.Do(ctx, "pause", true, func() error {
		_, err := p.b.exec(ctx, p.b.db, p.stmts.get(pInsert), a)
		return err
	})
	if classOf(err) == errclass.Duplicate {
		return false, nil
	}
	return err == nil, err
}

// Resume deletes the pause of scope of the claim table. It reports false
// when there was none.
func (p *Pauses) Resume(ctx context.Context, table, scope string) (bool, error) {
	if err := checkPauseKey(table, scope); err != nil {
		return false, err
	}
	var n int64
	err := p.b.Do(ctx, "resume", true, func() error {
		var err error
		n, err = p.b.exec(ctx, p.b.db, p.stmts.get(pDelete), &render.Args{Table: table, PauseScope: scope})
		return err
	})
	return n > 0, err
}

// Of returns the scope texts paused in the claim table ("" for the whole
// table).
func (p *Pauses) Of(ctx context.Context, table string) ([]string, error) {
	var out []string
	err := p.b.Do(ctx, "pauses", true, func() error {
		out = out[:0]
		return p.b.query(ctx, p.b.db, p.stmts.get(pOf), &render.Args{Table: table}, func(r Rows) error {
			var s string
			if err := r.Scan(&s); err != nil {
				return err
			}
			out = append(out, s)
			return nil
		})
	})
	return out, err
}

// PauseRow is one row of the pause table as List reads it.
type PauseRow struct {
	Table, Scope, Reason, By string
	// PausedAt and Now are microseconds since the epoch on the database
	// clock: when the pause was recorded, and when it was read.
	PausedAt, Now int64
}

// List returns the pauses, by claim table and scope, at most limit.
func (p *Pauses) List(ctx context.Context, limit int) ([]PauseRow, error) {
	if limit <= 0 || limit > MaxListLimit {
		return nil, fmt.Errorf("%w: limit %d is outside 1..%d", dialect.ErrInvalidConfig, limit, MaxListLimit)
	}
	var out []PauseRow
	err := p.b.Do(ctx, "pauses", true, func() error {
		out = out[:0]
		return p.b.query(ctx, p.b.db, p.stmts.get(pList), &render.Args{Limit: limit}, func(r Rows) error {
			var row PauseRow
			if err := r.Scan(&row.Table, &row.Scope, &row.Reason, &row.By, &row.PausedAt, &row.Now); err != nil {
				return err
			}
			out = append(out, row)
			return nil
		})
	})
	return out, err
}

// VerifySchema checks that the pause table exists with the columns the
// statements use.
func (p *Pauses) VerifySchema(ctx context.Context) error {
	def := PauseTableDef(p.table)
	cols, err := p.b.catalogColumns(ctx, p.stmts.get(pColumns), def.Table)
	if err != nil {
		return err
	}
	if len(cols.ByName) == 0 {
		return fmt.Errorf("%w: pause table %s does not exist (create it with claim.CreatePauseTable)", dialect.ErrInvalidConfig, def.Table)
	}
	for _, c := range def.Columns {
		if _, ok := cols.Get(c.Name); !ok {
			return fmt.Errorf("%w: pause table %s has no column %s", dialect.ErrInvalidConfig, def.Table, c.Name)
		}
	}
	return nil
}

// cutText prepares a text for a column of max characters: valid UTF-8
// without NUL, cut to max.
func cutText(s string, max int) string {
	if s == "" {
		return ""
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if utf8.RuneCountInString(s) > max {
		s = cutRunes(s, max)
	}
	return s
}

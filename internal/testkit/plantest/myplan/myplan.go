// Package myplan reads MySQL's and MariaDB's plans for the plan tests:
// MariaDB's ANALYZE FORMAT=JSON, which executes a statement (in a
// transaction rolled back) and counts the rows each access read, and
// EXPLAIN, which shows the shape of a plan only (MySQL has no ANALYZE
// FORMAT=JSON).
package myplan

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Access is one access to a table in MariaDB's ANALYZE FORMAT=JSON.
type Access struct {
	Table      string   `json:"table_name"`
	AccessType string   `json:"access_type"`
	Key        string   `json:"key"`
	KeyParts   []string `json:"used_key_parts"`
	Loops      *float64 `json:"r_loops"`
	Rows       float64  `json:"r_rows"`
}

// Plan is what one explained execution did: each access to a table,
// whether it sorted, how many rows it read over every access, and its time.
type Plan struct {
	Accesses []Access
	Filesort bool
	Read     float64
	Ms       float64
}

// walk collects the table accesses and filesorts of a decoded plan.
func (p *Plan) walk(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			switch k {
			case "filesort":
				p.Filesort = true
			case "table":
				raw, _ := json.Marshal(c)
				var a Access
				if json.Unmarshal(raw, &a) == nil {
					loops := 1.0
					if a.Loops != nil {
						loops = *a.Loops
					}
					p.Accesses = append(p.Accesses, a)
					p.Read += a.Rows * loops
				}
			}
			p.walk(c)
		}
	case []any:
		for _, c := range v {
			p.walk(c)
		}
	}
}

// Problems says why the plan is bad ("" when it is not): a sort, a table
// scan (unless fullScan), a walk of a whole index, or more rows read than
// budget.
func (p Plan) Problems(budget int64, fullScan bool) string {
	var out []string
	if p.Filesort {
		out = append(out, "sorts")
	}
	for _, a := range p.Accesses {
		switch {
		case a.AccessType == "ALL" && !fullScan:
			out = append(out, "scans "+a.Table)
		case a.AccessType == "index" && !fullScan:
			out = append(out, "walks the whole index "+a.Key+" of "+a.Table)
		}
	}
	if p.Read > float64(budget) {
		out = append(out, fmt.Sprintf("read %.0f rows", p.Read))
	}
	return strings.Join(out, "; ")
}

// Summary describes each access, the sort and the time, for failure
// messages.
func (p Plan) Summary() string {
	var b strings.Builder
	for _, a := range p.Accesses {
		fmt.Fprintf(&b, "  %s: %s on %s (%s): %.0f rows\n", a.Table, a.AccessType, a.Key, strings.Join(a.KeyParts, ", "), a.Rows)
	}
	if p.Filesort {
		b.WriteString("  filesort\n")
	}
	fmt.Fprintf(&b, "  %.2f ms", p.Ms)
	return b.String()
}

// Analyze runs q under MariaDB's ANALYZE FORMAT=JSON in a transaction it
// rolls back and returns what it read.
func Analyze(ctx context.Context, t testing.TB, db *sql.DB, q string, args []any) Plan {
	t.Helper()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var out string
	require.NoError(t, tx.QueryRowContext(ctx, "ANALYZE FORMAT=JSON "+q, args...).Scan(&out), q)
	var v struct {
		Block struct {
			Ms float64 `json:"r_total_time_ms"`
		} `json:"query_block"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	var tree any
	require.NoError(t, json.Unmarshal([]byte(out), &tree))
	p := Plan{Ms: v.Block.Ms}
	p.walk(tree)
	require.NotEmpty(t, p.Accesses, "no table access in %s", out)
	return p
}

// Row is the first row of a classic EXPLAIN: the access type, the key, the
// estimated rows and Extra.
type Row struct{ Type, Key, Rows, Extra string }

// String renders the row for failure messages.
func (r Row) String() string {
	return fmt.Sprintf("type=%s key=%s rows=%s extra=%q", r.Type, r.Key, r.Rows, r.Extra)
}

// Plan is the shape of r as a Plan (no rows counted): its one access and
// whether it sorts.
func (r Row) Plan() Plan {
	return Plan{Accesses: []Access{{AccessType: r.Type, Key: r.Key}}, Filesort: strings.Contains(r.Extra, "filesort")}
}

// Explain returns the EXPLAIN row of the single-table statement q.
func Explain(ctx context.Context, t testing.TB, db *sql.DB, q string, args ...any) Row {
	t.Helper()
	rows, err := db.QueryContext(ctx, "EXPLAIN "+q, args...)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	require.True(t, rows.Next(), "EXPLAIN returned no row")
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	require.NoError(t, rows.Scan(ptrs...))
	var r Row
	for i, c := range cols {
		switch strings.ToLower(c) {
		case "type":
			r.Type = vals[i].String
		case "key":
			r.Key = vals[i].String
		case "rows":
			r.Rows = vals[i].String
		case "extra":
			r.Extra = vals[i].String
		}
	}
	require.False(t, rows.Next(), "EXPLAIN of one table returned more than one row")
	return r
}

// Seq renders a derived table of the integers 1..n as column g (digits
// crossed: portable to MySQL 8 and MariaDB, no sequence engine needed).
func Seq(n int) string {
	digits := "(SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " +
		"UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	var from, expr []string
	for i, mul := 0, 1; mul < n; i, mul = i+1, mul*10 {
		from = append(from, fmt.Sprintf("%s AS d%d", digits, i))
		expr = append(expr, fmt.Sprintf("%d * d%d.n", mul, i))
	}
	return fmt.Sprintf("(SELECT g FROM (SELECT 1 + %s AS g FROM %s) AS s WHERE g <= %d) AS seq", strings.Join(expr, " + "), strings.Join(from, ", "), n)
}

// Package pgplan reads PostgreSQL's plans for the plan tests: it executes a
// statement under EXPLAIN (ANALYZE, FORMAT JSON), as a prepared statement
// with a chosen plan_cache_mode in a transaction it rolls back, and says
// which tables the plan read, how, and how many rows.
package pgplan

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The plan modes of [Analyze]: the plan_cache_mode under which the
// prepared statement runs.
const (
	Custom  = "custom plan"
	Generic = "generic plan"
)

// Modes lists both modes.
var Modes = []string{Custom, Generic}

// Node is the part of one node of EXPLAIN (ANALYZE, FORMAT JSON) the checks
// read.
type Node struct {
	NodeType         string  `json:"Node Type"`
	Relation         string  `json:"Relation Name"`
	IndexName        string  `json:"Index Name"`
	IndexCond        string  `json:"Index Cond"`
	ActualRows       float64 `json:"Actual Rows"`
	ActualLoops      float64 `json:"Actual Loops"`
	RemovedByFilter  float64 `json:"Rows Removed by Filter"`
	RemovedByRecheck float64 `json:"Rows Removed by Index Recheck"`
	Plans            []Node  `json:"Plans"`
}

// Plan is one explained execution: each access to a table, in plan order,
// the rows read from the tables over every access, and the execution time.
type Plan struct {
	Accesses []Node
	Read     float64
	Ms       float64
	// Indexes are the scans of an index (a bitmap's included), in plan
	// order.
	Indexes []Node
}

func (p *Plan) collect(n Node) {
	switch n.NodeType {
	case "Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan":
		p.Accesses = append(p.Accesses, n)
		p.Read += (n.ActualRows + n.RemovedByFilter + n.RemovedByRecheck) * max(n.ActualLoops, 1)
	}
	switch n.NodeType {
	case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
		p.Indexes = append(p.Indexes, n)
	}
	for _, c := range n.Plans {
		p.collect(c)
	}
}

// Problems says why the plan is bad ("" when it is not): a sequential scan
// (unless fullScan), an index scan of a primary key without a condition (a
// walk of the key), or more rows read than budget.
func (p Plan) Problems(budget int64, fullScan bool) string {
	var out []string
	for _, a := range p.Accesses {
		switch {
		case a.NodeType == "Seq Scan" && !fullScan:
			out = append(out, "scans "+a.Relation)
		case strings.HasSuffix(a.IndexName, "_pkey") && a.IndexCond == "":
			out = append(out, "walks the primary key of "+a.Relation)
		}
	}
	if p.Read > float64(budget) {
		out = append(out, fmt.Sprintf("read %.0f rows", p.Read))
	}
	return strings.Join(out, "; ")
}

// Unled says which index scans of the plan have no condition on their
// index's leading column ("" when none): they walk the whole index, which
// the rows counted from the table do not show (an index condition on a
// later column is checked on every entry, and only the entries that pass
// are fetched). leading maps index names to their leading columns
// ([Leading]); indexes not in it are not checked.
func (p Plan) Unled(leading map[string]string) string {
	var out []string
	for _, n := range p.Indexes {
		col, ok := leading[n.IndexName]
		if !ok {
			continue
		}
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(col) + `\b`).MatchString(n.IndexCond) {
			out = append(out, fmt.Sprintf("walks the index %s of %s (no condition on %s)", n.IndexName, n.Relation, col))
		}
	}
	return strings.Join(out, "; ")
}

// Leading returns the leading column of every index on a column (not an
// expression) in conn's current schema, by index name.
func Leading(ctx context.Context, t testing.TB, conn *sql.Conn) map[string]string {
	t.Helper()
	rows, err := conn.QueryContext(ctx, `SELECT i.relname, a.attname FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid
		JOIN pg_namespace n ON n.oid = i.relnamespace
		JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = x.indkey[0]
		WHERE n.nspname = current_schema()`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var idx, col string
		require.NoError(t, rows.Scan(&idx, &col))
		out[idx] = col
	}
	require.NoError(t, rows.Err())
	return out
}

// Summary describes each access and the time, for failure messages.
func (p Plan) Summary() string {
	var b strings.Builder
	for _, a := range p.Accesses {
		fmt.Fprintf(&b, "  %s on %s", a.NodeType, a.Relation)
		if a.IndexName != "" {
			fmt.Fprintf(&b, " using %s", a.IndexName)
		}
		if a.IndexCond != "" {
			fmt.Fprintf(&b, " (%s)", a.IndexCond)
		}
		fmt.Fprintf(&b, ": %.0f rows x %.0f loops, %.0f removed by filter\n", a.ActualRows, a.ActualLoops, a.RemovedByFilter+a.RemovedByRecheck)
	}
	fmt.Fprintf(&b, "  %.2f ms", p.Ms)
	return b.String()
}

// Analyze prepares q ($n placeholders) on conn, executes it with args under
// EXPLAIN ANALYZE with mode's plan_cache_mode in a transaction it rolls
// back, checks that the server really used a plan of that kind, and returns
// what the plan read. conn is one session, outside a transaction.
func Analyze(ctx context.Context, t testing.TB, conn *sql.Conn, mode, q string, args []any) Plan {
	t.Helper()
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = Literal(t, a)
	}
	_, err := conn.ExecContext(ctx, "PREPARE cl_plan AS "+q)
	require.NoError(t, err, q)
	defer func() { _, _ = conn.ExecContext(context.Background(), "DEALLOCATE cl_plan") }()
	_, err = conn.ExecContext(ctx, "BEGIN")
	require.NoError(t, err)
	defer func() { _, _ = conn.ExecContext(context.Background(), "ROLLBACK") }()
	cacheMode := map[string]string{Custom: "force_custom_plan", Generic: "force_generic_plan"}[mode]
	require.NotEmpty(t, cacheMode, "unknown plan mode %q", mode)
	_, err = conn.ExecContext(ctx, "SET LOCAL plan_cache_mode = "+cacheMode)
	require.NoError(t, err)
	execute := "EXECUTE cl_plan"
	if len(lits) > 0 {
		execute += "(" + strings.Join(lits, ", ") + ")"
	}
	var out string
	require.NoError(t, conn.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+execute).Scan(&out), q)
	var generic, custom int64
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'cl_plan'`).Scan(&generic, &custom))
	switch {
	case len(args) == 0: // one plan, whatever the mode
	case mode == Generic:
		require.True(t, generic == 1 && custom == 0, "%s: generic %d, custom %d", q, generic, custom)
	default:
		require.True(t, generic == 0 && custom == 1, "%s: generic %d, custom %d", q, generic, custom)
	}
	var parsed []struct {
		Plan          Node    `json:"Plan"`
		ExecutionTime float64 `json:"Execution Time"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &parsed))
	require.Len(t, parsed, 1)
	p := Plan{Ms: parsed[0].ExecutionTime}
	p.collect(parsed[0].Plan)
	return p
}

// Literal renders a bound argument as an SQL literal for EXECUTE: nil,
// string, []byte, int, int64, []int64 and []string.
func Literal(t testing.TB, v any) string {
	t.Helper()
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return quote(v)
	case []byte:
		return `'\x` + fmt.Sprintf("%x", v) + `'::bytea`
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case []int64:
		s := make([]string, len(v))
		for i, n := range v {
			s[i] = strconv.FormatInt(n, 10)
		}
		return quote("{" + strings.Join(s, ",") + "}")
	case []string:
		s := make([]string, len(v))
		for i, e := range v {
			s[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(e) + `"`
		}
		return quote("{" + strings.Join(s, ",") + "}")
	}
	t.Fatalf("pgplan: no literal for %T", v)
	return ""
}

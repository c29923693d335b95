// Package liteplan reads SQLite's plans for the plan tests, with EXPLAIN
// QUERY PLAN: SQLite counts no rows, so a plan is judged by its shape.
package liteplan

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// QueryPlan returns the detail lines of EXPLAIN QUERY PLAN of q (none for
// an INSERT ... VALUES, which reads nothing).
func QueryPlan(ctx context.Context, t testing.TB, db *sql.DB, q string, args []any) []string {
	t.Helper()
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	require.NoError(t, err, q)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		out = append(out, detail)
	}
	require.NoError(t, rows.Err())
	return out
}

// Problem says why a plan is bad ("" when it is not): a scan of a table
// or a walk of a whole index (unless fullScan: a statement that reads the
// whole table may read it through a covering index), or a sort.
func Problem(plan []string, fullScan bool) string {
	var out []string
	for _, l := range plan {
		switch {
		case strings.HasPrefix(l, "SCAN ") && strings.Contains(l, " USING ") && !fullScan:
			out = append(out, "walks a whole index: "+l)
		case strings.HasPrefix(l, "SCAN (subquery-"):
			// the rows a subquery's co-routine yields (the claim's two
			// parts), not a table
		case strings.HasPrefix(l, "SCAN ") && !fullScan && !strings.HasPrefix(l, "SCAN CONSTANT ROW"):
			out = append(out, "scans: "+l)
		case strings.Contains(l, "TEMP B-TREE"):
			out = append(out, "sorts: "+l)
		}
	}
	return strings.Join(out, "; ")
}

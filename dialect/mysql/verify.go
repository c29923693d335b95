package mysql

import (
	"context"
	"fmt"
	"strings"

	"github.com/claimlock/claimlock/dialect"
)

// columns reads a table's columns from information_schema, in the current
// database unless the name is schema-qualified. MySQL column names are
// case-insensitive, so they are folded.
func (d *Dialect) columns(ctx context.Context, name string) (dialect.Columns, error) {
	schema, table := splitTable(name)
	cols := dialect.Columns{ByName: map[string]dialect.ColumnInfo{}, Fold: true}
	err := d.do(ctx, "verify schema", true, func() error {
		rows, err := d.db.QueryContext(ctx,
			"SELECT column_name, COALESCE(character_maximum_length, 0) FROM information_schema.columns WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?",
			schema, table)
		if err != nil {
			return interpretError(err)
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			var l int64
			if err := rows.Scan(&n, &l); err != nil {
				return err
			}
			cols.ByName[strings.ToLower(n)] = dialect.ColumnInfo{MaxLen: int(l)}
		}
		return interpretError(rows.Err())
	})
	if err != nil {
		return cols, fmt.Errorf("mysql: verify schema: %w", err)
	}
	return cols, nil
}

// VerifySchema implements [dialect.ClaimStore]. It matters most here: with
// a non-strict sql_mode MySQL truncates a token that does not fit the column
// without an error, and the claimed rows could never be read back or acked.
func (s *claimStore) VerifySchema(ctx context.Context) error {
	cols, err := s.d.columns(ctx, s.spec.Table)
	if err != nil {
		return err
	}
	return s.spec.CheckColumns(cols)
}

// VerifySchema implements [dialect.LeaseStore].
func (l *leaseStore) VerifySchema(ctx context.Context) error {
	cols, err := l.d.columns(ctx, l.spec.Table)
	if err != nil {
		return err
	}
	return l.spec.CheckColumns(cols)
}

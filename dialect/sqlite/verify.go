package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/claimlock/claimlock/dialect"
)

// columns reads a table's columns with pragma_table_info. SQLite does not
// enforce declared lengths, so MaxLen is always 0, and column names are
// case-insensitive, so they are folded.
func (d *Dialect) columns(ctx context.Context, name string) (dialect.Columns, error) {
	schema, table := "main", name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		schema, table = name[:i], name[i+1:]
	}
	cols := dialect.Columns{ByName: map[string]dialect.ColumnInfo{}, Fold: true}
	err := d.retry.Do(ctx, "verify schema", func() error {
		rows, err := d.db.QueryContext(ctx, "SELECT name FROM pragma_table_info(?, ?)", table, schema)
		if err != nil {
			return interpretError(err)
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return err
			}
			cols.ByName[strings.ToLower(n)] = dialect.ColumnInfo{}
		}
		return interpretError(rows.Err())
	})
	if err != nil {
		return cols, fmt.Errorf("sqlite: verify schema: %w", err)
	}
	return cols, nil
}

// VerifySchema implements [dialect.ClaimStore].
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

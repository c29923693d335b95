package postgres

import (
	"context"
	"fmt"

	"github.com/claimlock/claimlock/dialect"
)

// columns reads a table's columns from information_schema, in its schema
// (current_schema() unless the name is schema-qualified). Quoted PostgreSQL
// identifiers are case-sensitive, so names are compared exactly.
func (d *Dialect) columns(ctx context.Context, name string) (dialect.Columns, error) {
	schema, table := schemaAndTable(name)
	var schemaArg any
	if schema != "" {
		schemaArg = schema
	}
	cols := dialect.Columns{ByName: map[string]dialect.ColumnInfo{}}
	err := d.retry.Do(ctx, "verify schema", func() error {
		r, err := d.db.query(ctx,
			"SELECT column_name::text, COALESCE(character_maximum_length, 0)::bigint FROM information_schema.columns WHERE table_schema = COALESCE($1::text, current_schema()) AND table_name = $2::text",
			schemaArg, table)
		if err != nil {
			return interpretError(err)
		}
		defer r.Close()
		for r.Next() {
			var n string
			var l int64
			if err := r.Scan(&n, &l); err != nil {
				return err
			}
			cols.ByName[n] = dialect.ColumnInfo{MaxLen: int(l)}
		}
		return interpretError(r.Err())
	})
	if err != nil {
		return cols, fmt.Errorf("postgres: verify schema: %w", err)
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

package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/claimlock/claimlock/dialect"
)

// ErrTableNotFound is what [ColumnAdder.AddColumnsDDL] wraps when the
// table does not exist: a migration creates it instead.
var ErrTableNotFound = errors.New("not found (or it has no columns)")

// columnType renders the type of a column that is not an auto-incrementing
// key.
func (e *Engine) columnType(c ColumnDef) (string, error) {
	switch c.Type {
	case TypeInt:
		return e.DDL.Int, nil
	case TypeTime:
		return e.DDL.Time, nil
	case TypeTimeSeconds:
		return e.DDL.TimeSeconds, nil
	case TypeText:
		n := c.Len
		if n == 0 {
			n = 255
		}
		if strings.Contains(e.DDL.Text, "%d") {
			return fmt.Sprintf(e.DDL.Text, n), nil
		}
		return e.DDL.Text, nil
	}
	return "", fmt.Errorf("%w: column %s: unknown type %d", dialect.ErrInvalidConfig, c.Name, c.Type)
}

// AddColumnsDDL implements [ColumnAdder]: it reads table's columns
// from the catalog and renders one ALTER TABLE ... ADD COLUMN statement per
// column of cols the table lacks, typed as CreateTableDDL types them.
func (b *Base) AddColumnsDDL(ctx context.Context, table string, cols []ColumnDef) ([]string, error) {
	if err := ValidateIdent("Table", table); err != nil {
		return nil, err
	}
	for _, c := range cols {
		if err := ValidateIdent("Column", c.Name); err != nil {
			return nil, err
		}
		if c.Type == TypeSerial {
			return nil, fmt.Errorf("%w: column %s: an auto-incrementing key cannot be added to a table", dialect.ErrInvalidConfig, c.Name)
		}
		if c.NotNull && c.Default == nil {
			return nil, fmt.Errorf("%w: column %s: a NOT NULL column added to a table needs a default", dialect.ErrInvalidConfig, c.Name)
		}
	}
	probe, err := NewClaims(b.E, b.Claims, dialect.ClaimTable{Table: table}.WithDefaults(), nil)
	if err != nil {
		return nil, err
	}
	have, err := b.E.catalogColumns(ctx, probe.columns, table)
	if err != nil {
		return nil, err
	}
	if len(have.ByName) == 0 {
		return nil, fmt.Errorf("%w: Table: table %s %w", dialect.ErrInvalidConfig, table, ErrTableNotFound)
	}
	var out []string
	for _, c := range cols {
		if _, ok := have.Get(c.Name); ok {
			continue
		}
		typ, err := b.E.columnType(c)
		if err != nil {
			return nil, err
		}
		stmt := fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", b.E.QuoteName(table), b.E.Quote(c.Name), typ)
		if c.NotNull {
			stmt += " NOT NULL"
		}
		if c.Default != nil {
			stmt += " DEFAULT " + c.Default.Literal()
		}
		out = append(out, stmt)
	}
	return out, nil
}

var _ ColumnAdder = (*Base)(nil)

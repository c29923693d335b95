package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
)

// DDL is how an engine renders a portable [TableDef].
type DDL struct {
	// Types are the column types by portable type; the text type may be a
	// format taking the length ("VARCHAR(%d)").
	Int, Time, TimeSeconds, Text string
	// Serial is the whole type of an auto-incrementing key column.
	Serial string
	// SerialIsKey is true when Serial declares the primary key itself
	// (SQLite's INTEGER PRIMARY KEY AUTOINCREMENT).
	SerialIsKey bool
	// InlineIndexes declares secondary indexes inside CREATE TABLE (MySQL);
	// otherwise each is a CREATE INDEX IF NOT EXISTS of its own.
	InlineIndexes bool
	// Suffix follows the closing parenthesis (" ENGINE=InnoDB").
	Suffix string
}

// createTableDDL renders def in the engine's syntax.
func (b *Backend) createTableDDL(def TableDef) ([]string, error) {
	if err := def.Validate(); err != nil {
		return nil, err
	}
	ddl := b.drv.DDL()
	var sb strings.Builder
	table := b.quoteName(def.Table)
	fmt.Fprintf(&sb, "CREATE TABLE IF NOT EXISTS %s (", table)
	pk := def.PrimaryKey
	for i, c := range def.Columns {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(b.drv.Quote(c.Name) + " ")
		switch c.Type {
		case TypeSerial:
			sb.WriteString(ddl.Serial)
			if ddl.SerialIsKey {
				pk = nil
			} else if len(pk) == 0 {
				pk = []string{c.Name}
			}
			continue
		default:
			typ, err := b.columnType(c)
			if err != nil {
				return nil, err
			}
			sb.WriteString(typ)
		}
		if c.NotNull {
			sb.WriteString(" NOT NULL")
		}
		if c.Default != nil {
			sb.WriteString(" DEFAULT " + c.Default.Literal())
		}
	}
	if len(pk) > 0 {
		fmt.Fprintf(&sb, ", PRIMARY KEY (%s)", b.quoteAll(pk))
	}
	var out []string
	for _, ix := range def.Indexes {
		u := ""
		if ix.Unique {
			u = "UNIQUE "
		}
		if ddl.InlineIndexes {
			fmt.Fprintf(&sb, ", %sINDEX %s (%s)", u, b.drv.Quote(ix.Name), b.quoteAll(ix.Columns))
			continue
		}
		out = append(out, fmt.Sprintf("CREATE %sINDEX IF NOT EXISTS %s ON %s (%s)", u, b.drv.Quote(ix.Name), table, b.quoteAll(ix.Columns)))
	}
	sb.WriteString(")" + ddl.Suffix)
	return append([]string{sb.String()}, out...), nil
}

func (b *Backend) quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = b.drv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// execDDL runs statements produced by the DDL methods, in order. A CREATE
// INDEX whose index exists already is skipped, so running IndexDDL twice is
// harmless on engines without CREATE INDEX IF NOT EXISTS.
func (b *Backend) execDDL(ctx context.Context, stmts []string) error {
	for _, s := range stmts {
		if _, err := b.db.Exec(ctx, s); err != nil {
			err = b.interpret(err)
			if strings.HasPrefix(s, "CREATE INDEX") && classOf(err) == errclass.Duplicate {
				continue
			}
			return fmt.Errorf("ddl %q: %w", s, err)
		}
	}
	return nil
}

// columnType renders the type of a column that is not an auto-incrementing
// key.
func (b *Backend) columnType(c ColumnDef) (string, error) {
	ddl := b.drv.DDL()
	switch c.Type {
	case TypeInt:
		return ddl.Int, nil
	case TypeTime:
		return ddl.Time, nil
	case TypeTimeSeconds:
		return ddl.TimeSeconds, nil
	case TypeText:
		n := c.Len
		if n == 0 {
			n = 255
		}
		if strings.Contains(ddl.Text, "%d") {
			return fmt.Sprintf(ddl.Text, n), nil
		}
		return ddl.Text, nil
	}
	return "", fmt.Errorf("%w: column %s: unknown type %d", dialect.ErrInvalidConfig, c.Name, c.Type)
}

// ErrTableNotFound is what [Backend.AddColumnsDDL] wraps when the table
// does not exist: a migration creates it instead.
var ErrTableNotFound = errors.New("not found (or it has no columns)")

// AddColumnsDDL implements [ColumnAdder]: it reads table's columns
// from the catalog and renders one ALTER TABLE ... ADD COLUMN statement per
// column of cols the table lacks, typed as CreateTableDDL types them.
func (b *Backend) AddColumnsDDL(ctx context.Context, table string, cols []ColumnDef) ([]string, error) {
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
	probe, err := newClaims(b, dialect.ClaimTable{Table: table}.WithDefaults())
	if err != nil {
		return nil, err
	}
	have, err := b.catalogColumns(ctx, probe.st(claimKey{t: tColumns}), table)
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
		typ, err := b.columnType(c)
		if err != nil {
			return nil, err
		}
		stmt := fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", b.quoteName(table), b.drv.Quote(c.Name), typ)
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

var _ ColumnAdder = (*Backend)(nil)

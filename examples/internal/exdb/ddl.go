package exdb

import (
	"context"
	"fmt"
	"strings"
)

// Kind is a column type of the example tables, rendered per driver.
type Kind int

const (
	// Int is a 64-bit integer.
	Int Kind = iota
	// Serial is an auto-incrementing 64-bit key.
	Serial
	// Text is a string of at most Column.Len bytes.
	Text
	// Time is a time the library reads and writes on the database clock: a
	// TIMESTAMPTZ on PostgreSQL, a DATETIME(6) on MySQL and integer
	// milliseconds on SQLite, as each dialect expects by default.
	Time
)

// Column is one column of an example table.
type Column struct {
	Name    string
	Kind    Kind
	Len     int    // Text only (0: 255)
	NotNull bool   // Serial columns are always NOT NULL
	Default string // an SQL literal, or empty
}

// Table is an example table, created with plain SQL per driver, as a
// user's own migration would create it (claimlock does not create claim
// tables: it works on the tables an application has).
type Table struct {
	Name       string
	Columns    []Column
	PrimaryKey []string   // ignored when a column is Serial (the key is that column)
	Indexes    [][]string // each: the index name, then its columns
}

// CreateTable creates t if it does not exist, with its indexes.
func (d *DB) CreateTable(ctx context.Context, t Table) error {
	for _, q := range d.TableDDL(t) {
		if _, err := d.SQL.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// TableDDL returns the statements that create t (if it does not exist) and
// its indexes, for d's driver.
func (d *DB) TableDDL(t Table) []string {
	var cols []string
	key := t.PrimaryKey
	for _, c := range t.Columns {
		var typ string
		switch c.Kind {
		case Serial:
			key = nil
			switch d.Driver {
			case "postgres":
				typ = "BIGSERIAL PRIMARY KEY"
			case "mysql":
				typ = "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY"
			default:
				typ = "INTEGER PRIMARY KEY AUTOINCREMENT"
			}
		case Int:
			typ = "BIGINT"
			if d.Driver == "sqlite" {
				typ = "INTEGER"
			}
		case Text:
			n := c.Len
			if n == 0 {
				n = 255
			}
			switch d.Driver {
			case "sqlite":
				typ = "TEXT"
			case "mysql":
				typ = fmt.Sprintf("VARCHAR(%d) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", n)
			default:
				typ = fmt.Sprintf("VARCHAR(%d)", n)
			}
		case Time:
			switch d.Driver {
			case "postgres":
				typ = "TIMESTAMPTZ"
			case "mysql":
				typ = "DATETIME(6)"
			default:
				typ = "INTEGER"
			}
		}
		col := d.Q(c.Name) + " " + typ
		if c.NotNull && c.Kind != Serial {
			col += " NOT NULL"
		}
		if c.Default != "" {
			col += " DEFAULT " + c.Default
		}
		cols = append(cols, col)
	}
	if len(key) > 0 {
		cols = append(cols, "PRIMARY KEY ("+d.list(key)+")")
	}
	suffix := ""
	if d.Driver == "mysql" {
		suffix = " ENGINE=InnoDB"
	}
	out := []string{fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)%s", d.Q(t.Name), strings.Join(cols, ", "), suffix)}
	for _, ix := range t.Indexes {
		if d.Driver == "mysql" {
			// MySQL has no CREATE INDEX IF NOT EXISTS (MariaDB has); the
			// index goes into the table instead.
			out[0] = strings.TrimSuffix(out[0], ")"+suffix) + fmt.Sprintf(", INDEX %s (%s))%s", d.Q(ix[0]), d.list(ix[1:]), suffix)
			continue
		}
		out = append(out, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)", d.Q(ix[0]), d.Q(t.Name), d.list(ix[1:])))
	}
	return out
}

func (d *DB) list(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = d.Q(n)
	}
	return strings.Join(q, ", ")
}

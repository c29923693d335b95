package core

import (
	"fmt"
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// ColumnInfo is a column as the database's catalog reports it.
type ColumnInfo struct {
	// MaxLen is the declared character length of a string column, or 0
	// when the column is not a bounded string type (or the engine does not
	// enforce lengths, as SQLite).
	MaxLen int
	// Type is the column's data type as the catalog names it, in lower
	// case ("datetime", "timestamp with time zone", "integer").
	Type string
	// Precision is the number of fractional-second digits a time column
	// stores (0 for MySQL's DATETIME or PostgreSQL's timestamp(0), 6 for
	// DATETIME(6) or timestamptz), or -1 when the column is not a time
	// column or the engine does not say.
	Precision int
}

// Resolution returns the smallest step between two values the column can
// hold: one second for a precision of 0, a microsecond for 6, and zero when
// the precision is unknown or finer.
func (c ColumnInfo) Resolution() time.Duration {
	if c.Precision < 0 || c.Precision >= 6 {
		return 0
	}
	d := time.Second
	for range c.Precision {
		d /= 10
	}
	return d
}

// Columns is a table's columns by name, as read from the catalog. Engines
// whose column names are case-insensitive (MySQL, SQLite) store lower-case
// names and set Fold.
type Columns struct {
	ByName map[string]ColumnInfo
	Fold   bool
}

// Get returns the column named name, folding case where the engine does.
func (c Columns) Get(name string) (ColumnInfo, bool) {
	if c.Fold {
		name = strings.ToLower(name)
	}
	ci, ok := c.ByName[name]
	return ci, ok
}

func (c Columns) check(table string, cols []struct{ field, name string }, tokenField, tokenCol string) error {
	if len(c.ByName) == 0 {
		return fmt.Errorf("%w: Table: table %s not found (or it has no columns)", dialect.ErrInvalidConfig, table)
	}
	for _, col := range cols {
		if col.name == "" {
			continue
		}
		if _, ok := c.Get(col.name); !ok {
			return fmt.Errorf("%w: %s: table %s has no column %q", dialect.ErrInvalidConfig, col.field, table, col.name)
		}
	}
	if ci, _ := c.Get(tokenCol); ci.MaxLen > 0 && ci.MaxLen < dialect.TokenLen {
		return fmt.Errorf("%w: %s: column %s.%s holds %d characters; tokens have %d (use VARCHAR(%d))",
			dialect.ErrInvalidConfig, tokenField, table, tokenCol, ci.MaxLen, dialect.TokenLen, dialect.MaxTokenLen)
	}
	return nil
}

// checkClaimColumns verifies the table described by s against its catalog
// columns: every configured column exists and the token column can hold a
// token.
func checkClaimColumns(s dialect.ClaimTable, c Columns) error {
	cols := []struct{ field, name string }{
		{"ID", s.ID}, {"Status", s.Status}, {"Token", s.Token}, {"ClaimedAt", s.ClaimedAt},
		{"Attempts", s.Attempts}, {"Version", s.Version}, {"CreatedAt", s.CreatedAt},
	}
	for i, n := range s.Columns {
		cols = append(cols, struct{ field, name string }{fmt.Sprintf("Columns[%d]", i), n})
	}
	for i, n := range s.Scope {
		cols = append(cols, struct{ field, name string }{fmt.Sprintf("Scope[%d]", i), n})
	}
	return c.check(s.Table, cols, "Token", s.Token)
}

// checkLeaseColumns verifies the lease table described by s against its
// catalog columns: every configured column exists and the owner column can
// hold a token.
func checkLeaseColumns(s dialect.LeaseTable, c Columns) error {
	cols := []struct{ field, name string }{
		{"Key", s.Key}, {"Owner", s.Owner}, {"LockedAt", s.LockedAt}, {"ExpiresAt", s.ExpiresAt}, {"Fence", s.Fence},
	}
	return c.check(s.Table, cols, "Owner", s.Owner)
}

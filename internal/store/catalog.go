package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store/render"
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
	// Nullable is true when the column accepts NULL.
	Nullable bool
	// Collation is the column's collation as the catalog names it, in lower
	// case ("utf8mb4_general_ci"), or "" when the engine does not say.
	Collation string
	// Precision is the number of fractional-second digits a time column
	// stores (0 for MySQL's DATETIME or PostgreSQL's timestamp(0), 6 for
	// DATETIME(6) or timestamptz), or -1 when the column is not a time
	// column or the engine does not say.
	Precision int
	// ColumnType is the full declared type, with what Type leaves out: MySQL's "tinyint(3) unsigned" or "enum('a','b')", a
	// PostgreSQL enum's labels in the same enum('a','b') form, SQLite's
	// declared type. It is Type where the engine has nothing more to say.
	ColumnType string
	// PrimaryKey is true for a column that is the table's primary key by
	// itself.
	PrimaryKey bool
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

// tableColumns is a table's columns by name, as read from the catalog. Engines
// whose column names are case-insensitive (MySQL, SQLite) store lower-case
// names and set Fold.
type tableColumns struct {
	ByName map[string]ColumnInfo
	Fold   bool
}

// Get returns the column named name, folding case where the engine does.
func (c tableColumns) Get(name string) (ColumnInfo, bool) {
	if c.Fold {
		name = strings.ToLower(name)
	}
	ci, ok := c.ByName[name]
	return ci, ok
}

func (c tableColumns) check(table string, cols []struct{ field, name string }, tokenField, tokenCol string) error {
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
	if ci, _ := c.Get(tokenCol); ci.MaxLen > 0 && ci.MaxLen < TokenLen {
		return fmt.Errorf("%w: %s: column %s.%s holds %d characters; tokens have %d (use VARCHAR(%d))",
			dialect.ErrInvalidConfig, tokenField, table, tokenCol, ci.MaxLen, TokenLen, MaxTokenLen)
	}
	return nil
}

// checkClaimColumns verifies the table described by s against its catalog
// columns: every configured column exists, the token column can hold a
// token, the counters hold numbers and the status column every status
// value.
func (b *Backend) checkClaimColumns(s dialect.ClaimTable, c tableColumns) error {
	cols := []struct{ field, name string }{
		{"ID", s.ID}, {"Status", s.Status}, {"Token", s.Token}, {"ClaimedAt", s.ClaimedAt},
		{"Attempts", s.Attempts}, {"Version", s.Version}, {"CreatedAt", s.CreatedAt},
		{"RunAt", s.RunAt}, {"Error", s.Error}, {"Worker", s.Worker},
	}
	for i, n := range s.Columns {
		cols = append(cols, struct{ field, name string }{fmt.Sprintf("Columns[%d]", i), n})
	}
	for i, n := range s.Scope {
		cols = append(cols, struct{ field, name string }{fmt.Sprintf("Scope[%d]", i), n})
	}
	if err := c.check(s.Table, cols, "Token", s.Token); err != nil {
		return err
	}
	if col, _ := c.Get(s.ClaimedAt); s.ClearClaimedAt && !col.Nullable {
		return fmt.Errorf("%w: ClearClaimedAt: column %s.%s is NOT NULL; make it nullable or leave ClearClaimedAt off",
			dialect.ErrInvalidConfig, s.Table, s.ClaimedAt)
	}
	for _, oc := range []struct{ field, name string }{{"RunAt", s.RunAt}, {"Error", s.Error}} {
		if col, _ := c.Get(oc.name); oc.name != "" && !col.Nullable {
			return fmt.Errorf("%w: %s: column %s.%s is NOT NULL; claimlock sets it to NULL (make it nullable)",
				dialect.ErrInvalidConfig, oc.field, s.Table, oc.name)
		}
	}
	for _, tc := range []struct{ field, name string }{{"Error", s.Error}, {"Worker", s.Worker}} {
		if col, _ := c.Get(tc.name); tc.name != "" && col.kind() != kindText {
			return fmt.Errorf("%w: %s: column %s.%s has type %s; it needs a text type", dialect.ErrInvalidConfig, tc.field, s.Table, tc.name, col.Type)
		}
	}
	for _, cc := range []struct{ field, name string }{{"Attempts", s.Attempts}, {"Version", s.Version}} {
		if cc.name == "" {
			continue
		}
		if err := b.learnType(s.Table, cc.name, c).needInt(cc.field); err != nil {
			return err
		}
	}
	return b.checkStatusColumn(s, c)
}

// checkStatusColumn verifies that the status column can hold every status
// value the library writes, and tell them apart, before any row changes: a
// status value the column cannot hold fails the statement that writes it
// (an ack, leaving its rows processing) or, in a non-strict MySQL, is
// stored changed (cut short as 'PROCESSI', 'DONE' as 0 in an integer
// column, 300 as 127 in a TINYINT), and a row so marked can then neither be
// heartbeaten, released nor reaped. On a case-insensitive collation 'done'
// and 'DONE' are one value, and done rows would be claimed again.
func (b *Backend) checkStatusColumn(s dialect.ClaimTable, c tableColumns) error {
	col, _ := c.Get(s.Status)
	typ := b.learnType(s.Table, s.Status, c)
	all := []struct {
		field string
		v     dialect.Status
	}{{"Pending", s.Pending}, {"Processing", s.Processing}, {"Done", s.Done}, {"Failed", s.Failed}}
	for i, a := range all {
		if err := typ.checkStatus(a.field, a.v); err != nil {
			return err
		}
		if !a.v.IsSet() || a.v.IsNumeric() || !caseInsensitive(col.Collation) {
			continue
		}
		for _, b := range all[:i] {
			if b.v.IsSet() && strings.EqualFold(a.v.String(), b.v.String()) {
				return fmt.Errorf("%w: %s: status %q equals %s %q under the collation %s of column %s.%s",
					dialect.ErrInvalidConfig, a.field, a.v.String(), b.field, b.v.String(), col.Collation, s.Table, s.Status)
			}
		}
	}
	return nil
}

// columnKind is what a column holds, as far as checking values goes.
type columnKind int

const (
	kindOther columnKind = iota
	kindInt
	kindText
)

// kind classifies a column by its catalog type: MySQL's and PostgreSQL's
// type names, and SQLite's declared types by its affinity rules.
func (c ColumnInfo) kind() columnKind {
	switch t := c.Type; {
	case t == "int" || t == "integer" || t == "bigint" || t == "smallint" || t == "tinyint" || t == "mediumint":
		return kindInt
	case t == "varchar" || t == "char" || t == "text" || t == "character varying" || t == "character" ||
		t == "tinytext" || t == "mediumtext" || t == "longtext" || t == "enum":
		return kindText
	case strings.Contains(t, "int"):
		return kindInt
	case strings.Contains(t, "char") || strings.Contains(t, "clob") || strings.Contains(t, "text"):
		return kindText
	}
	return kindOther
}

// IsText reports a column of a text, character or enum type.
func (c ColumnInfo) IsText() bool { return c.kind() == kindText }

// IsInt reports a column of an integer type.
func (c ColumnInfo) IsInt() bool { return c.kind() == kindInt }

// caseInsensitive reports a collation that compares letters regardless of
// case, by MySQL's and MariaDB's naming convention (..._ci).
func caseInsensitive(collation string) bool {
	return strings.HasSuffix(collation, "_ci")
}

// checkLeaseColumns verifies the lease table described by s against its
// catalog columns: every configured column exists and the owner column can
// hold a token.
func checkLeaseColumns(s dialect.LeaseTable, c tableColumns) error {
	cols := []struct{ field, name string }{
		{"Key", s.Key}, {"Owner", s.Owner}, {"LockedAt", s.LockedAt}, {"ExpiresAt", s.ExpiresAt}, {"Fence", s.Fence}, {"Status", s.Status},
	}
	return c.check(s.Table, cols, "Owner", s.Owner)
}

// catalogColumns reads a table's columns with the engine's catalog query.
func (b *Backend) catalogColumns(ctx context.Context, st render.Stmt, name string) (tableColumns, error) {
	schema, table := SplitName(name)
	a := &render.Args{Table: table}
	if schema != "" {
		a.Schema = schema
	}
	cols := tableColumns{Fold: b.drv.FoldsCase()}
	err := b.Do(ctx, "verify schema", true, func() error {
		cols.ByName = map[string]ColumnInfo{}
		return b.query(ctx, b.db, st, a, func(r Rows) error {
			var n, typ, coll, full string
			var l, p int64
			var nullable, key bool
			if err := r.Scan(&n, &l, &typ, &p, &coll, &nullable, &full, &key); err != nil {
				return err
			}
			if b.drv.FoldsCase() {
				n = strings.ToLower(n)
			}
			if full == "" {
				full = typ
			}
			cols.ByName[n] = ColumnInfo{MaxLen: int(l), Type: strings.ToLower(typ), Precision: int(p), Collation: strings.ToLower(coll),
				Nullable: nullable, ColumnType: full, PrimaryKey: key}
			return nil
		})
	})
	return cols, err
}

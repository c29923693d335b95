package tasklock

import (
	"context"
	"fmt"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// CreateTableDDL returns the statements that create the library-managed key
// table [KeyTable] describes (CREATE TABLE IF NOT EXISTS plus its expiry
// index), in d's syntax, for printing or for a migration tool.
func CreateTableDDL(d dialect.Dialect, table string) ([]string, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: tasklock: nil dialect", dialect.ErrInvalidConfig)
	}
	stmts, err := store.CreateTableDDL(d, store.LeaseTableDef(table, 0))
	if err != nil {
		return nil, fmt.Errorf("tasklock: create table: %w", err)
	}
	return stmts, nil
}

// CreateTable creates the library-managed key table (if it does not exist)
// that [KeyTable] describes.
func CreateTable(ctx context.Context, d dialect.Dialect, table string) error {
	stmts, err := CreateTableDDL(d, table)
	if err != nil {
		return err
	}
	if err := store.ExecDDL(ctx, d, stmts); err != nil {
		return fmt.Errorf("tasklock: create table %s: %w", table, err)
	}
	return nil
}

// AlterTaskTableDDL returns advice for adding the lease columns spec names
// to an existing task table: one ALTER TABLE ... ADD COLUMN statement for
// the owner column (VARCHAR(40)) and, when spec has them, the fence column
// (BIGINT NOT NULL DEFAULT 0), with identifiers quoted by d. An ExpiresAt
// column must have the same type as the LockedAt column the table already
// has (the dialect writes both the same way), which only the table's owner
// knows, so it comes as a SQL comment showing the statement to complete.
// Drop the lines for columns the table already has. spec is validated
// first; errors wrap [dialect.ErrInvalidConfig].
func AlterTaskTableDDL(d dialect.Dialect, spec dialect.LeaseTable) ([]string, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: tasklock: nil dialect", dialect.ErrInvalidConfig)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("tasklock: alter task table: %w", err)
	}
	q := func(field, name string) string {
		s, _ := store.QuoteIdent(d, field, name) // validated above
		return s
	}
	t := q("Table", spec.Table)
	out := []string{fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s VARCHAR(%d)", t, q("Owner", spec.Owner), store.MaxTokenLen)}
	if spec.ExpiresAt != "" {
		out = append(out, fmt.Sprintf("-- ALTER TABLE %s ADD COLUMN %s <the type of %s>", t, q("ExpiresAt", spec.ExpiresAt), q("LockedAt", spec.LockedAt)))
	}
	if spec.Fence != "" {
		out = append(out, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s BIGINT NOT NULL DEFAULT 0", t, q("Fence", spec.Fence)))
	}
	return out, nil
}

// MissingColumnsDDL reads the lease table's columns from the catalog and
// returns, for the lease columns it lacks, what [AlterTaskTableDDL]
// advises: ALTER TABLE ... ADD COLUMN for the owner and fence columns, and
// for an expiry column a SQL comment showing the statement to complete (its
// type must be the lock time column's, which only the table's owner
// knows). A table that has them all gets none. A table that does not
// exist is an error: create a key table with [CreateTable].
func (k *Locker) MissingColumnsDDL(ctx context.Context) ([]string, error) {
	lt := k.cfg.Table
	b, err := store.Of(k.d)
	if err != nil {
		return nil, fmt.Errorf("tasklock: missing columns: %w", err)
	}
	zero := dialect.StatusInt(0)
	var cols []store.ColumnDef
	if lt.Owner != "" {
		cols = append(cols, store.ColumnDef{Name: lt.Owner, Type: store.TypeText, Len: store.MaxTokenLen})
	}
	if lt.Fence != "" {
		cols = append(cols, store.ColumnDef{Name: lt.Fence, Type: store.TypeInt, NotNull: true, Default: &zero})
	}
	out, err := b.AddColumnsDDL(ctx, lt.Table, cols)
	if err != nil {
		return nil, fmt.Errorf("tasklock: missing columns: %w", err)
	}
	if lt.ExpiresAt == "" {
		return out, nil
	}
	exp, err := b.AddColumnsDDL(ctx, lt.Table, []store.ColumnDef{{Name: lt.ExpiresAt, Type: store.TypeTime}})
	if err != nil {
		return nil, fmt.Errorf("tasklock: missing columns: %w", err)
	}
	if len(exp) > 0 {
		q := func(name string) string { return b.QuoteName(name) }
		out = append(out, fmt.Sprintf("-- ALTER TABLE %s ADD COLUMN %s <the type of %s>", q(lt.Table), q(lt.ExpiresAt), q(lt.LockedAt)))
	}
	return out, nil
}

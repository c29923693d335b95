package claim

// This file is the claim table's schema as statements: a new table's, and
// what an existing table lacks. Tools print them (claimctl ddl), migrations
// apply them, tests and benchmarks create their tables with them.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// CreateTableDDL returns the statements that create a table for cfg in d's
// syntax: CREATE TABLE IF NOT EXISTS with every column cfg names, then the
// recommended indexes ([Claimer.IndexDDL]). The key is an auto-incrementing
// integer (a text key for [dialect.IDText]); scope columns are 64-bit
// integers and cfg.Columns text: adjust them to your data, or create the
// table yourself. For an existing table, [Claimer.Migration] returns what it
// lacks. cfg is validated as [New] does; errors wrap
// [dialect.ErrInvalidConfig].
func CreateTableDDL(d dialect.Dialect, cfg Config) ([]string, error) {
	if d == nil {
		return nil, invalid("Dialect", "is nil")
	}
	spec, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	create, err := createTableDDL(d, spec)
	if err != nil {
		return nil, err
	}
	cs, err := store.OpenClaims(d, spec)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return append(create, cs.IndexDDL()...), nil
}

// CreateTable creates cfg's table, if it does not exist, with its
// recommended indexes: it runs [CreateTableDDL]'s statements on d.
func CreateTable(ctx context.Context, d dialect.Dialect, cfg Config) error {
	stmts, err := CreateTableDDL(d, cfg)
	if err != nil {
		return err
	}
	if err := store.ExecDDL(ctx, d, stmts); err != nil {
		return fmt.Errorf("claim: create table %s: %w", cfg.Table, err)
	}
	return nil
}

// createTableDDL returns the CREATE TABLE statement of spec's table,
// without its indexes.
func createTableDDL(d dialect.Dialect, spec dialect.ClaimTable) ([]string, error) {
	stmts, err := store.CreateTableDDL(d, store.ClaimTableDef(spec))
	if err != nil {
		return nil, fmt.Errorf("claim: create table: %w", err)
	}
	return stmts, nil
}

// Migration is what a database lacks for a claimer's table, as statements
// in its engine's syntax, each section in the order to run it.
type Migration struct {
	// Create creates the table when it does not exist ([CreateTableDDL]'s
	// table statement); nil when it exists.
	Create []string
	// Columns add the library's columns the table lacks: status, token,
	// claim time and the optional columns the configuration names. The
	// key, scope and payload columns are not among them: only the table's
	// owner knows their types.
	Columns []string
	// Indexes create the recommended indexes the table lacks (every one
	// for a table to create); for an existing table they are built
	// without blocking its writes when Migration was asked to (see
	// [Claimer.IndexDDL]).
	Indexes []string
}

// Migration reads the table's columns and indexes from the catalog and
// returns the statements that bring it to the claimer's configuration: to
// print for review, or to hand to a migration tool. online builds the
// indexes of an existing table without blocking writes where the engine
// can ([Claimer.IndexDDL]): such a PostgreSQL statement cannot run inside a
// transaction block. Statements that would add nothing are left out, so a
// table that has everything gets an empty Migration.
func (c *Claimer[T]) Migration(ctx context.Context, online bool) (Migration, error) {
	k := c.core
	b, err := store.Of(k.d)
	if err != nil {
		return Migration{}, fmt.Errorf("claim: migration: %w", err)
	}
	// The library's own columns: not the key, the scope columns or the
	// payload columns.
	skip := append(append([]string{k.spec.ID}, k.spec.Scope...), k.spec.Columns...)
	var addable []store.ColumnDef
	for _, col := range store.ClaimTableDef(k.spec).Columns {
		if !slices.Contains(skip, col.Name) {
			addable = append(addable, col)
		}
	}
	alter, err := b.AddColumnsDDL(ctx, k.spec.Table, addable)
	if errors.Is(err, store.ErrTableNotFound) {
		create, err := createTableDDL(k.d, k.spec)
		if err != nil {
			return Migration{}, err
		}
		return Migration{Create: create, Indexes: c.IndexDDL(false)}, nil
	}
	if err != nil {
		return Migration{}, storeError("migration", err)
	}
	idx, err := k.cs.MissingIndexesWith(ctx, store.IndexOptions{Online: online})
	if err != nil {
		return Migration{}, storeError("migration", err)
	}
	return Migration{Columns: alter, Indexes: idx}, nil
}

// Package testtable creates tables of any shape, in the portable column
// types the dialects render, for the tests of packages outside the core
// (cmd/claimctl, the contrib modules): a user's own task table, a claim
// table with columns of unusual types, tables the library's own helpers
// (claim.CreateTable, tasklock.CreateTable) do not make. Its types are the
// engine core's table definitions, so that a test table is rendered by the
// code that renders the library's own.
package testtable

import (
	"context"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// Def describes a table: its name, columns in order, primary key and
// indexes.
type Def = store.TableDef

// Column is one column of a [Def].
type Column = store.ColumnDef

// Type is the portable type of a [Column].
type Type = store.ColumnType

// The portable column types.
const (
	// Int is a 64-bit integer.
	Int = store.TypeInt
	// Serial is an auto-incrementing integer key.
	Serial = store.TypeSerial
	// Text is a string of at most Column.Len characters (255 when zero).
	Text = store.TypeText
	// Time is a point in time at the precision of the engine's clock.
	Time = store.TypeTime
	// TimeSeconds is a point in time in whole seconds, as many
	// applications' own tables hold it.
	TimeSeconds = store.TypeTimeSeconds
)

// TokenLen is the width of a column that holds a claim token or a lease
// owner.
const TokenLen = store.MaxTokenLen

// Create creates def's table (if it does not exist) with its indexes on d.
func Create(ctx context.Context, d dialect.Dialect, def Def) error {
	stmts, err := store.CreateTableDDL(d, def)
	if err != nil {
		return err
	}
	return store.ExecDDL(ctx, d, stmts)
}

package dialect

import (
	"fmt"

	"github.com/claimlock/claimlock/internal/ident"
)

// validateIdent checks a table name (schema.table allowed) with
// ident.Check, in an error wrapping [ErrInvalidConfig] naming field.
func validateIdent(field, name string) error {
	if err := ident.Check(name); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, field, err)
	}
	return nil
}

// validateColumn is validateIdent for a column.
func validateColumn(field, name string) error {
	if err := ident.CheckColumn(name); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, field, err)
	}
	return nil
}

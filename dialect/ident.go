package dialect

import (
	"fmt"
	"strings"
)

// MaxIdentLen is the longest identifier part accepted (MySQL's limit is 64,
// PostgreSQL's 63; the smaller one wins so a name works everywhere).
const MaxIdentLen = 63

// ValidateIdent checks a table or column name: one or two dot-separated parts
// (schema.table), each matching ^[A-Za-z_][A-Za-z0-9_]*$ and at most
// [MaxIdentLen] bytes. field names the configuration field in the error.
// Anything else, including quotes, backticks, semicolons, spaces, comments and
// non-ASCII look-alikes, is rejected with an error wrapping [ErrInvalidConfig].
func ValidateIdent(field, name string) error {
	if name == "" {
		return fmt.Errorf("%w: %s: identifier is empty", ErrInvalidConfig, field)
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return fmt.Errorf("%w: %s: %q has more than two dot-separated parts", ErrInvalidConfig, field, name)
	}
	for _, p := range parts {
		if err := validatePart(p); err != nil {
			return fmt.Errorf("%w: %s: %q: %s", ErrInvalidConfig, field, name, err)
		}
	}
	return nil
}

// ValidateColumn is [ValidateIdent] for a single-part name (a column).
func ValidateColumn(field, name string) error {
	if err := ValidateIdent(field, name); err != nil {
		return err
	}
	if strings.Contains(name, ".") {
		return fmt.Errorf("%w: %s: column %q must not be qualified", ErrInvalidConfig, field, name)
	}
	return nil
}

type identError string

func (e identError) Error() string { return string(e) }

func validatePart(p string) error {
	if p == "" {
		return identError("empty part")
	}
	if len(p) > MaxIdentLen {
		return identError(fmt.Sprintf("part longer than %d bytes", MaxIdentLen))
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return identError(fmt.Sprintf("byte %q at %d is not allowed (want [A-Za-z_][A-Za-z0-9_]*)", c, i))
		}
	}
	return nil
}

// Package ident validates the table and column names of the library's
// configurations, before any engine quotes them. It is not for users.
package ident

import (
	"errors"
	"fmt"
	"strings"
)

// MaxLen is the longest identifier part accepted (MySQL's limit is 64,
// PostgreSQL's 63; the smaller one wins so a name works everywhere).
const MaxLen = 63

// Check checks a table name: one or two dot-separated parts (schema.table),
// each matching ^[A-Za-z_][A-Za-z0-9_]*$ and at most [MaxLen] bytes.
// Anything else, including quotes, backticks, semicolons, spaces, comments
// and non-ASCII look-alikes, is an error saying why (callers wrap it with
// the field's name and their configuration error).
func Check(name string) error {
	if name == "" {
		return errors.New("identifier is empty")
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return fmt.Errorf("%q has more than two dot-separated parts", name)
	}
	for _, p := range parts {
		if err := checkPart(p); err != nil {
			return fmt.Errorf("%q: %w", name, err)
		}
	}
	return nil
}

// CheckColumn is [Check] for a single-part name (a column).
func CheckColumn(name string) error {
	if err := Check(name); err != nil {
		return err
	}
	if strings.Contains(name, ".") {
		return fmt.Errorf("column %q must not be qualified", name)
	}
	return nil
}

func checkPart(p string) error {
	if p == "" {
		return errors.New("empty part")
	}
	if len(p) > MaxLen {
		return fmt.Errorf("part longer than %d bytes", MaxLen)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return fmt.Errorf("byte %q at %d is not allowed (want [A-Za-z_][A-Za-z0-9_]*)", c, i)
		}
	}
	return nil
}

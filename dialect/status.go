package dialect

import (
	"fmt"
	"strconv"
)

// Status is a validated status value: a short string or an integer. Status
// values are rendered as SQL literals (so a partial index on the pending
// value can be used by a generic plan), which is why strings are limited to
// the alphabet [A-Za-z0-9_.:-] and 64 bytes.
//
// Build one with [StatusString] or [StatusInt]. The zero value is
// "not set" (a [ClaimTable] default applies, see [ClaimTable.WithDefaults]).
type Status struct {
	str   string
	num   int64
	isNum bool
	set   bool
	// bad says why [StatusString] refused its value. Such a status holds
	// no value (its literal can never reach SQL); [ClaimTable.Validate]
	// reports it.
	bad string
}

// statusStringProblem says why x cannot be a status string, or returns "".
func statusStringProblem(x string) string {
	if x == "" || len(x) > 64 {
		return "status string must be 1 to 64 bytes"
	}
	for i := 0; i < len(x); i++ {
		c := x[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return fmt.Sprintf("status %q has byte %q outside [A-Za-z0-9_.:-]", x, c)
		}
	}
	return ""
}

// check returns an error wrapping [ErrInvalidConfig] and naming field when s
// is not set or was refused by [StatusString].
func (s Status) Check(field string) error {
	switch {
	case s.bad != "":
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, s.bad)
	case !s.set:
		return fmt.Errorf("%w: %s: status value is not set", ErrInvalidConfig, field)
	}
	return nil
}

// IsSet reports whether s holds a value.
func (s Status) IsSet() bool { return s.set }

// IsNumeric reports whether s is an integer status.
func (s Status) IsNumeric() bool { return s.isNum }

// Literal renders s as a SQL literal: '...' for strings (the alphabet needs
// no escaping), decimal for integers.
func (s Status) Literal() string {
	if s.isNum {
		return strconv.FormatInt(s.num, 10)
	}
	return "'" + s.str + "'"
}

// String returns the value as text.
func (s Status) String() string {
	if s.isNum {
		return strconv.FormatInt(s.num, 10)
	}
	return s.str
}

// Value returns the value as a string or an int64.
func (s Status) Value() any {
	if s.isNum {
		return s.num
	}
	return s.str
}

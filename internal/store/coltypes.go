package store

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/claimlock/claimlock/dialect"
)

// colType is what a store learns about one column from the catalog to check
// the values it writes or compares with it before any statement runs.
type colType struct {
	// kind is integer, text or other (no checks).
	kind columnKind
	// lo and hi bound an integer column's values when ranged is set.
	lo, hi int64
	ranged bool
	// enum lists the members of an ENUM column (enum is set).
	members []string
	enum    bool
	// maxLen is a text column's declared length in characters (0: not
	// bounded, or not enforced).
	maxLen int
	// name is the column, "t.status", and desc the column and its type,
	// "t.status (tinyint(4))", for messages.
	name, desc string
}

// learnType describes column name of table as cols reports it.
func (b *Backend) learnType(table, name string, cols tableColumns) colType {
	c, _ := cols.Get(name)
	t := colType{kind: c.kind(), maxLen: c.MaxLen, name: table + "." + name}
	t.desc = fmt.Sprintf("%s (%s)", t.name, c.ColumnType)
	if members, ok := enumMembers(c.ColumnType); ok {
		t.kind, t.members, t.enum = kindText, members, true
	}
	if t.kind == kindInt {
		t.lo, t.hi, t.ranged = b.intRange(c)
	}
	return t
}

// intRange returns the values an integer column holds. SQLite stores any
// integer in any column of integer affinity, whatever its declared width.
func (b *Backend) intRange(c ColumnInfo) (lo, hi int64, ok bool) {
	if b.drv.WideInts() {
		return math.MinInt64, math.MaxInt64, true
	}
	bits := map[string]uint{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}[c.Type]
	if bits == 0 {
		return 0, 0, false
	}
	if strings.Contains(strings.ToLower(c.ColumnType), "unsigned") {
		if bits == 64 {
			return 0, math.MaxInt64, true // the values claimlock can pass are int64
		}
		return 0, int64(1)<<bits - 1, true
	}
	return -(int64(1) << (bits - 1)), int64(1)<<(bits-1) - 1, true
}

// enumMembers parses an enum type as MySQL's column_type writes it,
// enum('a','b'), a quote inside a member written twice (PostgreSQL's labels
// come in the same form, possibly as E'...' strings with backslashes
// doubled).
func enumMembers(colType string) ([]string, bool) {
	if len(colType) < 6 || !strings.EqualFold(colType[:5], "enum(") || !strings.HasSuffix(colType, ")") {
		return nil, false
	}
	inner := colType[5 : len(colType)-1]
	var out []string
	for len(inner) > 0 {
		escaped := false
		if (inner[0] == 'e' || inner[0] == 'E') && len(inner) > 1 && inner[1] == '\'' {
			escaped, inner = true, inner[1:]
		}
		if inner[0] != '\'' {
			return nil, false
		}
		member, rest, ok := quoted(inner, escaped)
		if !ok {
			return nil, false
		}
		out = append(out, member)
		inner = strings.TrimPrefix(rest, ",")
	}
	return out, true
}

// quoted reads the quoted string s starts with and returns it unquoted,
// with what follows it.
func quoted(s string, escaped bool) (string, string, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'' && i+1 < len(s) && s[i+1] == '\'':
			b.WriteByte('\'')
			i++
		case c == '\'':
			return b.String(), s[i+1:], true
		case c == '\\' && escaped && i+1 < len(s):
			b.WriteByte(s[i+1])
			i++
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

// checkInt refuses n where the column's type cannot hold it.
func (t colType) checkInt(field string, n int64) error {
	if t.ranged && (n < t.lo || n > t.hi) {
		return fmt.Errorf("%w: %s: %d is outside the range of column %s, %d to %d", dialect.ErrInvalidConfig, field, n, t.desc, t.lo, t.hi)
	}
	return nil
}

// checkStatus refuses a status value the column cannot hold as it is: see
// checkWritten.
func (t colType) checkStatus(field string, v dialect.Status) error {
	if !v.IsSet() {
		return nil
	}
	return t.checkWritten(field, "status", v.Value())
}

// checkWritten refuses a value written into the column that it cannot
// hold as it is: a string in an integer column (MySQL would store 'DONE'
// as 0), an integer in a text or enum column (MySQL compares every string
// with it as a number, an enum by its members' positions), an integer out
// of the column's range, a string longer than the column or not among an
// enum's members. what names the value in messages ("status").
func (t colType) checkWritten(field, what string, v any) error {
	if err := t.checkCompared(field, what, v); err != nil {
		return err
	}
	if s, ok := v.(string); ok && t.kind == kindText && !t.enum && t.maxLen > 0 && utf8.RuneCountInString(s) > t.maxLen {
		return fmt.Errorf("%w: %s: %s %q does not fit column %s, which holds %d characters",
			dialect.ErrInvalidConfig, field, what, s, t.name, t.maxLen)
	}
	return nil
}

// checkValue refuses a value compared with the column (a scope value, a
// lease key) that the database would convert lossily or could not encode:
// see checkCompared.
func (t colType) checkValue(field string, v any) error {
	return t.checkCompared(field, "value", v)
}

// checkCompared refuses a value the database would convert lossily, or
// could not encode, for this column: a string or a fraction for an integer
// column ("42abc" claims task 42 on MariaDB; 42.5 becomes 42 through pgx),
// an integer out of the column's range (PostgreSQL's drivers cannot encode
// it for the column's type; MySQL would compare it with nothing), a number
// for a text column, a string that is not a member of an enum column
// (PostgreSQL refuses the statement).
func (t colType) checkCompared(field, what string, v any) error {
	switch t.kind {
	case kindInt:
		k, err := NormalizeKey(dialect.IDInt, v)
		if err != nil {
			return fmt.Errorf("%w: %s: %s %v (%T) for column %s, which holds integers", dialect.ErrInvalidConfig, field, what, v, v, t.desc)
		}
		return t.checkInt(field, k.(int64))
	case kindText:
		s, err := NormalizeKey(dialect.IDText, v)
		if err != nil {
			return fmt.Errorf("%w: %s: %s %v (%T) for column %s, which holds text", dialect.ErrInvalidConfig, field, what, v, v, t.desc)
		}
		if t.enum && !slices.Contains(t.members, s.(string)) {
			return fmt.Errorf("%w: %s: %s %q is not a member of column %s", dialect.ErrInvalidConfig, field, what, s, t.desc)
		}
	}
	return nil
}

// needInt refuses a counter column (attempts, version, fence) that holds
// text: claimlock increments it and compares it as a number.
func (t colType) needInt(field string) error {
	if t.kind == kindText {
		return fmt.Errorf("%w: %s: column %s holds text; claimlock counts in it (use an integer type)", dialect.ErrInvalidConfig, field, t.desc)
	}
	return nil
}

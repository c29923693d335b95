// Package sqlb holds the small string helpers the engine packages share to
// build statements from identifiers they have already quoted. It holds no SQL
// of its own.
package sqlb

import (
	"fmt"
	"strconv"
	"strings"
)

// Placeholders renders n placeholders separated by commas, numbered from
// first when dollar is true ($3,$4,...) and as ? otherwise.
func Placeholders(n, first int, dollar bool) string {
	var b strings.Builder
	b.Grow(n * 4)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if dollar {
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(first + i))
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}

// ScopeWhere renders "a = ? AND b = ?" (or $n placeholders numbered from
// first) for already-quoted column names, with a leading " AND " when
// leadingAnd is set and cols is not empty.
func ScopeWhere(cols []string, first int, dollar, leadingAnd bool) string {
	if len(cols) == 0 {
		return ""
	}
	var b strings.Builder
	for i, c := range cols {
		if i > 0 || leadingAnd {
			b.WriteString(" AND ")
		}
		b.WriteString(c)
		b.WriteString(" = ")
		if dollar {
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(first + i))
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}

// Join joins quoted names with ", ".
func Join(cols []string) string { return strings.Join(cols, ", ") }

// Missing returns the ids of all whose index is not in got (a set of
// indexes into all), in order: used to turn "rows the statement touched"
// into "rows that were lost".
func Missing(n int, got map[int]bool) []int {
	var out []int
	for i := 0; i < n; i++ {
		if !got[i] {
			out = append(out, i)
		}
	}
	return out
}

// Key normalises a scanned key so that it compares equal to the value the
// caller passed: []byte becomes string, other integer types int64.
func Key(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint32:
		return int64(x)
	case int16:
		return int64(x)
	case int8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint8:
		return int64(x)
	}
	return v
}

// IndexOf maps normalised keys to their positions in ids.
func IndexOf(ids []any) map[any]int {
	m := make(map[any]int, len(ids))
	for i, id := range ids {
		m[Key(id)] = i
	}
	return m
}

// ReapCols are the quoted columns and rendered status literals a reap
// writes.
type ReapCols struct {
	Status, Token, Attempts string // quoted column names
	Pending, Failed         string // status literals
}

// ReapSteps runs a reap as its two bounded statements, each built and run
// by run(set, extra) with set the SET list and extra a further WHERE
// conjunct (empty or starting with " AND "). When maxAttempts is positive it
// first parks the stale rows whose attempts reached it (failed status, token
// cleared), then it returns the remaining stale rows to pending. It stops at
// the first error, returning what the steps before it did.
func ReapSteps(c ReapCols, maxAttempts int, run func(set, extra string) (int64, error)) (parked, returned int64, err error) {
	if maxAttempts > 0 {
		parked, err = run(fmt.Sprintf("%s = %s, %s = NULL", c.Status, c.Failed, c.Token),
			fmt.Sprintf(" AND %s >= %d", c.Attempts, maxAttempts))
		if err != nil {
			return parked, 0, err
		}
	}
	returned, err = run(fmt.Sprintf("%s = %s, %s = NULL", c.Status, c.Pending, c.Token), "")
	return parked, returned, err
}

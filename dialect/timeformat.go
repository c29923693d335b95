package dialect

import "fmt"

// TimeFormat says how a time column holds a point in time. claimlock
// writes times into a table's claimed-at, run-at, lock and expiry columns
// and compares them with the database clock, so it must know; it never
// guesses from a column's name, and verification (claimers, lockers and
// reapers run it before their first statement) checks the format against
// the column's type in the catalog, refusing a mismatch before any row
// changes:
//
//   - [TimeNative]: a date-time type that holds a point in time with its
//     time of day: DATETIME or TIMESTAMP on MySQL and MariaDB (TIMESTAMP
//     only where the session time zone is UTC, see dialect/mysql),
//     timestamptz on PostgreSQL; on SQLite integer milliseconds, or text
//     dates with [ClaimTable.TextTimes] / [LeaseTable.TextTimes]. Fewer
//     than six fractional digits are allowed: expiry and staleness tests
//     add the column's resolution.
//   - [UnixSeconds], [UnixMillis]: an integer column holding seconds or
//     milliseconds since the Unix epoch (PHP's time(), JavaScript's
//     Date.now()). Verification checks that the column's integer type
//     reaches far enough: a 32-bit INT of seconds ends in January 2038,
//     which verification warns about, and one that cannot hold today's
//     time (milliseconds in an INT, seconds in a SMALLINT) is refused.
//
// DATE, TIME, YEAR, INTERVAL, text and numeric types other than integers
// are refused whatever the format: none of them holds a point in time that
// claimlock could compare with its clock without losing the time of day,
// the date or the meaning of the other values in the column.
type TimeFormat int

const (
	// TimeNative is the column's own date-time type (the default).
	TimeNative TimeFormat = iota
	// UnixSeconds is an integer count of seconds since 1970-01-01 UTC.
	// claimlock writes claim and lock times rounded down and expiries and
	// run-at times rounded up, and every comparison allows for the whole
	// second, so a claim or lease is never taken over early; it may be
	// taken over up to a second late.
	UnixSeconds
	// UnixMillis is an integer count of milliseconds since 1970-01-01 UTC.
	UnixMillis
)

// String returns "native", "unix seconds" or "unix milliseconds".
func (f TimeFormat) String() string {
	switch f {
	case TimeNative:
		return "native"
	case UnixSeconds:
		return "unix seconds"
	case UnixMillis:
		return "unix milliseconds"
	}
	return fmt.Sprintf("TimeFormat(%d)", int(f))
}

// IsUnix reports whether f is an integer count since the Unix epoch.
func (f TimeFormat) IsUnix() bool { return f == UnixSeconds || f == UnixMillis }

// validateTimeFormat checks the format given for one time column: a known
// value, a column to apply to, and no text dates beside a Unix format.
func validateTimeFormat(field, column string, f TimeFormat, textTimes bool) error {
	switch {
	case f < TimeNative || f > UnixMillis:
		return fmt.Errorf("%w: %sFormat: unknown time format %d", ErrInvalidConfig, field, int(f))
	case f != TimeNative && column == "":
		return fmt.Errorf("%w: %sFormat: %s is set but %s names no column", ErrInvalidConfig, field, f, field)
	case f != TimeNative && textTimes:
		return fmt.Errorf("%w: %sFormat: %s and TextTimes: a column holds integer unix time or text dates, not both", ErrInvalidConfig, field, f)
	}
	return nil
}

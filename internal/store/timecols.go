package store

import (
	"fmt"
	"math"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// defaultSlack is the margin added to every expiry and staleness comparison
// before a store has read its time columns' precision from the catalog:
// one second, the coarsest precision a user's column commonly has. A column
// that holds whole seconds stores a time up to a second early (MariaDB
// truncates fractional seconds; MySQL and PostgreSQL round them), so an
// expiry computed from it can come up to a second early. Comparisons add the
// column's resolution, erring towards "still held": a lease or claim is
// never taken over before its true expiry, at the price of a takeover up to
// one resolution step late. After VerifySchema the slack is the columns'
// actual resolution (zero for microsecond columns).
const defaultSlack = time.Second

// textSlack is the margin of every expiry test on text dates
// (LeaseTable.TextTimes): the application's own text dates hold whole
// seconds (SQLite's datetime('now') and CURRENT_TIMESTAMP), whatever the
// column's declared type says.
const textSlack = time.Second

// timeCol names a time column the library writes and compares, with the
// format the table description gives it.
type timeCol struct {
	field, name string
	format      dialect.TimeFormat
}

// timeLimits are, by field ("RunAt", "ExpiresAt"), the last time a time
// column holding integer unix time can hold, learnt by verification; a
// field without an entry has no limit that matters.
type timeLimits map[string]time.Time

// checkTimes checks the time columns against the catalog and returns the
// coarsest resolution among them and the limits of those holding unix
// time. Every column must hold a point in time in the format its
// description says: the engine refuses the types it cannot compare safely
// with its clock (DATE, TIME, text, an integer column described as a
// native time, ...), and a unix-time column must be an integer type that
// reaches beyond next year (warned about when it ends within 50 years, as
// a 32-bit INT of seconds does in 2038).
func (b *Backend) checkTimes(table string, cols tableColumns, textTimes bool, tcs ...timeCol) (time.Duration, timeLimits, error) {
	var slack time.Duration
	limits := timeLimits{}
	for _, tc := range tcs {
		if tc.name == "" {
			continue
		}
		c, _ := cols.Get(tc.name)
		fail := func(err error) error {
			return fmt.Errorf("%w: %s: column %s.%s %v", dialect.ErrInvalidConfig, tc.field, table, tc.name, err)
		}
		if !tc.format.IsUnix() && c.kind() == kindInt && !b.drv.IntTimes() {
			return 0, nil, fail(fmt.Errorf("has type %s: if it holds unix time, say so in the table description (%sFormat: dialect.UnixSeconds or dialect.UnixMillis); otherwise use a date-time type",
				c.ColumnType, tc.field))
		}
		warning, err := b.drv.CheckTime(c, tc.format, textTimes)
		if err != nil {
			return 0, nil, fail(err)
		}
		if warning != "" {
			b.logger.Warn("claimlock: "+tc.field+": column "+table+"."+tc.name+" "+warning, "table", table, "column", tc.name)
		}
		if tc.format.IsUnix() {
			limit, err := b.unixLimit(c, tc.format)
			if err != nil {
				return 0, nil, fail(err)
			}
			if !limit.IsZero() {
				limits[tc.field] = limit
				if limit.Before(time.Now().AddDate(50, 0, 0)) {
					b.logger.Warn(fmt.Sprintf("claimlock: %s: column %s.%s (%s) holds %s only until %s; widen it (BIGINT) before then",
						tc.field, table, tc.name, c.ColumnType, tc.format, limit.UTC().Format(time.RFC3339)), "table", table, "column", tc.name)
				}
			}
		}
		slack = max(slack, c.Resolution())
	}
	return slack, limits, nil
}

// unixLimit checks that column c can hold unix time in format f and returns
// the last time it can hold (zero: no limit within int64), refusing a
// column that is not an integer or that cannot hold next year's times.
func (b *Backend) unixLimit(c ColumnInfo, f dialect.TimeFormat) (time.Time, error) {
	if c.kind() != kindInt && !(b.drv.WideInts() && c.Type == "") {
		return time.Time{}, fmt.Errorf("has type %s; %s needs an integer column (BIGINT)", c.ColumnType, f)
	}
	_, hi, ok := b.intRange(c)
	if !ok || hi == math.MaxInt64 {
		return time.Time{}, nil
	}
	limit := time.Unix(hi, 0)
	if f == dialect.UnixMillis {
		limit = time.UnixMilli(hi)
	}
	if limit.Before(time.Now().AddDate(1, 0, 0)) {
		return time.Time{}, fmt.Errorf("has type %s, which holds %s only until %s; use BIGINT", c.ColumnType, f, limit.UTC().Format(time.RFC3339))
	}
	return limit, nil
}

// fits refuses a time now + d that the unix-time column of field cannot
// hold (a retry delay or lease TTL reaching past 2038 in an INT of
// seconds), before any statement runs; limits may be nil (not verified, or
// no limit).
func (l timeLimits) fits(field, what string, d time.Duration) error {
	limit, ok := l[field]
	if !ok || d <= 0 {
		return nil
	}
	if at := time.Now().Add(d); at.After(limit) {
		return fmt.Errorf("%w: %s %v would write %s into %s, whose column holds times only until %s",
			dialect.ErrInvalidConfig, what, d, at.UTC().Format(time.RFC3339), field, limit.UTC().Format(time.RFC3339))
	}
	return nil
}

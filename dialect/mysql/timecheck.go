package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// readUTCSession reports whether the pool's sessions run in a time zone
// that is UTC all year: local times of 2026-01-01 and 2026-07-01 00:00 UTC
// are those same times. A zone with daylight saving time at offset zero in
// winter (Europe/London) fails the July test.
func readUTCSession(ctx context.Context, db *sql.DB) (bool, string, error) {
	var utc bool
	var zone string
	err := db.QueryRowContext(ctx, `SELECT FROM_UNIXTIME(1767225600) = '2026-01-01 00:00:00' AND FROM_UNIXTIME(1782864000) = '2026-07-01 00:00:00',
  IF(@@session.time_zone = 'SYSTEM', CONCAT('SYSTEM (', @@system_time_zone, ')'), @@session.time_zone)`).Scan(&utc, &zone)
	return utc, zone, err
}

// checkTime accepts the column types that hold a point in time natively,
// as MySQL's and MariaDB's catalogs name them (data_type): DATETIME, and
// TIMESTAMP where the sessions' time zone is UTC. Every other type is
// refused with what to use instead. (The store checks unix-time columns,
// which must be integers, and refuses integer columns described as native
// times.)
//
// A TIMESTAMP column converts what is written into it from the session's
// time zone to UTC and back when read, while claimlock writes and compares
// UTC_TIMESTAMP(6): in a session of another zone the stored instant is off
// by the zone's offset (wrong for every other reader), and sessions of
// different zones disagree about every age, so that one could reap another's
// live rows. Such a TIMESTAMP column is refused; DATETIME(6) holds the same
// values without the conversion. Accepted TIMESTAMP columns end in January
// 2038, which is warned about.
func (d *Dialect) checkTime(c store.ColumnInfo, f dialect.TimeFormat, _ bool) (string, error) {
	if f.IsUnix() {
		return "", nil // an integer type: the store checked it and its range
	}
	switch {
	case c.Type == "datetime":
		return "", nil
	case c.Type == "timestamp" && d.utcSession:
		return "has type TIMESTAMP, which holds times only until 2038-01-19 03:14:07 UTC; change it to DATETIME(6) before then", nil
	case c.Type == "timestamp":
		return "", fmt.Errorf("has type TIMESTAMP, which MySQL converts through the session time zone, here %s, while claimlock writes and compares UTC: "+
			"run the sessions in UTC (time_zone='+00:00' in the DSN) or change the column to DATETIME(6)", d.timeZone)
	case c.Type == "date":
		return "", errors.New("has type DATE, which holds no time of day: every claim or lease would look up to a day old (use DATETIME(6))")
	case c.Type == "time":
		return "", errors.New("has type TIME, a time of day without a date (use DATETIME(6))")
	case c.Type == "year":
		return "", errors.New("has type YEAR (use DATETIME(6))")
	case c.IsText():
		return "", fmt.Errorf("has type %s: claimlock would overwrite its text with dates (use DATETIME(6))", c.ColumnType)
	}
	return "", fmt.Errorf("has type %s, which does not hold a point in time (use DATETIME(6))", c.ColumnType)
}

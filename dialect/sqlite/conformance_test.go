package sqlite_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

func TestConformance(t *testing.T) {
	dialecttest.Run(t, dialecttest.Harness{
		Name:      "sqlite",
		TimeTypes: timeTypes,
		Open: func(t *testing.T) (dialect.Dialect, *sql.DB) {
			db := dbtest.SQLite(t)
			d, err := sqlite.New(context.Background(), db, dialect.Options{})
			require.NoError(t, err)
			return d, db
		},
	})
}

// timeTypes are the time column types users' SQLite tables have: integer
// milliseconds (SQLite's own convention) and integer unix time are
// supported, text and date declarations refused without TextTimes
// (dialecttest.TimeType; TestTextTimes* cover those).
var timeTypes = []dialecttest.TimeType{
	{DDL: "INTEGER"}, {DDL: "INTEGER", Format: dialect.UnixSeconds}, {DDL: "INTEGER", Format: dialect.UnixMillis},
	{DDL: "BIGINT", Format: dialect.UnixSeconds},
	{DDL: "TEXT", Refused: true}, {DDL: "DATETIME", Refused: true}, {DDL: "DATE", Refused: true},
	{DDL: "VARCHAR(64)", Format: dialect.UnixSeconds, Refused: true}, {DDL: "REAL", Format: dialect.UnixSeconds, Refused: true},
	{DDL: "TEXT", Format: dialect.UnixMillis, Refused: true},
}

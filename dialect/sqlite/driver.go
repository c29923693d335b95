package sqlite

import (
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/store/render"
)

// storeDriver is what SQLite supplies to the store ([store.Driver]).
type storeDriver struct {
	db      store.DB
	version string
}

var _ store.Driver = storeDriver{}

func (storeDriver) Name() string          { return "sqlite" }
func (d storeDriver) DB() store.DB        { return d.db }
func (storeDriver) Quote(p string) string { return quote(p) }

// Capabilities: one writer at a time, so no SKIP LOCKED; RETURNING.
func (d storeDriver) Capabilities() dialect.Capabilities {
	return dialect.Capabilities{
		Engine: dialect.EngineSQLite, Version: d.version,
		SkipLocked: false, Returning: true,
		PreferredStrategy: dialect.StrategyTokenUpdate,
		ClaimConcurrency:  claimConcurrency,
		PipelineAckClaim:  pipelineAckClaim,
	}
}

// Style: ? placeholders, key lists as IN (...), times in milliseconds.
func (storeDriver) Style() render.Style { return render.Style{TimeUnit: render.Milliseconds} }

func (storeDriver) Classify(err error) errclass.Class { return classify(err) }
func (storeDriver) ClaimSQL() store.ClaimSQL          { return claimSQL }
func (storeDriver) LeaseSQL() store.LeaseSQL          { return leaseSQL }
func (storeDriver) ScheduleSQL() store.ScheduleSQL    { return scheduleSQL }

func (storeDriver) DDL() store.DDL {
	return store.DDL{Int: "INTEGER", Time: "INTEGER", TimeSeconds: "INTEGER", Text: "TEXT", Serial: "INTEGER PRIMARY KEY AUTOINCREMENT", SerialIsKey: true}
}

func (storeDriver) CheckTime(c store.ColumnInfo, f dialect.TimeFormat, textTimes bool) (string, error) {
	return checkTime(c, f, textTimes)
}

// FoldsCase: SQLite's column names are case-insensitive.
func (storeDriver) FoldsCase() bool { return true }

// IsolatesWrites: every statement is its own write transaction already.
func (storeDriver) IsolatesWrites() bool { return false }

// IntTimes: SQLite's own times are integer milliseconds.
func (storeDriver) IntTimes() bool { return true }

// SupportsTextTimes: SQLite's text dates (TextTimes).
func (storeDriver) SupportsTextTimes() bool { return true }

// WideInts: any integer column holds any 64-bit value.
func (storeDriver) WideInts() bool { return true }

// HintsKeys: SQLite's planner finds the primary key by itself.
func (storeDriver) HintsKeys() bool { return false }

package mysql

import (
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/store/render"
)

// storeDriver is what a MySQL-family server supplies to the store
// ([store.Driver]), with its own claim ([store.ClaimOverride], claim.go):
// without RETURNING a claim marks rows, then reads them back by token.
type storeDriver struct {
	d   *Dialect // its session settings, read by New after build
	db  store.DB
	raw string // the version as the server reports it
}

var (
	_ store.Driver        = (*storeDriver)(nil)
	_ store.ClaimOverride = (*storeDriver)(nil)
)

func (s *storeDriver) Name() string                      { return "mysql" }
func (s *storeDriver) DB() store.DB                      { return s.db }
func (s *storeDriver) Quote(p string) string             { return quote(p) }
func (s *storeDriver) Classify(err error) errclass.Class { return classify(err) }

func (s *storeDriver) Capabilities() dialect.Capabilities {
	v := s.d.version
	return dialect.Capabilities{
		Engine: v.Engine, Version: s.raw,
		SkipLocked: v.SkipLocked(), Returning: false,
		PreferredStrategy: preferredStrategy(v),
		ClaimConcurrency:  claimConcurrency,
		PipelineAckClaim:  pipelineAckClaim,
	}
}

// Style: ? placeholders, key lists as IN (...), times in microseconds.
func (s *storeDriver) Style() render.Style { return render.Style{TimeUnit: render.Microseconds} }

func (s *storeDriver) ClaimSQL() store.ClaimSQL       { return claimSQL }
func (s *storeDriver) LeaseSQL() store.LeaseSQL       { return leaseSQL }
func (s *storeDriver) ScheduleSQL() store.ScheduleSQL { return scheduleSQL }

// DDL: text columns use a binary utf8mb4 collation, so keys and tokens
// compare exactly as on the other engines.
func (s *storeDriver) DDL() store.DDL {
	return store.DDL{
		Int: "BIGINT", Time: "DATETIME(6)", TimeSeconds: "DATETIME", Text: "VARCHAR(%d) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
		Serial: "BIGINT NOT NULL AUTO_INCREMENT", InlineIndexes: true, Suffix: " ENGINE=InnoDB",
	}
}

// CheckTime depends on the sessions' time zone (timecheck.go).
func (s *storeDriver) CheckTime(c store.ColumnInfo, f dialect.TimeFormat, textTimes bool) (string, error) {
	return s.d.checkTime(c, f, textTimes)
}

// FoldsCase: MySQL's column names are case-insensitive.
func (s *storeDriver) FoldsCase() bool { return true }

// IsolatesWrites: sessions that are not READ COMMITTED get it per
// transaction.
func (s *storeDriver) IsolatesWrites() bool { return !s.d.rcSession }

func (s *storeDriver) IntTimes() bool          { return false }
func (s *storeDriver) SupportsTextTimes() bool { return false }
func (s *storeDriver) WideInts() bool          { return false }

// HintsKeys: see sql.go's Ack.
func (s *storeDriver) HintsKeys() bool { return true }

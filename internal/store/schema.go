package store

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store/render"
)

// catalogColumns reads a table's columns with the engine's catalog query.
func (b *Backend) catalogColumns(ctx context.Context, st render.Stmt, name string) (tableColumns, error) {
	schema, table := SplitName(name)
	a := &render.Args{Table: table}
	if schema != "" {
		a.Schema = schema
	}
	cols := tableColumns{Fold: b.drv.FoldsCase()}
	err := b.Do(ctx, "verify schema", true, func() error {
		cols.ByName = map[string]ColumnInfo{}
		return b.query(ctx, b.db, st, a, func(r Rows) error {
			var n, typ, coll, full string
			var l, p int64
			var nullable, key bool
			if err := r.Scan(&n, &l, &typ, &p, &coll, &nullable, &full, &key); err != nil {
				return err
			}
			if b.drv.FoldsCase() {
				n = strings.ToLower(n)
			}
			if full == "" {
				full = typ
			}
			cols.ByName[n] = ColumnInfo{MaxLen: int(l), Type: strings.ToLower(typ), Precision: int(p), Collation: strings.ToLower(coll),
				Nullable: nullable, ColumnType: full, PrimaryKey: key}
			return nil
		})
	})
	return cols, err
}

// VerifySchema implements [ClaimStore]. It also learns the
// precision of the claimed-at column: see defaultSlack.
func (s *Claims) VerifySchema(ctx context.Context) error {
	cols, err := s.b.catalogColumns(ctx, s.st(claimKey{t: tColumns}), s.spec.Table)
	if err != nil {
		return wrap("verify schema", err)
	}
	if err := s.b.checkClaimColumns(s.spec, cols); err != nil {
		return err
	}
	slack, limits, err := s.b.checkTimes(s.spec.Table, cols, s.spec.TextTimes,
		timeCol{"ClaimedAt", s.spec.ClaimedAt, s.spec.ClaimedAtFormat}, timeCol{"CreatedAt", s.spec.CreatedAt, s.spec.CreatedAtFormat})
	if err != nil {
		return err
	}
	// RunAt's resolution is not added to the reap timeout: a run-at time
	// only delays a claim; it is added to delays instead.
	runAtSlack, runAt, err := s.b.checkTimes(s.spec.Table, cols, s.spec.TextTimes, timeCol{"RunAt", s.spec.RunAt, s.spec.RunAtFormat})
	if err != nil {
		return err
	}
	maps.Copy(limits, runAt)
	s.slack.Store(int64(slack))
	s.runAtSlack.Store(int64(runAtSlack))
	s.limits.Store(&limits)
	s.learnErrorWidth(cols)
	types := &claimTypes{scope: make([]colType, len(s.spec.Scope))}
	for i, c := range s.spec.Scope {
		types.scope[i] = s.b.learnType(s.spec.Table, c, cols)
	}
	if s.spec.Attempts != "" {
		types.attempts = s.b.learnType(s.spec.Table, s.spec.Attempts, cols)
	}
	s.types.Store(types)
	id, _ := cols.Get(s.spec.ID)
	s.keyHint.Store(s.b.drv.HintsKeys() && id.PrimaryKey)
	return s.verifyArchive(ctx, cols)
}

// verifyArchive checks that the archive table, if any, exists and has the
// claim table's columns, by name (the catalog queries do not say their
// order, which the archive's INSERT ... SELECT * relies on as well).
func (s *Claims) verifyArchive(ctx context.Context, cols tableColumns) error {
	if s.spec.Archive == "" {
		return nil
	}
	arch, err := s.b.catalogColumns(ctx, s.st(claimKey{t: tColumns}), s.spec.Archive)
	if err != nil {
		return wrap("verify schema", err)
	}
	if len(arch.ByName) == 0 {
		return fmt.Errorf("%w: Archive: table %s not found (or it has no columns)", dialect.ErrInvalidConfig, s.spec.Archive)
	}
	for name := range cols.ByName {
		if _, ok := arch.Get(name); !ok {
			return fmt.Errorf("%w: Archive: table %s has no column %q of %s", dialect.ErrInvalidConfig, s.spec.Archive, name, s.spec.Table)
		}
	}
	if len(arch.ByName) != len(cols.ByName) {
		return fmt.Errorf("%w: Archive: table %s has %d columns, %s has %d: they must be the same, in the same order",
			dialect.ErrInvalidConfig, s.spec.Archive, len(arch.ByName), s.spec.Table, len(cols.ByName))
	}
	return nil
}

// learnErrorWidth records the Error column's width in characters.
func (s *Claims) learnErrorWidth(cols tableColumns) {
	if s.spec.Error == "" {
		return
	}
	w := int64(-1)
	if c, ok := cols.Get(s.spec.Error); ok && c.MaxLen > 0 {
		w = int64(c.MaxLen)
	}
	s.errorWidth.Store(w)
}

// ensureErrorWidth learns the Error column's width from the catalog if
// VerifySchema has not, so that an error text is never longer than the
// column (a strict MySQL would refuse the whole ack).
func (s *Claims) ensureErrorWidth(ctx context.Context) error {
	if s.spec.Error == "" || s.errorWidth.Load() != 0 {
		return nil
	}
	cols, err := s.b.catalogColumns(ctx, s.st(claimKey{t: tColumns}), s.spec.Table)
	if err != nil {
		return err
	}
	s.learnErrorWidth(cols)
	return nil
}

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

// IndexDDL implements [ClaimStore].
func (s *Claims) IndexDDL() []string { return s.IndexDDLWith(IndexOptions{}) }

// IndexDDLWith implements [IndexDDLer].
func (s *Claims) IndexDDLWith(opts IndexOptions) []string {
	var out []string
	for _, k := range indexKinds {
		if ix := s.st(claimKey{t: tIndex, index: k, v: ClaimVariant{Online: opts.Online}}); ix.SQL != "" {
			out = append(out, ix.SQL)
		}
	}
	return out
}

// MissingIndexes implements [ClaimStore].
func (s *Claims) MissingIndexes(ctx context.Context) ([]string, error) {
	return s.MissingIndexesWith(ctx, IndexOptions{})
}

// MissingIndexesWith implements [IndexDDLer]: it looks the
// recommended indexes up by name in the table's schema. An index that
// exists but that queries cannot use (PostgreSQL's INVALID index, left by
// a CREATE INDEX CONCURRENTLY that failed) is missing too: its DDL is the
// engine's DROP INDEX, then the CREATE INDEX.
func (s *Claims) MissingIndexesWith(ctx context.Context, opts IndexOptions) ([]string, error) {
	schema, table := SplitName(s.spec.Table)
	var out []string
	v := ClaimVariant{Online: opts.Online}
	for _, k := range indexKinds {
		create := s.st(claimKey{t: tIndex, index: k, v: v})
		if create.SQL == "" {
			continue // an index the engine does not use, or the table does not need
		}
		a := &render.Args{Table: table, Index: IndexName(s.spec.Table, k.suffix())}
		if schema != "" {
			a.Schema = schema
		}
		var usable, present int64
		err := s.b.Do(ctx, "missing indexes", true, func() error {
			_, err := s.b.queryRow(ctx, s.b.db, s.st(claimKey{t: tIndexExists}), a, &usable, &present)
			return err
		})
		if err != nil {
			return nil, wrap("missing indexes", err)
		}
		if usable > 0 {
			continue
		}
		if drop := s.st(claimKey{t: tDropIndex, index: k, v: v}).SQL; present > 0 && drop != "" {
			out = append(out, drop)
		}
		out = append(out, create.SQL)
	}
	return out, nil
}

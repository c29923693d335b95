package store

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
)

// DDL is how an engine renders a portable [TableDef].
type DDL struct {
	// Types are the column types by portable type; the text type may be a
	// format taking the length ("VARCHAR(%d)").
	Int, Time, TimeSeconds, Text string
	// Serial is the whole type of an auto-incrementing key column.
	Serial string
	// SerialIsKey is true when Serial declares the primary key itself
	// (SQLite's INTEGER PRIMARY KEY AUTOINCREMENT).
	SerialIsKey bool
	// InlineIndexes declares secondary indexes inside CREATE TABLE (MySQL);
	// otherwise each is a CREATE INDEX IF NOT EXISTS of its own.
	InlineIndexes bool
	// Suffix follows the closing parenthesis (" ENGINE=InnoDB").
	Suffix string
}

// CreateTableDDL renders def in the engine's syntax.
func (e *Engine) CreateTableDDL(def TableDef) ([]string, error) {
	if err := def.Validate(); err != nil {
		return nil, err
	}
	var b strings.Builder
	table := e.QuoteName(def.Table)
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (", table)
	pk := def.PrimaryKey
	for i, c := range def.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Quote(c.Name) + " ")
		switch c.Type {
		case TypeSerial:
			b.WriteString(e.DDL.Serial)
			if e.DDL.SerialIsKey {
				pk = nil
			} else if len(pk) == 0 {
				pk = []string{c.Name}
			}
			continue
		default:
			typ, err := e.columnType(c)
			if err != nil {
				return nil, err
			}
			b.WriteString(typ)
		}
		if c.NotNull {
			b.WriteString(" NOT NULL")
		}
		if c.Default != nil {
			b.WriteString(" DEFAULT " + c.Default.Literal())
		}
	}
	if len(pk) > 0 {
		fmt.Fprintf(&b, ", PRIMARY KEY (%s)", e.quoteAll(pk))
	}
	var out []string
	for _, ix := range def.Indexes {
		u := ""
		if ix.Unique {
			u = "UNIQUE "
		}
		if e.DDL.InlineIndexes {
			fmt.Fprintf(&b, ", %sINDEX %s (%s)", u, e.Quote(ix.Name), e.quoteAll(ix.Columns))
			continue
		}
		out = append(out, fmt.Sprintf("CREATE %sINDEX IF NOT EXISTS %s ON %s (%s)", u, e.Quote(ix.Name), table, e.quoteAll(ix.Columns)))
	}
	b.WriteString(")" + e.DDL.Suffix)
	return append([]string{b.String()}, out...), nil
}

func (e *Engine) quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = e.Quote(n)
	}
	return strings.Join(q, ", ")
}

// ExecDDL runs statements produced by the DDL methods, in order. A CREATE
// INDEX whose index exists already is skipped, so running IndexDDL twice is
// harmless on engines without CREATE INDEX IF NOT EXISTS.
func (e *Engine) ExecDDL(ctx context.Context, stmts []string) error {
	for _, s := range stmts {
		if _, err := e.DB.Exec(ctx, s); err != nil {
			err = e.interpret(err)
			if strings.HasPrefix(s, "CREATE INDEX") && ClassOf(err) == errclass.Duplicate {
				continue
			}
			return fmt.Errorf("ddl %q: %w", s, err)
		}
	}
	return nil
}

// catalogColumns reads a table's columns with the engine's catalog query.
func (e *Engine) catalogColumns(ctx context.Context, st Stmt, name string) (Columns, error) {
	schema, table := SplitName(name)
	a := &Args{Table: table}
	if schema != "" {
		a.Schema = schema
	}
	cols := Columns{Fold: e.FoldCase}
	err := e.Do(ctx, "verify schema", true, func() error {
		cols.ByName = map[string]ColumnInfo{}
		return Query(ctx, e.DB, e.Dialect, st, a, func(r Rows) error {
			var n, typ, coll, full string
			var l, p int64
			var nullable, key bool
			if err := r.Scan(&n, &l, &typ, &p, &coll, &nullable, &full, &key); err != nil {
				return err
			}
			if e.FoldCase {
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
// precision of the claimed-at column: see [Slack].
func (s *Claims) VerifySchema(ctx context.Context) error {
	cols, err := s.E.catalogColumns(ctx, s.columns, s.Spec.Table)
	if err != nil {
		return err
	}
	if err := s.E.checkClaimColumns(s.Spec, cols); err != nil {
		return err
	}
	slack, limits, err := s.E.checkTimes(s.Spec.Table, cols, s.Spec.TextTimes,
		timeCol{"ClaimedAt", s.Spec.ClaimedAt, s.Spec.ClaimedAtFormat}, timeCol{"CreatedAt", s.Spec.CreatedAt, s.Spec.CreatedAtFormat})
	if err != nil {
		return err
	}
	// RunAt's resolution is not added to the reap timeout: a run-at time
	// only delays a claim; it is added to delays instead.
	runAtSlack, runAt, err := s.E.checkTimes(s.Spec.Table, cols, s.Spec.TextTimes, timeCol{"RunAt", s.Spec.RunAt, s.Spec.RunAtFormat})
	if err != nil {
		return err
	}
	maps.Copy(limits, runAt)
	s.slack.Store(int64(slack))
	s.runAtSlack.Store(int64(runAtSlack))
	s.limits.Store(&limits)
	s.learnErrorWidth(cols)
	types := &claimTypes{scope: make([]colType, len(s.Spec.Scope))}
	for i, c := range s.Spec.Scope {
		types.scope[i] = s.E.learnType(s.Spec.Table, c, cols)
	}
	if s.Spec.Attempts != "" {
		types.attempts = s.E.learnType(s.Spec.Table, s.Spec.Attempts, cols)
	}
	s.types.Store(types)
	id, _ := cols.Get(s.Spec.ID)
	s.keyHint.Store(s.E.KeyHint && id.PrimaryKey)
	return s.verifyArchive(ctx, cols)
}

// verifyArchive checks that the archive table, if any, exists and has the
// claim table's columns, by name (the catalog queries do not say their
// order, which the archive's INSERT ... SELECT * relies on as well).
func (s *Claims) verifyArchive(ctx context.Context, cols Columns) error {
	if s.Spec.Archive == "" {
		return nil
	}
	arch, err := s.E.catalogColumns(ctx, s.columns, s.Spec.Archive)
	if err != nil {
		return err
	}
	if len(arch.ByName) == 0 {
		return fmt.Errorf("%w: Archive: table %s not found (or it has no columns)", dialect.ErrInvalidConfig, s.Spec.Archive)
	}
	for name := range cols.ByName {
		if _, ok := arch.Get(name); !ok {
			return fmt.Errorf("%w: Archive: table %s has no column %q of %s", dialect.ErrInvalidConfig, s.Spec.Archive, name, s.Spec.Table)
		}
	}
	if len(arch.ByName) != len(cols.ByName) {
		return fmt.Errorf("%w: Archive: table %s has %d columns, %s has %d: they must be the same, in the same order",
			dialect.ErrInvalidConfig, s.Spec.Archive, len(arch.ByName), s.Spec.Table, len(cols.ByName))
	}
	return nil
}

// learnErrorWidth records the Error column's width in characters.
func (s *Claims) learnErrorWidth(cols Columns) {
	if s.Spec.Error == "" {
		return
	}
	w := int64(-1)
	if c, ok := cols.Get(s.Spec.Error); ok && c.MaxLen > 0 {
		w = int64(c.MaxLen)
	}
	s.errorWidth.Store(w)
}

// ensureErrorWidth learns the Error column's width from the catalog if
// VerifySchema has not, so that an error text is never longer than the
// column (a strict MySQL would refuse the whole ack).
func (s *Claims) ensureErrorWidth(ctx context.Context) error {
	if s.Spec.Error == "" || s.errorWidth.Load() != 0 {
		return nil
	}
	cols, err := s.E.catalogColumns(ctx, s.columns, s.Spec.Table)
	if err != nil {
		return err
	}
	s.learnErrorWidth(cols)
	return nil
}

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
func (e *Engine) checkTimes(table string, cols Columns, textTimes bool, tcs ...timeCol) (time.Duration, timeLimits, error) {
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
		if !tc.format.IsUnix() && c.kind() == kindInt && !e.IntTimes {
			return 0, nil, fail(fmt.Errorf("has type %s: if it holds unix time, say so in the table description (%sFormat: dialect.UnixSeconds or dialect.UnixMillis); otherwise use a date-time type",
				c.ColumnType, tc.field))
		}
		if e.CheckTime != nil {
			warning, err := e.CheckTime(c, tc.format, textTimes)
			if err != nil {
				return 0, nil, fail(err)
			}
			if warning != "" {
				e.Logger.Warn("claimlock: "+tc.field+": column "+table+"."+tc.name+" "+warning, "table", table, "column", tc.name)
			}
		}
		if tc.format.IsUnix() {
			limit, err := e.unixLimit(c, tc.format)
			if err != nil {
				return 0, nil, fail(err)
			}
			if !limit.IsZero() {
				limits[tc.field] = limit
				if limit.Before(time.Now().AddDate(50, 0, 0)) {
					e.Logger.Warn(fmt.Sprintf("claimlock: %s: column %s.%s (%s) holds %s only until %s; widen it (BIGINT) before then",
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
func (e *Engine) unixLimit(c ColumnInfo, f dialect.TimeFormat) (time.Time, error) {
	if c.kind() != kindInt && !(e.WideInts && c.Type == "") {
		return time.Time{}, fmt.Errorf("has type %s; %s needs an integer column (BIGINT)", c.ColumnType, f)
	}
	_, hi, ok := e.intRange(c)
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
	for _, ix := range s.indexes[online(opts)] {
		if ix.SQL != "" {
			out = append(out, ix.SQL)
		}
	}
	return out
}

func online(opts IndexOptions) int {
	if opts.Online {
		return 1
	}
	return 0
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
	schema, table := SplitName(s.Spec.Table)
	var out []string
	on := online(opts)
	for i, ix := range Indexes(s.Spec) {
		if s.indexes[on][i].SQL == "" {
			continue // an index the engine does not use
		}
		a := &Args{Table: table, Index: ix.Name}
		if schema != "" {
			a.Schema = schema
		}
		var usable, present int64
		err := s.E.Do(ctx, "missing indexes", true, func() error {
			_, err := QueryRow(ctx, s.E.DB, s.E.Dialect, s.indexExists, a, &usable, &present)
			return err
		})
		if err != nil {
			return nil, err
		}
		if usable > 0 {
			continue
		}
		if drop := s.dropIndexes[on][i].SQL; present > 0 && drop != "" {
			out = append(out, drop)
		}
		out = append(out, s.indexes[on][i].SQL)
	}
	return out, nil
}

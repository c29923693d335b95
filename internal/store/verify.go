package store

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"

	"github.com/claimlock/claimlock/dialect"
)

// This file verifies a store's table against the catalog before its first
// statement: the columns exist and hold what the library writes, and the
// store learns what it checks later calls against (time columns'
// resolution and limits, the types of scope, attempts, key and status
// columns, the Error column's width, whether the key is the primary key).

// VerifySchema implements [ClaimStore]. It also learns the
// precision of the claimed-at column: see defaultSlack.
func (s *Claims) VerifySchema(ctx context.Context) error {
	cols, err := s.b.catalogColumns(ctx, s.st(claimKey{t: tColumns}), s.spec.Table)
	if err != nil {
		return err
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
	s.learnWidths(cols)
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
		return err
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

// learnWidths records the Error and Worker columns' widths in characters
// (-1: unbounded).
func (s *Claims) learnWidths(cols tableColumns) {
	for _, c := range []struct {
		name string
		w    *atomic.Int64
	}{{s.spec.Error, &s.errorWidth}, {s.spec.Worker, &s.workerWidth}} {
		if c.name == "" {
			continue
		}
		w := int64(-1)
		if col, ok := cols.Get(c.name); ok && col.MaxLen > 0 {
			w = int64(col.MaxLen)
		}
		c.w.Store(w)
	}
}

// ensureWidths learns the Error and Worker columns' widths from the
// catalog if VerifySchema has not, so that a text written there is never
// longer than the column (a strict MySQL would refuse the whole
// statement).
func (s *Claims) ensureWidths(ctx context.Context) error {
	if (s.spec.Error == "" || s.errorWidth.Load() != 0) && (s.spec.Worker == "" || s.workerWidth.Load() != 0) {
		return nil
	}
	cols, err := s.b.catalogColumns(ctx, s.st(claimKey{t: tColumns}), s.spec.Table)
	if err != nil {
		return err
	}
	s.learnWidths(cols)
	return nil
}

// VerifySchema implements [LeaseStore].
func (l *Leases) VerifySchema(ctx context.Context) error {
	cols, err := l.b.catalogColumns(ctx, l.st(lColumns), l.spec.Table)
	if err != nil {
		return err
	}
	if err := checkLeaseColumns(l.spec, cols); err != nil {
		return err
	}
	types := &leaseTypes{key: l.b.learnType(l.spec.Table, l.spec.Key, cols)}
	if err := l.checkKeyType(types.key); err != nil {
		return err
	}
	if l.spec.Fence != "" {
		if err := l.b.learnType(l.spec.Table, l.spec.Fence, cols).needInt("Fence"); err != nil {
			return err
		}
	}
	if l.spec.Status != "" {
		types.status = l.b.learnType(l.spec.Table, l.spec.Status, cols)
	}
	slack, limits, err := l.b.checkTimes(l.spec.Table, cols, l.spec.TextTimes,
		timeCol{"LockedAt", l.spec.LockedAt, l.spec.LockedAtFormat}, timeCol{"ExpiresAt", l.spec.ExpiresAt, l.spec.ExpiresAtFormat})
	if err != nil {
		return err
	}
	l.limits.Store(&limits)
	if l.spec.TextTimes {
		// Text dates written by the application hold whole seconds: see
		// dialect.LeaseTable.TextTimes.
		slack = max(slack, textSlack)
	}
	l.slack.Store(int64(slack))
	l.types.Store(types)
	return nil
}

// checkKeyType refuses a key column whose values are not of the kind the
// table's KeyKind says: MySQL compares a text column with an integer key
// as numbers (every key that is not a number equals 0), and PostgreSQL
// refuses the comparison.
func (l *Leases) checkKeyType(t colType) error {
	switch {
	case l.spec.KeyKind == dialect.IDText && t.kind == kindInt:
		return fmt.Errorf("%w: KeyKind: text keys for column %s, which holds integers", dialect.ErrInvalidConfig, t.desc)
	case l.spec.KeyKind == dialect.IDInt && t.kind == kindText:
		return fmt.Errorf("%w: KeyKind: integer keys for column %s, which holds text (set KeyKind to dialect.IDText)", dialect.ErrInvalidConfig, t.desc)
	}
	return nil
}

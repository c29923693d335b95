package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
)

// LeaseSQL are an engine's lease-table statements as text/template sources
// over [Names] (Table, Key, Owner, LockedAt, ExpiresAt, Fence; optional
// columns ""), with the values {{arg "key"}}, {{arg "owner"}}, {{arg "ttl"}}
// and {{arg "limit"}}. Expiries are read as integer microseconds since the
// Unix epoch on the database clock; without an ExpiresAt column a lease
// expires at LockedAt + ttl. Fences read 0 without a Fence column. Every
// test of whether a lease has expired adds {{arg "slack"}}, the resolution
// of the user's time columns ([Slack]).
//
// Without an Owner column (Names.Owner "") a lease is identified by its
// stamp: the LockedAt value as an integer on the database clock. Statements
// that return a lease return fence, expiry and stamp; the holder presents
// its stamp as {{arg "stamp"}} where others present {{arg "owner"}}.
type LeaseSQL struct {
	// Acquire takes "key" for "owner" when it is free or expired,
	// incrementing the fence. On a Returning engine it returns the fence and
	// expiry.
	Acquire string
	// Insert creates the row of a missing key, held by "owner" (keyed
	// tables); a duplicate key means someone else created it first. On a
	// Returning engine it returns the fence and expiry.
	Insert string
	// ReadBack returns the fence and expiry of "key" while "owner" holds it
	// (engines without RETURNING).
	ReadBack string
	// Renew extends the lease of "key" while "owner" holds it, strictly
	// forward. On a Returning engine it returns the fence and expiry.
	Renew string
	// Release frees "key" if "owner" holds it; Force frees it whoever does.
	Release, Force string
	// Inspect returns owner (the stamp as text without an Owner column),
	// fence, expiry and a boolean "expired" on the database clock for "key".
	Inspect string
	// Finish sets Status to {{arg "status"}} and frees "key" if its holder
	// still holds it.
	Finish string
	// ReleaseHold and FinishHold are Release and Finish under a minimum
	// hold (tables with Owner and ExpiresAt only): while {{arg "hold"}}, a
	// time on the database clock, is ahead of the database's now, the lease
	// stays held by "owner" with its expiry moved to the hold, so the key
	// cannot be acquired before it; otherwise they free the lease as Release
	// and Finish do. They use the engine's {{template "hold" .}}, that SET
	// list.
	ReleaseHold, FinishHold string
	// Reap frees at most "limit" expired leases (needs ExpiresAt).
	Reap string
	// Held returns key, owner (the stamp as text without an Owner
	// column), fence, expiry, microseconds until the expiry (0 once past)
	// and a boolean "expired" of at most "limit" leases whose ExpiresAt is
	// set, soonest first (needs ExpiresAt).
	Held string
	// Columns is the catalog query of [ClaimSQL.Columns].
	Columns string
	// Common is prepended to every template.
	Common string
}

// GenericLeaseSQL are the lease statements that every engine writes the
// same way; an engine's LeaseSQL leaves them empty to use these. They use
// the engine's {{template "held" .}} (the holder's condition: owner or
// stamp) and {{template "free" .}} (the SET list that frees a lease).
var GenericLeaseSQL = LeaseSQL{
	Release: `
UPDATE {{.Table}} SET {{template "free" .}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}`,

	Finish: `
UPDATE {{.Table}} SET {{.TaskStatus}} = {{arg "status"}}, {{template "free" .}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}`,

	Force: `
UPDATE {{.Table}} SET {{template "free" .}}
WHERE {{.Key}} = {{arg "key"}} AND {{or .Owner .LockedAt}} IS NOT NULL`,

	ReleaseHold: `
UPDATE {{.Table}} SET {{template "hold" .}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}`,

	FinishHold: `
UPDATE {{.Table}} SET {{.TaskStatus}} = {{arg "status"}}, {{template "hold" .}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}`,
}

// Leases is the engine-neutral [LeaseStore].
type Leases struct {
	e    *Engine
	spec dialect.LeaseTable
	// rendered are the statements rendered for the store, in order.
	rendered []Rendered

	acquire, insert, readBack, renew, release, force, inspect, reap, finish, columns Stmt
	held                                                                             Stmt
	// releaseHold and finishHold: tables with Owner and ExpiresAt only.
	releaseHold, finishHold Stmt
	// stamped: no Owner column, a lease is identified by its stamp.
	stamped bool
	// slack is added to expiry comparisons: see [Slack].
	slack atomic.Int64
	// limits are the unix-time columns' limits, learnt by VerifySchema.
	limits atomic.Pointer[timeLimits]
	// types are the key and status columns' types, learnt by
	// VerifySchema; nil before.
	types atomic.Pointer[leaseTypes]
}

// leaseTypes are the column types a lease store checks values against.
type leaseTypes struct{ key, status colType }

var _ LeaseStore = (*Leases)(nil)

// NewLeases validates spec and renders the engine's statements for it.
func NewLeases(e *Engine, sqls LeaseSQL, spec dialect.LeaseTable) (*Leases, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.TextTimes && !e.TextTimes {
		return nil, fmt.Errorf("%w: TextTimes: only SQLite keeps times as text; %s has time types", dialect.ErrInvalidConfig, e.Name)
	}
	q := e.quoteOpt
	n := Names{
		Table: e.QuoteName(spec.Table), Key: q(spec.Key), Owner: q(spec.Owner), LockedAt: q(spec.LockedAt),
		ExpiresAt: q(spec.ExpiresAt), Fence: q(spec.Fence), TaskStatus: q(spec.Status), TextKey: spec.KeyKind == dialect.IDText,
		TextTimes: spec.TextTimes, LockedAtPer: e.timePer(spec.LockedAtFormat), ExpiresAtPer: e.timePer(spec.ExpiresAtFormat),
	}
	l := &Leases{e: e, spec: spec, stamped: spec.Owner == ""}
	r := &renderer{e: e, n: n, out: &l.rendered}
	t := func(src string) string {
		if src == "" {
			return ""
		}
		return sqls.Common + src
	}
	for _, g := range []struct {
		dst *string
		src string
	}{
		{&sqls.Release, GenericLeaseSQL.Release}, {&sqls.Finish, GenericLeaseSQL.Finish}, {&sqls.Force, GenericLeaseSQL.Force},
		{&sqls.ReleaseHold, GenericLeaseSQL.ReleaseHold}, {&sqls.FinishHold, GenericLeaseSQL.FinishHold},
	} {
		if *g.dst == "" {
			*g.dst = g.src
		}
	}
	l.acquire = r.stmt("lease acquire", t(sqls.Acquire), nil)
	if spec.Keyed {
		l.insert = r.stmt("lease insert", t(sqls.Insert), nil)
	}
	l.readBack = r.stmt("lease read back", t(sqls.ReadBack), nil)
	l.renew = r.stmt("lease renew", t(sqls.Renew), nil)
	l.release = r.stmt("lease release", t(sqls.Release), nil)
	l.force = r.stmt("lease force release", t(sqls.Force), nil)
	l.inspect = r.stmt("lease inspect", t(sqls.Inspect), nil)
	if spec.Status != "" {
		l.finish = r.stmt("lease finish", t(sqls.Finish), nil)
	}
	if spec.Owner != "" && spec.ExpiresAt != "" {
		l.releaseHold = r.stmt("lease release with hold", t(sqls.ReleaseHold), nil)
		if spec.Status != "" {
			l.finishHold = r.stmt("lease finish with hold", t(sqls.FinishHold), nil)
		}
	}
	if spec.ExpiresAt != "" {
		l.reap = r.stmt("lease reap", t(sqls.Reap), nil)
		l.held = r.stmt("lease held", t(sqls.Held), nil)
	}
	l.columns = r.stmt("columns", t(sqls.Columns), nil)
	if r.err != nil {
		return nil, r.err
	}
	l.slack.Store(int64(Slack))
	return l, nil
}

// args validates a call's key, owner and ttl and returns its arguments. A
// stamped lease's owner is its stamp, a decimal integer; Acquire takes none.
func (l *Leases) args(key any, owner string, ttl time.Duration, needOwner, needTTL bool) (*Args, error) {
	k, err := NormalizeKey(l.spec.KeyKind, key)
	if err == nil {
		err = l.spec.CheckKey(k)
	}
	if types := l.types.Load(); err == nil && types != nil {
		err = types.key.checkValue("key", k)
	}
	a := &Args{Key: k, Owner: owner, TTL: ttl, Slack: time.Duration(l.slack.Load())}
	switch {
	case err != nil:
	case needOwner && owner == "":
		err = fmt.Errorf("%w: empty owner", dialect.ErrInvalidConfig)
	case needOwner && len(owner) > MaxTokenLen:
		err = fmt.Errorf("%w: owner is %d bytes; at most %d", dialect.ErrInvalidConfig, len(owner), MaxTokenLen)
	case needTTL && ttl <= 0:
		err = fmt.Errorf("%w: ttl must be positive, got %v", dialect.ErrInvalidConfig, ttl)
	case needTTL && l.timeLimits().fits("ExpiresAt", "ttl", ttl) != nil:
		err = l.timeLimits().fits("ExpiresAt", "ttl", ttl)
	case l.stamped && needOwner && owner != "":
		if a.Stamp, err = strconv.ParseInt(owner, 10, 64); err != nil {
			err = fmt.Errorf("%w: owner %q is not the stamp of a lease on a table without an owner column", dialect.ErrInvalidConfig, owner)
		}
	}
	return a, err
}

// info scans a fence, an expiry in microseconds and a stamp, and fills in
// the owner a holder presents from now on.
func (l *Leases) info(ctx context.Context, q Querier, st Stmt, a *Args) (LeaseInfo, bool, error) {
	var fence, exp, stamp sql.NullInt64
	ok, err := QueryRow(ctx, q, l.e.Dialect, st, a, &fence, &exp, &stamp)
	info := LeaseInfo{Fence: fence.Int64, Owner: a.Owner}
	if exp.Valid {
		info.ExpiresAt = time.UnixMicro(exp.Int64).UTC()
	}
	if l.stamped {
		info.Owner = strconv.FormatInt(stamp.Int64, 10)
	}
	return info, ok, err
}

// Acquire implements [LeaseStore]. The compare-and-set always
// changes the row (a new owner, a new LockedAt past the old expiry, the
// fence), so one affected row means acquired on any DSN.
func (l *Leases) Acquire(ctx context.Context, key any, owner string, ttl time.Duration) (LeaseInfo, error) {
	a, err := l.args(key, owner, ttl, !l.stamped, true)
	if err != nil {
		return LeaseInfo{}, err
	}
	if l.stamped && !l.e.Returning {
		return l.acquireStamped(ctx, a)
	}
	var info LeaseInfo
	err = l.e.Do(ctx, "lease acquire", false, func() error {
		var ok bool
		var err error
		if info, ok, err = l.write(ctx, l.acquire, a); err != nil || ok {
			return err
		}
		if l.spec.Keyed {
			info, ok, err = l.write(ctx, l.insert, a)
			if ClassOf(l.e.interpret(err)) == errclass.Duplicate {
				return dialect.ErrLeaseHeld
			}
			if err != nil || ok {
				return err
			}
			return dialect.ErrLeaseHeld
		}
		found, err := QueryRow(ctx, l.e.DB, l.e.Dialect, l.inspect, a, new(any), new(any), new(any), new(any))
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %v", dialect.ErrKeyNotFound, a.Key)
		}
		return dialect.ErrLeaseHeld
	})
	if err != nil {
		return LeaseInfo{}, err
	}
	if l.e.Returning {
		return info, nil
	}
	info, ok, err := l.readBackInfo(ctx, a)
	switch {
	case err != nil:
		return LeaseInfo{}, wrapStep("read back", err)
	case !ok:
		// Acquired, then taken over before the read-back (a TTL shorter than
		// one round trip): someone else holds it now.
		return LeaseInfo{}, dialect.ErrLeaseHeld
	}
	return info, nil
}

// acquireStamped acquires a lease on a table without an owner column on an
// engine without RETURNING: the compare-and-set and the read-back of the
// stamp it wrote run in one transaction, which holds the row lock, so the
// read-back sees this acquisition and no later one.
func (l *Leases) acquireStamped(ctx context.Context, a *Args) (LeaseInfo, error) {
	var info LeaseInfo
	err := l.e.Do(ctx, "lease acquire", false, func() error {
		return l.e.InTx(ctx, func(tx Querier) error {
			n, err := Exec(ctx, tx, l.e.Dialect, l.acquire, a)
			if err != nil || n > 0 {
				if err == nil {
					info, _, err = l.info(ctx, tx, l.readBack, a)
				}
				return err
			}
			found, err := QueryRow(ctx, tx, l.e.Dialect, l.inspect, a, new(any), new(any), new(any), new(any))
			switch {
			case err != nil:
				return err
			case !found:
				return fmt.Errorf("%w: %v", dialect.ErrKeyNotFound, a.Key)
			}
			return dialect.ErrLeaseHeld
		})
	})
	if err != nil {
		return LeaseInfo{}, err
	}
	return info, nil
}

// write runs an acquiring statement: on a Returning engine the row it
// returns says it wrote; otherwise its affected rows do.
func (l *Leases) write(ctx context.Context, st Stmt, a *Args) (LeaseInfo, bool, error) {
	if l.e.Returning {
		return l.info(ctx, l.e.DB, st, a)
	}
	n, err := Exec(ctx, l.e.DB, l.e.Dialect, st, a)
	return LeaseInfo{}, n > 0, err
}

func (l *Leases) readBackInfo(ctx context.Context, a *Args) (LeaseInfo, bool, error) {
	var info LeaseInfo
	var ok bool
	err := l.e.Do(ctx, "lease read back", true, func() error {
		var err error
		info, ok, err = l.info(ctx, l.e.DB, l.readBack, a)
		return err
	})
	return info, ok, err
}

// Renew implements [LeaseStore]. Without RETURNING, ownership is
// decided by the read-back (key = ? AND owner = ?), not by the update's
// affected rows, so a renewal that happens not to change the row (a column
// without sub-second precision) is still recognised.
func (l *Leases) Renew(ctx context.Context, key any, owner string, ttl time.Duration) (LeaseInfo, error) {
	a, err := l.args(key, owner, ttl, true, true)
	if err != nil {
		return LeaseInfo{}, err
	}
	var info LeaseInfo
	ok := false
	switch {
	case l.stamped && !l.e.Returning:
		info, ok, err = l.renewStamped(ctx, a)
	default:
		err = l.e.Do(ctx, "lease renew", true, func() error {
			var err error
			info, ok, err = l.write(ctx, l.renew, a)
			return err
		})
		if err == nil && !l.e.Returning {
			info, ok, err = l.readBackInfo(ctx, a)
		}
	}
	if err == nil && !ok {
		err = dialect.ErrLeaseLost
	}
	if err != nil {
		return LeaseInfo{}, err
	}
	return info, nil
}

// renewStamped renews a lease on a table without an owner column on an
// engine without RETURNING, in one transaction: the update (conditioned on
// the stamp), then a read-back of the row it locked. The update's affected
// rows tell a new stamp (1) from a stamp the column's precision kept (0, and
// the row still shows the holder's stamp) from a lease lost (0, another
// stamp).
func (l *Leases) renewStamped(ctx context.Context, a *Args) (LeaseInfo, bool, error) {
	var info LeaseInfo
	ok := false
	err := l.e.Do(ctx, "lease renew", true, func() error {
		return l.e.InTx(ctx, func(tx Querier) error {
			n, err := Exec(ctx, tx, l.e.Dialect, l.renew, a)
			if err != nil {
				return err
			}
			info, ok, err = l.info(ctx, tx, l.readBack, a)
			ok = ok && (n > 0 || info.Owner == a.Owner)
			return err
		})
	})
	return info, ok, err
}

func (l *Leases) exec(ctx context.Context, op string, st Stmt, a *Args) (int64, error) {
	var n int64
	err := l.e.Do(ctx, op, false, func() error {
		var err error
		n, err = Exec(ctx, l.e.DB, l.e.Dialect, st, a)
		return err
	})
	return n, err
}

// Release implements [LeaseStore].
func (l *Leases) Release(ctx context.Context, key any, owner string, holdUntil time.Time) (bool, error) {
	a, err := l.args(key, owner, 0, true, false)
	if err != nil {
		return false, err
	}
	if holdUntil.IsZero() {
		n, err := l.exec(ctx, "lease release", l.release, a)
		return n > 0, err
	}
	return l.freeHeld(ctx, "lease release", l.releaseHold, a, holdUntil)
}

// Finish implements [LeaseStore].
func (l *Leases) Finish(ctx context.Context, key any, owner string, status any, holdUntil time.Time) (bool, error) {
	if l.finish.SQL == "" {
		return false, fmt.Errorf("%w: the lease table has no Status column", dialect.ErrInvalidConfig)
	}
	a, err := l.args(key, owner, 0, true, false)
	if err != nil {
		return false, err
	}
	if types := l.types.Load(); types != nil {
		if err := types.status.checkWritten("Status", "status", status); err != nil {
			return false, err
		}
	}
	a.Status = status
	if holdUntil.IsZero() {
		n, err := l.exec(ctx, "lease finish", l.finish, a)
		return n > 0, err
	}
	return l.freeHeld(ctx, "lease finish", l.finishHold, a, holdUntil)
}

// freeHeld runs a release or finish under a minimum hold. The hold is
// moved later by the slack (the resolution of the time columns): the
// acquisition time it was computed from, and the hold as stored, may each
// be up to one resolution step early, and a key must never go early.
//
// On an engine that reports changed rather than matched rows (MySQL), a
// hold that leaves the row as it was (the expiry already equal to the hold,
// as stored) changes nothing and reports 0 rows; whether the owner still
// holds the lease is then read back. That read is exact: an owner token is
// fresh for every acquisition, so a row that names it now named it when the
// statement ran.
func (l *Leases) freeHeld(ctx context.Context, op string, st Stmt, a *Args, holdUntil time.Time) (bool, error) {
	if st.SQL == "" {
		return false, fmt.Errorf("%w: a minimum hold needs Owner and ExpiresAt columns", dialect.ErrInvalidConfig)
	}
	a.Hold = holdUntil.Add(a.Slack)
	if err := l.timeLimits().fits("ExpiresAt", "minimum hold", time.Until(a.Hold)); err != nil {
		return false, err
	}
	n, err := l.exec(ctx, op, st, a)
	if err != nil || n > 0 || l.e.Returning {
		return n > 0, err
	}
	_, ok, err := l.readBackInfo(ctx, a)
	return ok, wrapStep("read back", err)
}

// ForceRelease implements [LeaseStore].
func (l *Leases) ForceRelease(ctx context.Context, key any) (bool, error) {
	a, err := l.args(key, "", 0, false, false)
	if err != nil {
		return false, err
	}
	n, err := l.exec(ctx, "lease force release", l.force, a)
	return n > 0, err
}

// Inspect implements [LeaseStore]. Without an ExpiresAt column the
// expiry is unknown (the TTL is the holder's) and Expired is false.
func (l *Leases) Inspect(ctx context.Context, key any) (LeaseState, error) {
	var st LeaseState
	a, err := l.args(key, "", 0, false, false)
	if err != nil {
		return st, err
	}
	var owner sql.NullString
	var fence, exp sql.NullInt64
	var expired sql.NullBool
	err = l.e.Do(ctx, "lease inspect", true, func() error {
		var err error
		st.Exists, err = QueryRow(ctx, l.e.DB, l.e.Dialect, l.inspect, a, &owner, &fence, &exp, &expired)
		return err
	})
	if err != nil {
		return LeaseState{}, err
	}
	st.Owner, st.Fence = owner.String, fence.Int64
	if owner.Valid && exp.Valid {
		st.ExpiresAt = time.UnixMicro(exp.Int64).UTC()
		st.Expired = expired.Bool
	}
	return st, nil
}

// Held implements [LeaseStore].
func (l *Leases) Held(ctx context.Context, limit int) ([]LeaseHolder, error) {
	if l.held.SQL == "" {
		return nil, fmt.Errorf("%w: listing leases needs an ExpiresAt column", dialect.ErrNotSupported)
	}
	if limit <= 0 || limit > MaxHeldLimit {
		return nil, fmt.Errorf("%w: limit %d is outside 1..%d", dialect.ErrInvalidConfig, limit, MaxHeldLimit)
	}
	a := &Args{Limit: limit, Slack: time.Duration(l.slack.Load())}
	var out []LeaseHolder
	err := l.e.Do(ctx, "lease held", true, func() error {
		out = out[:0]
		return Query(ctx, l.e.DB, l.e.Dialect, l.held, a, func(r Rows) error {
			var key any
			var owner sql.NullString
			var fence, exp, left sql.NullInt64
			var expired sql.NullBool
			if err := r.Scan(&key, &owner, &fence, &exp, &left, &expired); err != nil {
				return err
			}
			k, err := NormalizeKey(l.spec.KeyKind, key)
			if err != nil {
				return err
			}
			h := LeaseHolder{Key: k, Remaining: time.Duration(max(left.Int64, 0)) * time.Microsecond}
			h.Owner, h.Fence, h.Expired, h.Exists = owner.String, fence.Int64, expired.Bool, true
			h.ExpiresAt = time.UnixMicro(exp.Int64).UTC()
			out = append(out, h)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReapExpired implements [LeaseStore]. It needs an ExpiresAt
// column; the rows and their fences stay, so fences keep increasing.
func (l *Leases) ReapExpired(ctx context.Context, limit int) (int64, error) {
	if l.reap.SQL == "" {
		return 0, fmt.Errorf("%w: reaping leases needs an ExpiresAt column", dialect.ErrNotSupported)
	}
	if limit <= 0 {
		return 0, fmt.Errorf("%w: limit must be positive", dialect.ErrInvalidConfig)
	}
	return l.exec(ctx, "lease reap", l.reap, &Args{Limit: limit, Slack: time.Duration(l.slack.Load())})
}

// Statements returns every rendered statement of the store by name: for
// tests.
func (l *Leases) Statements() map[string]string {
	m := map[string]string{}
	for k, st := range l.named() {
		m[k] = st.SQL
	}
	return m
}

// Rendered returns every statement rendered for the store, in the order
// they were rendered: for the golden files.
func (l *Leases) Rendered() []Rendered { return l.rendered }

// Bind returns the statement Statements calls name, with its arguments
// taken from a in the order of its placeholders: for EXPLAIN checks. ok is
// false when the store has no such statement.
func (l *Leases) Bind(name string, a *Args) (query string, args []any, ok bool) {
	st, ok := l.named()[name]
	if !ok || st.SQL == "" {
		return "", nil, false
	}
	query, args = st.Bind(l.e.Dialect, a)
	return query, args, true
}

func (l *Leases) named() map[string]Stmt {
	return map[string]Stmt{
		"acquire": l.acquire, "insert": l.insert, "read back": l.readBack, "renew": l.renew,
		"release": l.release, "force": l.force, "inspect": l.inspect, "reap": l.reap, "finish": l.finish,
		"release hold": l.releaseHold, "finish hold": l.finishHold, "held": l.held,
	}
}

// timeLimits returns the limits VerifySchema learnt (nil before).
func (l *Leases) timeLimits() timeLimits {
	if p := l.limits.Load(); p != nil {
		return *p
	}
	return nil
}

// VerifySchema implements [LeaseStore].
func (l *Leases) VerifySchema(ctx context.Context) error {
	cols, err := l.e.catalogColumns(ctx, l.columns, l.spec.Table)
	if err != nil {
		return err
	}
	if err := checkLeaseColumns(l.spec, cols); err != nil {
		return err
	}
	types := &leaseTypes{key: l.e.learnType(l.spec.Table, l.spec.Key, cols)}
	if err := l.checkKeyType(types.key); err != nil {
		return err
	}
	if l.spec.Fence != "" {
		if err := l.e.learnType(l.spec.Table, l.spec.Fence, cols).needInt("Fence"); err != nil {
			return err
		}
	}
	if l.spec.Status != "" {
		types.status = l.e.learnType(l.spec.Table, l.spec.Status, cols)
	}
	slack, limits, err := l.e.checkTimes(l.spec.Table, cols, l.spec.TextTimes,
		timeCol{"LockedAt", l.spec.LockedAt, l.spec.LockedAtFormat}, timeCol{"ExpiresAt", l.spec.ExpiresAt, l.spec.ExpiresAtFormat})
	if err != nil {
		return err
	}
	l.limits.Store(&limits)
	if l.spec.TextTimes {
		// Text dates written by the application hold whole seconds: see
		// dialect.LeaseTable.TextTimes.
		slack = max(slack, TextSlack)
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

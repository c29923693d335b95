package core

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// LeaseSQL are an engine's lease-table statements as text/template sources
// over [Names] (Table, Key, Owner, LockedAt, ExpiresAt, Fence; optional
// columns ""), with the values {{arg "key"}}, {{arg "owner"}}, {{arg "ttl"}}
// and {{arg "limit"}}. Expiries are read as integer microseconds since the
// Unix epoch on the database clock; without an ExpiresAt column a lease
// expires at LockedAt + ttl. Fences read 0 without a Fence column. Every
// test of whether a lease has expired adds {{arg "slack"}}, the resolution
// of the user's time columns ([Slack]).
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
	// Inspect returns owner, fence, expiry and a boolean "expired" on the
	// database clock for "key".
	Inspect string
	// Reap frees at most "limit" expired leases (needs ExpiresAt).
	Reap string
	// Columns is the catalog query of [ClaimSQL.Columns].
	Columns string
	// Common is prepended to every template.
	Common string
}

// Leases is the engine-neutral [dialect.LeaseStore].
type Leases struct {
	e    *Engine
	spec dialect.LeaseTable

	acquire, insert, readBack, renew, release, force, inspect, reap, columns Stmt
	// slack is added to expiry comparisons: see [Slack].
	slack atomic.Int64
}

var _ dialect.LeaseStore = (*Leases)(nil)

// NewLeases validates spec and renders the engine's statements for it.
func NewLeases(e *Engine, sqls LeaseSQL, spec dialect.LeaseTable) (*Leases, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	q := func(c string) string {
		if c == "" {
			return ""
		}
		return e.Quote(c)
	}
	n := Names{
		Table: e.QuoteName(spec.Table), Key: q(spec.Key), Owner: q(spec.Owner), LockedAt: q(spec.LockedAt),
		ExpiresAt: q(spec.ExpiresAt), Fence: q(spec.Fence), TextKey: spec.KeyKind == dialect.IDText,
	}
	r := &renderer{e: e, n: n}
	t := func(src string) string {
		if src == "" {
			return ""
		}
		return sqls.Common + src
	}
	l := &Leases{e: e, spec: spec}
	l.acquire = r.stmt("lease acquire", t(sqls.Acquire), nil)
	if spec.Keyed {
		l.insert = r.stmt("lease insert", t(sqls.Insert), nil)
	}
	l.readBack = r.stmt("lease read back", t(sqls.ReadBack), nil)
	l.renew = r.stmt("lease renew", t(sqls.Renew), nil)
	l.release = r.stmt("lease release", t(sqls.Release), nil)
	l.force = r.stmt("lease force release", t(sqls.Force), nil)
	l.inspect = r.stmt("lease inspect", t(sqls.Inspect), nil)
	if spec.ExpiresAt != "" {
		l.reap = r.stmt("lease reap", t(sqls.Reap), nil)
	}
	l.columns = r.stmt("columns", t(sqls.Columns), nil)
	if r.err != nil {
		return nil, r.err
	}
	l.slack.Store(int64(Slack))
	return l, nil
}

// args validates a call's key, owner and ttl and returns its arguments.
func (l *Leases) args(key any, owner string, ttl time.Duration, needOwner, needTTL bool) (*Args, error) {
	k, err := dialect.NormalizeKey(l.spec.KeyKind, key)
	if err == nil {
		err = l.spec.CheckKey(k)
	}
	switch {
	case err != nil:
	case needOwner && owner == "":
		err = fmt.Errorf("%w: empty owner", dialect.ErrInvalidConfig)
	case needOwner && len(owner) > dialect.MaxTokenLen:
		err = fmt.Errorf("%w: owner is %d bytes; at most %d", dialect.ErrInvalidConfig, len(owner), dialect.MaxTokenLen)
	case needTTL && ttl <= 0:
		err = fmt.Errorf("%w: ttl must be positive, got %v", dialect.ErrInvalidConfig, ttl)
	}
	return &Args{Key: k, Owner: owner, TTL: ttl, Slack: time.Duration(l.slack.Load())}, err
}

// info scans a fence and an expiry in microseconds.
func (l *Leases) info(ctx context.Context, q Querier, st Stmt, a *Args) (dialect.LeaseInfo, bool, error) {
	var fence, exp sql.NullInt64
	ok, err := QueryRow(ctx, q, l.e.Dialect, st, a, &fence, &exp)
	info := dialect.LeaseInfo{Fence: fence.Int64}
	if exp.Valid {
		info.ExpiresAt = time.UnixMicro(exp.Int64).UTC()
	}
	return info, ok, err
}

// Acquire implements [dialect.LeaseStore]. The compare-and-set always
// changes the row (a new owner, a new LockedAt past the old expiry, the
// fence), so one affected row means acquired on any DSN.
func (l *Leases) Acquire(ctx context.Context, key any, owner string, ttl time.Duration) (dialect.LeaseInfo, error) {
	a, err := l.args(key, owner, ttl, true, true)
	if err != nil {
		return dialect.LeaseInfo{}, wrap("lease acquire", err)
	}
	var info dialect.LeaseInfo
	err = l.e.Do(ctx, "lease acquire", false, func() error {
		var ok bool
		var err error
		if info, ok, err = l.write(ctx, l.acquire, a); err != nil || ok {
			return err
		}
		if l.spec.Keyed {
			info, ok, err = l.write(ctx, l.insert, a)
			if ClassOf(l.e.interpret(err)) == dialect.ClassDuplicate {
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
		return dialect.LeaseInfo{}, wrap("lease acquire", err)
	}
	if l.e.Returning {
		return info, nil
	}
	info, ok, err := l.readBackInfo(ctx, a)
	switch {
	case err != nil:
		return dialect.LeaseInfo{}, wrap("lease acquire: read back", err)
	case !ok:
		// Acquired, then taken over before the read-back (a TTL shorter than
		// one round trip): someone else holds it now.
		return dialect.LeaseInfo{}, wrap("lease acquire", dialect.ErrLeaseHeld)
	}
	return info, nil
}

// write runs an acquiring statement: on a Returning engine the row it
// returns says it wrote; otherwise its affected rows do.
func (l *Leases) write(ctx context.Context, st Stmt, a *Args) (dialect.LeaseInfo, bool, error) {
	if l.e.Returning {
		return l.info(ctx, l.e.DB, st, a)
	}
	n, err := Exec(ctx, l.e.DB, l.e.Dialect, st, a)
	return dialect.LeaseInfo{}, n > 0, err
}

func (l *Leases) readBackInfo(ctx context.Context, a *Args) (dialect.LeaseInfo, bool, error) {
	var info dialect.LeaseInfo
	var ok bool
	err := l.e.Do(ctx, "lease read back", true, func() error {
		var err error
		info, ok, err = l.info(ctx, l.e.DB, l.readBack, a)
		return err
	})
	return info, ok, err
}

// Renew implements [dialect.LeaseStore]. Without RETURNING, ownership is
// decided by the read-back (key = ? AND owner = ?), not by the update's
// affected rows, so a renewal that happens not to change the row (a column
// without sub-second precision) is still recognised.
func (l *Leases) Renew(ctx context.Context, key any, owner string, ttl time.Duration) (dialect.LeaseInfo, error) {
	a, err := l.args(key, owner, ttl, true, true)
	if err != nil {
		return dialect.LeaseInfo{}, wrap("lease renew", err)
	}
	var info dialect.LeaseInfo
	ok := false
	err = l.e.Do(ctx, "lease renew", true, func() error {
		var err error
		info, ok, err = l.write(ctx, l.renew, a)
		return err
	})
	if err == nil && !l.e.Returning {
		info, ok, err = l.readBackInfo(ctx, a)
	}
	if err == nil && !ok {
		err = dialect.ErrLeaseLost
	}
	if err != nil {
		return dialect.LeaseInfo{}, wrap("lease renew", err)
	}
	return info, nil
}

func (l *Leases) exec(ctx context.Context, op string, st Stmt, a *Args) (int64, error) {
	var n int64
	err := l.e.Do(ctx, op, false, func() error {
		var err error
		n, err = Exec(ctx, l.e.DB, l.e.Dialect, st, a)
		return err
	})
	return n, wrap(op, err)
}

// Release implements [dialect.LeaseStore].
func (l *Leases) Release(ctx context.Context, key any, owner string) (bool, error) {
	a, err := l.args(key, owner, 0, true, false)
	if err != nil {
		return false, wrap("lease release", err)
	}
	n, err := l.exec(ctx, "lease release", l.release, a)
	return n > 0, err
}

// ForceRelease implements [dialect.LeaseStore].
func (l *Leases) ForceRelease(ctx context.Context, key any) (bool, error) {
	a, err := l.args(key, "", 0, false, false)
	if err != nil {
		return false, wrap("lease force release", err)
	}
	n, err := l.exec(ctx, "lease force release", l.force, a)
	return n > 0, err
}

// Inspect implements [dialect.LeaseStore]. Without an ExpiresAt column the
// expiry is unknown (the TTL is the holder's) and Expired is false.
func (l *Leases) Inspect(ctx context.Context, key any) (dialect.LeaseState, error) {
	var st dialect.LeaseState
	a, err := l.args(key, "", 0, false, false)
	if err != nil {
		return st, wrap("lease inspect", err)
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
		return dialect.LeaseState{}, wrap("lease inspect", err)
	}
	st.Owner, st.Fence = owner.String, fence.Int64
	if owner.Valid && exp.Valid {
		st.ExpiresAt = time.UnixMicro(exp.Int64).UTC()
		st.Expired = expired.Bool
	}
	return st, nil
}

// ReapExpired implements [dialect.LeaseStore]. It needs an ExpiresAt
// column; the rows and their fences stay, so fences keep increasing.
func (l *Leases) ReapExpired(ctx context.Context, limit int) (int64, error) {
	if l.reap.SQL == "" {
		return 0, fmt.Errorf("%w: lease reap: reaping leases needs an ExpiresAt column", dialect.ErrNotSupported)
	}
	if limit <= 0 {
		return 0, fmt.Errorf("%w: lease reap: limit must be positive", dialect.ErrInvalidConfig)
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
		"release": l.release, "force": l.force, "inspect": l.inspect, "reap": l.reap,
	}
}

// VerifySchema implements [dialect.LeaseStore].
func (l *Leases) VerifySchema(ctx context.Context) error {
	cols, err := l.e.catalogColumns(ctx, l.columns, l.spec.Table)
	if err != nil {
		return wrap("verify schema", err)
	}
	if err := checkLeaseColumns(l.spec, cols); err != nil {
		return err
	}
	slack, err := l.e.timeSlack(l.spec.Table, cols, timeCol{"LockedAt", l.spec.LockedAt}, timeCol{"ExpiresAt", l.spec.ExpiresAt})
	if err != nil {
		return err
	}
	l.slack.Store(int64(slack))
	return nil
}

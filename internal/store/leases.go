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
	"github.com/claimlock/claimlock/internal/store/render"
)

// Leases is the engine-neutral [LeaseStore] of one table.
type Leases struct {
	b    *Backend
	spec dialect.LeaseTable
	// stmts are the statements rendered for the table (leasestmts.go).
	stmts statements[leaseStmt]
	// stamped: no Owner column, a lease is identified by its stamp.
	stamped bool
	// slack is added to expiry comparisons: see defaultSlack.
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

// newLeases validates spec and renders the engine's statements for it.
func newLeases(b *Backend, spec dialect.LeaseTable) (*Leases, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.TextTimes && !b.drv.SupportsTextTimes() {
		return nil, fmt.Errorf("%w: TextTimes: only SQLite keeps times as text; %s has time types", dialect.ErrInvalidConfig, b.drv.Name())
	}
	l := &Leases{b: b, spec: spec, stamped: spec.Owner == ""}
	var err error
	if l.stmts, err = b.renderLeases(spec); err != nil {
		return nil, err
	}
	l.slack.Store(int64(defaultSlack))
	return l, nil
}

// st returns the statement s (its SQL "" where the store has none).
func (l *Leases) st(s leaseStmt) render.Stmt { return l.stmts.get(s) }

// args validates a call's key, owner and ttl and returns its arguments. A
// stamped lease's owner is its stamp, a decimal integer; Acquire takes none.
func (l *Leases) args(key any, owner string, ttl time.Duration, needOwner, needTTL bool) (*render.Args, error) {
	k, err := NormalizeKey(l.spec.KeyKind, key)
	if err == nil {
		err = l.spec.CheckKey(k)
	}
	if types := l.types.Load(); err == nil && types != nil {
		err = types.key.checkValue("key", k)
	}
	a := &render.Args{Key: k, Owner: owner, TTL: ttl, Slack: time.Duration(l.slack.Load())}
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
func (l *Leases) info(ctx context.Context, q Querier, st render.Stmt, a *render.Args) (LeaseInfo, bool, error) {
	var fence, exp, stamp sql.NullInt64
	ok, err := l.b.queryRow(ctx, q, st, a, &fence, &exp, &stamp)
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
	if l.stamped && !l.b.caps.Returning {
		return l.acquireStamped(ctx, a)
	}
	var info LeaseInfo
	err = l.b.Do(ctx, "lease acquire", false, func() error {
		var ok bool
		var err error
		if info, ok, err = l.write(ctx, l.st(lAcquire), a); err != nil || ok {
			return err
		}
		if l.spec.Keyed {
			info, ok, err = l.write(ctx, l.st(lInsert), a)
			if classOf(l.b.interpret(err)) == errclass.Duplicate {
				return dialect.ErrLeaseHeld
			}
			if err != nil || ok {
				return err
			}
			return dialect.ErrLeaseHeld
		}
		found, err := l.b.queryRow(ctx, l.b.db, l.st(lInspect), a, new(any), new(any), new(any), new(any), new(any))
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
	if l.b.caps.Returning {
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
func (l *Leases) acquireStamped(ctx context.Context, a *render.Args) (LeaseInfo, error) {
	var info LeaseInfo
	err := l.b.Do(ctx, "lease acquire", false, func() error {
		return l.b.InTx(ctx, func(tx Querier) error {
			n, err := l.b.exec(ctx, tx, l.st(lAcquire), a)
			if err != nil || n > 0 {
				if err == nil {
					info, _, err = l.info(ctx, tx, l.st(lReadBack), a)
				}
				return err
			}
			found, err := l.b.queryRow(ctx, tx, l.st(lInspect), a, new(any), new(any), new(any), new(any), new(any))
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
func (l *Leases) write(ctx context.Context, st render.Stmt, a *render.Args) (LeaseInfo, bool, error) {
	if l.b.caps.Returning {
		return l.info(ctx, l.b.db, st, a)
	}
	n, err := l.b.exec(ctx, l.b.db, st, a)
	return LeaseInfo{}, n > 0, err
}

func (l *Leases) readBackInfo(ctx context.Context, a *render.Args) (LeaseInfo, bool, error) {
	var info LeaseInfo
	var ok bool
	err := l.b.Do(ctx, "lease read back", true, func() error {
		var err error
		info, ok, err = l.info(ctx, l.b.db, l.st(lReadBack), a)
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
	case l.stamped && !l.b.caps.Returning:
		info, ok, err = l.renewStamped(ctx, a)
	default:
		err = l.b.Do(ctx, "lease renew", true, func() error {
			var err error
			info, ok, err = l.write(ctx, l.st(lRenew), a)
			return err
		})
		if err == nil && !l.b.caps.Returning {
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
func (l *Leases) renewStamped(ctx context.Context, a *render.Args) (LeaseInfo, bool, error) {
	var info LeaseInfo
	ok := false
	err := l.b.Do(ctx, "lease renew", true, func() error {
		return l.b.InTx(ctx, func(tx Querier) error {
			n, err := l.b.exec(ctx, tx, l.st(lRenew), a)
			if err != nil {
				return err
			}
			info, ok, err = l.info(ctx, tx, l.st(lReadBack), a)
			ok = ok && (n > 0 || info.Owner == a.Owner)
			return err
		})
	})
	return info, ok, err
}

func (l *Leases) exec(ctx context.Context, op string, st render.Stmt, a *render.Args) (int64, error) {
	var n int64
	err := l.b.Do(ctx, op, false, func() error {
		var err error
		n, err = l.b.exec(ctx, l.b.db, st, a)
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
		n, err := l.exec(ctx, "lease release", l.st(lRelease), a)
		return n > 0, err
	}
	return l.freeHeld(ctx, "lease release", l.st(lReleaseHold), a, holdUntil)
}

// Finish implements [LeaseStore].
func (l *Leases) Finish(ctx context.Context, key any, owner string, status any, holdUntil time.Time) (bool, error) {
	if l.st(lFinish).SQL == "" {
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
		n, err := l.exec(ctx, "lease finish", l.st(lFinish), a)
		return n > 0, err
	}
	return l.freeHeld(ctx, "lease finish", l.st(lFinishHold), a, holdUntil)
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
func (l *Leases) freeHeld(ctx context.Context, op string, st render.Stmt, a *render.Args, holdUntil time.Time) (bool, error) {
	if st.SQL == "" {
		return false, fmt.Errorf("%w: a minimum hold needs Owner and ExpiresAt columns", dialect.ErrInvalidConfig)
	}
	a.Hold = holdUntil.Add(a.Slack)
	if err := l.timeLimits().fits("ExpiresAt", "minimum hold", time.Until(a.Hold)); err != nil {
		return false, err
	}
	n, err := l.exec(ctx, op, st, a)
	if err != nil || n > 0 || l.b.caps.Returning {
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
	n, err := l.exec(ctx, "lease force release", l.st(lForce), a)
	return n > 0, err
}

// Inspect implements [LeaseStore]. Without an ExpiresAt column the
// expiry is LockedAt + ttl: the caller's TTL, which is only every holder's
// when every holder of the key uses the same one.
func (l *Leases) Inspect(ctx context.Context, key any, ttl time.Duration) (LeaseState, error) {
	var st LeaseState
	a, err := l.args(key, "", ttl, false, l.spec.ExpiresAt == "")
	if err != nil {
		return st, err
	}
	var owner, status sql.NullString
	var fence, exp sql.NullInt64
	var expired sql.NullBool
	err = l.b.Do(ctx, "lease inspect", true, func() error {
		var err error
		st.Exists, err = l.b.queryRow(ctx, l.b.db, l.st(lInspect), a, &owner, &fence, &exp, &expired, &status)
		return err
	})
	if err != nil {
		return LeaseState{}, err
	}
	st.Owner, st.Fence, st.Status = owner.String, fence.Int64, status.String
	if owner.Valid && exp.Valid {
		st.ExpiresAt = time.UnixMicro(exp.Int64).UTC()
		st.Expired = expired.Bool
	}
	return st, nil
}

// Held implements [LeaseStore].
func (l *Leases) Held(ctx context.Context, limit int, ttl time.Duration) ([]LeaseHolder, error) {
	if l.st(lHeld).SQL == "" {
		return nil, fmt.Errorf("%w: listing leases on this engine", dialect.ErrNotSupported)
	}
	if limit <= 0 || limit > MaxHeldLimit {
		return nil, fmt.Errorf("%w: limit %d is outside 1..%d", dialect.ErrInvalidConfig, limit, MaxHeldLimit)
	}
	if l.spec.ExpiresAt == "" && ttl <= 0 {
		return nil, fmt.Errorf("%w: ttl must be positive to list leases of a table without ExpiresAt, got %v", dialect.ErrInvalidConfig, ttl)
	}
	a := &render.Args{Limit: limit, TTL: ttl, Slack: time.Duration(l.slack.Load())}
	var out []LeaseHolder
	err := l.b.Do(ctx, "lease held", true, func() error {
		out = out[:0]
		return l.b.query(ctx, l.b.db, l.st(lHeld), a, func(r Rows) error {
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
	if l.st(lReap).SQL == "" {
		return 0, fmt.Errorf("%w: reaping leases needs an ExpiresAt column", dialect.ErrNotSupported)
	}
	if limit <= 0 {
		return 0, fmt.Errorf("%w: limit must be positive", dialect.ErrInvalidConfig)
	}
	return l.exec(ctx, "lease reap", l.st(lReap), &render.Args{Limit: limit, Slack: time.Duration(l.slack.Load())})
}

// Statements returns every statement of the store that the lease table
// lists by name (leasestmts.go): for tests.
func (l *Leases) Statements() map[string]string { return l.stmts.sqlByName() }

// Rendered returns every statement rendered for the store, in the order
// they were rendered: for the golden files.
func (l *Leases) Rendered() []Rendered { return l.stmts.rendered }

// Bind returns the statement Statements calls name, with its arguments
// taken from a in the order of its placeholders: for EXPLAIN checks. ok is
// false when the store has no such statement.
func (l *Leases) Bind(name string, a *render.Args) (query string, args []any, ok bool) {
	return l.stmts.bind(l.b, name, a)
}

// timeLimits returns the limits VerifySchema learnt (nil before).
func (l *Leases) timeLimits() timeLimits {
	if p := l.limits.Load(); p != nil {
		return *p
	}
	return nil
}

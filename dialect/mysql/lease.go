package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

type leaseStore struct {
	d    *Dialect
	spec dialect.LeaseTable

	acquire, insert, readBack, renew, release, force, inspect, reap string
}

// LeaseStore implements [dialect.Dialect]. Every operation is one short
// autocommit statement, plus a read-back of the fence and expiry after
// acquire and renew (MySQL has no UPDATE ... RETURNING).
func (d *Dialect) LeaseStore(spec dialect.LeaseTable) (dialect.LeaseStore, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	l := &leaseStore{d: d, spec: spec}
	t, key, owner, lockedAt := quote(spec.Table), quote(spec.Key), quote(spec.Owner), quote(spec.LockedAt)
	fenceCol, fenceSet := "0", ""
	if spec.Fence != "" {
		f := quote(spec.Fence)
		fenceCol = f
		fenceSet = fmt.Sprintf(", %s = %s + 1", f, f)
	}
	if spec.ExpiresAt != "" {
		exp := quote(spec.ExpiresAt)
		// Arguments: acquire (owner, ttl, key); renew (ttl, key, owner);
		// read-back (key, owner).
		l.acquire = fmt.Sprintf("UPDATE %[1]s SET %[2]s = ?, %[3]s = %[4]s, %[5]s = %[4]s + INTERVAL ? MICROSECOND%[6]s WHERE %[7]s = ? AND (%[2]s IS NULL OR %[5]s IS NULL OR %[5]s < %[4]s)",
			t, owner, lockedAt, now, exp, fenceSet, key)
		// The new expiry is strictly later than the old one, so the write
		// changes the row even when renewed twice within a microsecond.
		l.renew = fmt.Sprintf("UPDATE %[1]s SET %[2]s = %[3]s, %[4]s = GREATEST(%[3]s + INTERVAL ? MICROSECOND, COALESCE(%[4]s + INTERVAL 1 MICROSECOND, %[3]s)) WHERE %[5]s = ? AND %[6]s = ?",
			t, lockedAt, now, exp, key, owner)
		l.readBack = fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s = ? AND %s = ?", fenceCol, micros(exp), t, key, owner)
		l.release = fmt.Sprintf("UPDATE %s SET %s = NULL, %s = NULL WHERE %s = ? AND %s = ?", t, owner, exp, key, owner)
		l.force = fmt.Sprintf("UPDATE %s SET %s = NULL, %s = NULL WHERE %s = ? AND %s IS NOT NULL", t, owner, exp, key, owner)
		l.inspect = fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s WHERE %s = ?", owner, fenceCol, micros(exp), micros(now), t, key)
		l.reap = fmt.Sprintf("UPDATE %[1]s SET %[2]s = NULL, %[3]s = NULL WHERE %[2]s IS NOT NULL AND %[3]s < %[4]s ORDER BY %[5]s LIMIT ?",
			t, owner, exp, now, key)
	} else {
		// Without ExpiresAt a lease expires at LockedAt + ttl. Arguments:
		// acquire (owner, key, ttl); renew (key, owner); read-back (ttl,
		// key, owner).
		l.acquire = fmt.Sprintf("UPDATE %[1]s SET %[2]s = ?, %[3]s = %[4]s%[5]s WHERE %[6]s = ? AND (%[2]s IS NULL OR %[3]s IS NULL OR %[3]s < %[4]s - INTERVAL ? MICROSECOND)",
			t, owner, lockedAt, now, fenceSet, key)
		l.renew = fmt.Sprintf("UPDATE %[1]s SET %[2]s = GREATEST(%[3]s, COALESCE(%[2]s + INTERVAL 1 MICROSECOND, %[3]s)) WHERE %[4]s = ? AND %[5]s = ?",
			t, lockedAt, now, key, owner)
		l.readBack = fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s = ? AND %s = ?", fenceCol, micros(lockedAt+" + INTERVAL ? MICROSECOND"), t, key, owner)
		l.release = fmt.Sprintf("UPDATE %s SET %s = NULL WHERE %s = ? AND %s = ?", t, owner, key, owner)
		l.force = fmt.Sprintf("UPDATE %s SET %s = NULL WHERE %s = ? AND %s IS NOT NULL", t, owner, key, owner)
		l.inspect = fmt.Sprintf("SELECT %s, %s, NULL, %s FROM %s WHERE %s = ?", owner, fenceCol, micros(now), t, key)
	}
	if spec.Keyed {
		cols, vals := fmt.Sprintf("%s, %s, %s", key, owner, lockedAt), "?, ?, "+now
		if spec.ExpiresAt != "" {
			cols += ", " + quote(spec.ExpiresAt)
			vals += ", " + now + " + INTERVAL ? MICROSECOND"
		}
		if spec.Fence != "" {
			cols += ", " + quote(spec.Fence)
			vals += ", 1"
		}
		// A plain INSERT: a duplicate key (error 1062) means someone else
		// created the row first. INSERT ... ON DUPLICATE KEY UPDATE would
		// report 1 affected row for an untouched duplicate on a DSN with
		// clientFoundRows=true, indistinguishable from an insert.
		l.insert = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", t, cols, vals)
	}
	return l, nil
}

func ttlMicros(ttl time.Duration) int64 {
	return max(ttl.Microseconds(), 1)
}

func usTime(us int64) time.Time { return time.UnixMicro(us).UTC() }

func (l *leaseStore) check(key any, owner string, ttl time.Duration, needOwner, needTTL bool) error {
	if err := l.spec.CheckKey(key); err != nil {
		return err
	}
	if needOwner && owner == "" {
		return fmt.Errorf("%w: empty owner", dialect.ErrInvalidConfig)
	}
	if needOwner && len(owner) > dialect.MaxTokenLen {
		return fmt.Errorf("%w: owner is %d bytes; at most %d", dialect.ErrInvalidConfig, len(owner), dialect.MaxTokenLen)
	}
	if needTTL && ttl <= 0 {
		return fmt.Errorf("%w: ttl must be positive, got %v", dialect.ErrInvalidConfig, ttl)
	}
	return nil
}

// readBack reads the fence and expiry of key while owner holds it.
func (l *leaseStore) readBackInfo(ctx context.Context, key any, owner string, us int64) (dialect.LeaseInfo, error) {
	args := []any{key, owner}
	if l.spec.ExpiresAt == "" {
		args = []any{us, key, owner}
	}
	var info dialect.LeaseInfo
	var exp sql.NullInt64
	err := l.d.do(ctx, "lease read-back", true, func() error {
		return l.d.db.QueryRowContext(ctx, l.readBack, args...).Scan(&info.Fence, &exp)
	})
	if err != nil {
		return info, err
	}
	if exp.Valid {
		info.ExpiresAt = usTime(exp.Int64)
	}
	return info, nil
}

// Acquire implements [dialect.LeaseStore]. The compare-and-set always
// changes the row (a new owner, a new LockedAt past the old expiry, the
// fence), so one affected row means acquired on any DSN.
func (l *leaseStore) Acquire(ctx context.Context, key any, owner string, ttl time.Duration) (dialect.LeaseInfo, error) {
	if err := l.check(key, owner, ttl, true, true); err != nil {
		return dialect.LeaseInfo{}, err
	}
	us := ttlMicros(ttl)
	args := []any{owner, us, key}
	if l.spec.ExpiresAt == "" {
		args = []any{owner, key, us}
	}
	acquired := false
	err := l.d.do(ctx, "lease acquire", false, func() error {
		r, err := l.d.db.ExecContext(ctx, l.acquire, args...)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil || n > 0 {
			acquired = n > 0
			return err
		}
		if !l.spec.Keyed {
			err := l.d.db.QueryRowContext(ctx, l.inspect, key).Scan(new(any), new(any), new(any), new(any))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("%w: %v", dialect.ErrKeyNotFound, key)
			}
			if err != nil {
				return err
			}
			return dialect.ErrLeaseHeld
		}
		iargs := []any{key, owner}
		if l.spec.ExpiresAt != "" {
			iargs = append(iargs, us)
		}
		if _, err := l.d.db.ExecContext(ctx, l.insert, iargs...); err != nil {
			if isErrNumber(err, errDupEntry) {
				return dialect.ErrLeaseHeld
			}
			return err
		}
		acquired = true
		return nil
	})
	if err != nil {
		return dialect.LeaseInfo{}, fmt.Errorf("mysql: lease acquire: %w", err)
	}
	if !acquired {
		return dialect.LeaseInfo{}, fmt.Errorf("mysql: lease acquire: %w", dialect.ErrLeaseHeld)
	}
	info, err := l.readBackInfo(ctx, key, owner, us)
	if errors.Is(err, sql.ErrNoRows) {
		// Acquired, then taken over before the read-back (a TTL shorter
		// than one round trip): someone else holds it now.
		return dialect.LeaseInfo{}, fmt.Errorf("mysql: lease acquire: %w", dialect.ErrLeaseHeld)
	}
	if err != nil {
		return dialect.LeaseInfo{}, fmt.Errorf("mysql: lease acquire: read back: %w", err)
	}
	return info, nil
}

// Renew implements [dialect.LeaseStore]. Ownership is decided by the
// read-back (key = ? AND owner = ?), not by the UPDATE's affected rows, so a
// renewal that happens not to change the row (a DATETIME column without
// microseconds) is still recognised.
func (l *leaseStore) Renew(ctx context.Context, key any, owner string, ttl time.Duration) (dialect.LeaseInfo, error) {
	if err := l.check(key, owner, ttl, true, true); err != nil {
		return dialect.LeaseInfo{}, err
	}
	us := ttlMicros(ttl)
	args := []any{us, key, owner}
	if l.spec.ExpiresAt == "" {
		args = []any{key, owner}
	}
	err := l.d.do(ctx, "lease renew", true, func() error {
		_, err := l.d.db.ExecContext(ctx, l.renew, args...)
		return err
	})
	if err != nil {
		return dialect.LeaseInfo{}, fmt.Errorf("mysql: lease renew: %w", err)
	}
	info, err := l.readBackInfo(ctx, key, owner, us)
	if errors.Is(err, sql.ErrNoRows) {
		return dialect.LeaseInfo{}, fmt.Errorf("mysql: lease renew: %w", dialect.ErrLeaseLost)
	}
	if err != nil {
		return dialect.LeaseInfo{}, fmt.Errorf("mysql: lease renew: read back: %w", err)
	}
	return info, nil
}

func (l *leaseStore) exec(ctx context.Context, op, q string, args ...any) (int64, error) {
	var n int64
	err := l.d.do(ctx, op, false, func() error {
		r, err := l.d.db.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: %s: %w", op, err)
	}
	return n, nil
}

// Release implements [dialect.LeaseStore]. It clears the owner, so affected
// rows are matched rows.
func (l *leaseStore) Release(ctx context.Context, key any, owner string) (bool, error) {
	if err := l.check(key, owner, 0, false, false); err != nil {
		return false, err
	}
	n, err := l.exec(ctx, "lease release", l.release, key, owner)
	return n > 0, err
}

// ForceRelease implements [dialect.LeaseStore].
func (l *leaseStore) ForceRelease(ctx context.Context, key any) (bool, error) {
	if err := l.check(key, "", 0, false, false); err != nil {
		return false, err
	}
	n, err := l.exec(ctx, "lease force release", l.force, key)
	return n > 0, err
}

// Inspect implements [dialect.LeaseStore].
func (l *leaseStore) Inspect(ctx context.Context, key any) (dialect.LeaseState, error) {
	var st dialect.LeaseState
	if err := l.check(key, "", 0, false, false); err != nil {
		return st, err
	}
	var owner sql.NullString
	var fence sql.NullInt64
	var exp sql.NullInt64
	var nowUS int64
	err := l.d.do(ctx, "lease inspect", true, func() error {
		return l.d.db.QueryRowContext(ctx, l.inspect, key).Scan(&owner, &fence, &exp, &nowUS)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("mysql: lease inspect: %w", err)
	}
	st.Exists = true
	st.Owner = owner.String
	st.Fence = fence.Int64
	if owner.Valid && exp.Valid {
		st.ExpiresAt = usTime(exp.Int64)
		st.Expired = exp.Int64 < nowUS
	}
	return st, nil
}

// ReapExpired implements [dialect.LeaseStore] (it needs an ExpiresAt
// column): a bounded UPDATE ... ORDER BY key LIMIT ? that clears owner and
// expiry and keeps the row, so fences keep increasing.
func (l *leaseStore) ReapExpired(ctx context.Context, limit int) (int64, error) {
	if l.reap == "" {
		return 0, fmt.Errorf("mysql: lease reap: reaping leases without an ExpiresAt column: %w", dialect.ErrNotSupported)
	}
	if limit <= 0 {
		return 0, fmt.Errorf("%w: mysql: lease reap: limit must be positive", dialect.ErrInvalidConfig)
	}
	return l.exec(ctx, "lease reap", l.reap, limit)
}

package sqlite

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

	acquire, insert, renew, release, force, inspect, reap string
}

// expiry renders the expiry of a row: the ExpiresAt column, or LockedAt +
// ttl (the ttl placeholder is the first argument where used).
func (l *leaseStore) expired(lockedAt, expiresAt string) string {
	if expiresAt != "" {
		return fmt.Sprintf("(%s IS NULL OR %s < %s)", expiresAt, expiresAt, nowMS)
	}
	return fmt.Sprintf("(%s IS NULL OR %s < %s - ?)", lockedAt, lockedAt, nowMS)
}

// LeaseStore implements [dialect.Dialect].
func (d *Dialect) LeaseStore(spec dialect.LeaseTable) (dialect.LeaseStore, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	l := &leaseStore{d: d, spec: spec}
	t, key, owner, lockedAt := quote(spec.Table), quote(spec.Key), quote(spec.Owner), quote(spec.LockedAt)
	var expiresAt, fence string
	if spec.ExpiresAt != "" {
		expiresAt = quote(spec.ExpiresAt)
	}
	fenceRet := "0"
	fenceSet := ""
	if spec.Fence != "" {
		fence = quote(spec.Fence)
		fenceRet = fence
		fenceSet = fmt.Sprintf(", %s = %s + 1", fence, fence)
	}
	// Arguments: with ExpiresAt (owner, ttl, key); without it (owner, key,
	// ttl, ttl), the expiry being LockedAt + ttl.
	expRet := fmt.Sprintf("%s + ?", lockedAt)
	if expiresAt != "" {
		expRet = expiresAt
		l.acquire = fmt.Sprintf("UPDATE %s SET %s = ?, %s = %s, %s = %s + ?%s WHERE %s = ? AND (%s IS NULL OR %s) RETURNING %s, %s",
			t, owner, lockedAt, nowMS, expiresAt, nowMS, fenceSet, key, owner, l.expired(lockedAt, expiresAt), fenceRet, expRet)
	} else {
		l.acquire = fmt.Sprintf("UPDATE %s SET %s = ?, %s = %s%s WHERE %s = ? AND (%s IS NULL OR %s) RETURNING %s, %s",
			t, owner, lockedAt, nowMS, fenceSet, key, owner, l.expired(lockedAt, ""), fenceRet, expRet)
	}
	if spec.Keyed {
		cols, vals := fmt.Sprintf("%s, %s, %s", key, owner, lockedAt), fmt.Sprintf("?, ?, %s", nowMS)
		if expiresAt != "" {
			cols += ", " + expiresAt
			vals += fmt.Sprintf(", %s + ?", nowMS)
		}
		if fence != "" {
			cols += ", " + fence
			vals += ", 1"
		}
		l.insert = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO NOTHING RETURNING %s, %s",
			t, cols, vals, key, fenceRet, expRet)
	}
	if expiresAt != "" {
		l.renew = fmt.Sprintf("UPDATE %s SET %s = %s, %s = MAX(%s + ?, %s + 1) WHERE %s = ? AND %s = ? RETURNING %s, %s",
			t, lockedAt, nowMS, expiresAt, nowMS, expiresAt, key, owner, fenceRet, expiresAt)
		l.release = fmt.Sprintf("UPDATE %s SET %s = NULL, %s = NULL WHERE %s = ? AND %s = ?", t, owner, expiresAt, key, owner)
		l.force = fmt.Sprintf("UPDATE %s SET %s = NULL, %s = NULL WHERE %s = ? AND %s IS NOT NULL", t, owner, expiresAt, key, owner)
		l.inspect = fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s WHERE %s = ?", owner, fenceRet, expiresAt, nowMS, t, key)
		l.reap = fmt.Sprintf("UPDATE %[1]s SET %[2]s = NULL, %[3]s = NULL WHERE %[4]s IN (SELECT %[4]s FROM %[1]s WHERE %[2]s IS NOT NULL AND %[3]s < %[5]s ORDER BY %[4]s LIMIT ?) AND %[2]s IS NOT NULL AND %[3]s < %[5]s",
			t, owner, expiresAt, key, nowMS)
	} else {
		l.renew = fmt.Sprintf("UPDATE %s SET %s = MAX(%s, %s + 1) WHERE %s = ? AND %s = ? RETURNING %s, %s + ?",
			t, lockedAt, nowMS, lockedAt, key, owner, fenceRet, lockedAt)
		l.release = fmt.Sprintf("UPDATE %s SET %s = NULL WHERE %s = ? AND %s = ?", t, owner, key, owner)
		l.force = fmt.Sprintf("UPDATE %s SET %s = NULL WHERE %s = ? AND %s IS NOT NULL", t, owner, key, owner)
		l.inspect = fmt.Sprintf("SELECT %s, %s, NULL, %s FROM %s WHERE %s = ?", owner, fenceRet, nowMS, t, key)
	}
	return l, nil
}

func ttlMS(ttl time.Duration) int64 {
	ms := ttl.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return ms
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func (l *leaseStore) check(key any, ttl time.Duration, needTTL bool) error {
	if err := l.spec.CheckKey(key); err != nil {
		return err
	}
	if needTTL && ttl <= 0 {
		return fmt.Errorf("%w: ttl must be positive, got %v", dialect.ErrInvalidConfig, ttl)
	}
	return nil
}

func (l *leaseStore) Acquire(ctx context.Context, key any, owner string, ttl time.Duration) (dialect.LeaseInfo, error) {
	var info dialect.LeaseInfo
	if err := l.check(key, ttl, true); err != nil {
		return info, err
	}
	ms := ttlMS(ttl)
	var args []any
	if l.spec.ExpiresAt != "" {
		args = []any{owner, ms, key}
	} else {
		args = []any{owner, key, ms, ms}
	}
	err := l.d.retry.Do(ctx, "lease acquire", func() error {
		var exp int64
		err := l.d.db.QueryRowContext(ctx, l.acquire, args...).Scan(&info.Fence, &exp)
		if err == nil {
			info.ExpiresAt = msTime(exp)
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return interpretError(err)
		}
		if !l.spec.Keyed {
			var dummy any
			e := l.d.db.QueryRowContext(ctx, l.inspect, key).Scan(&dummy, &dummy, &dummy, &dummy)
			if errors.Is(e, sql.ErrNoRows) {
				return fmt.Errorf("%w: %v", dialect.ErrKeyNotFound, key)
			}
			return dialect.ErrLeaseHeld
		}
		// One ttl argument either way: in VALUES for ExpiresAt, in
		// RETURNING (lock_at + ttl) without it.
		iargs := []any{key, owner, ms}
		err = l.d.db.QueryRowContext(ctx, l.insert, iargs...).Scan(&info.Fence, &exp)
		if errors.Is(err, sql.ErrNoRows) {
			return dialect.ErrLeaseHeld
		}
		if err != nil {
			return interpretError(err)
		}
		info.ExpiresAt = msTime(exp)
		return nil
	})
	if err != nil {
		return dialect.LeaseInfo{}, fmt.Errorf("sqlite: lease acquire: %w", err)
	}
	return info, nil
}

func (l *leaseStore) Renew(ctx context.Context, key any, owner string, ttl time.Duration) (dialect.LeaseInfo, error) {
	var info dialect.LeaseInfo
	if err := l.check(key, ttl, true); err != nil {
		return info, err
	}
	ms := ttlMS(ttl)
	var args []any
	if l.spec.ExpiresAt != "" {
		args = []any{ms, key, owner}
	} else {
		args = []any{key, owner, ms}
	}
	err := l.d.retry.Do(ctx, "lease renew", func() error {
		var exp int64
		err := l.d.db.QueryRowContext(ctx, l.renew, args...).Scan(&info.Fence, &exp)
		if errors.Is(err, sql.ErrNoRows) {
			return dialect.ErrLeaseLost
		}
		if err != nil {
			return interpretError(err)
		}
		info.ExpiresAt = msTime(exp)
		return nil
	})
	if err != nil {
		return dialect.LeaseInfo{}, fmt.Errorf("sqlite: lease renew: %w", err)
	}
	return info, nil
}

func (l *leaseStore) exec(ctx context.Context, op, q string, args ...any) (int64, error) {
	var n int64
	err := l.d.retry.Do(ctx, op, func() error {
		r, err := l.d.db.ExecContext(ctx, q, args...)
		if err != nil {
			return interpretError(err)
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return n, nil
}

func (l *leaseStore) Release(ctx context.Context, key any, owner string) (bool, error) {
	if err := l.check(key, 0, false); err != nil {
		return false, err
	}
	n, err := l.exec(ctx, "lease release", l.release, key, owner)
	return n > 0, err
}

func (l *leaseStore) ForceRelease(ctx context.Context, key any) (bool, error) {
	if err := l.check(key, 0, false); err != nil {
		return false, err
	}
	n, err := l.exec(ctx, "lease force release", l.force, key)
	return n > 0, err
}

func (l *leaseStore) Inspect(ctx context.Context, key any) (dialect.LeaseState, error) {
	var st dialect.LeaseState
	if err := l.check(key, 0, false); err != nil {
		return st, err
	}
	var owner sql.NullString
	var exp sql.NullInt64
	var now int64
	err := l.d.db.QueryRowContext(ctx, l.inspect, key).Scan(&owner, &st.Fence, &exp, &now)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("sqlite: lease inspect: %w", interpretError(err))
	}
	st.Exists = true
	st.Owner = owner.String
	if owner.Valid && exp.Valid {
		st.ExpiresAt = msTime(exp.Int64)
		st.Expired = exp.Int64 < now
	}
	return st, nil
}

func (l *leaseStore) ReapExpired(ctx context.Context, limit int) (int64, error) {
	if l.reap == "" {
		return 0, fmt.Errorf("sqlite: lease reap: %w", &notSupported{"reaping leases without an ExpiresAt column"})
	}
	if limit <= 0 {
		return 0, fmt.Errorf("%w: lease reap: limit must be positive", dialect.ErrInvalidConfig)
	}
	return l.exec(ctx, "lease reap", l.reap, limit)
}

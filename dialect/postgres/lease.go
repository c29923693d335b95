package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

type leaseStore struct {
	d    *Dialect
	spec dialect.LeaseTable

	acquire, insert, renew, release, force, inspect, exists, reap string
}

// LeaseStore implements [dialect.Dialect]. Every operation is one
// autocommit statement on the database clock; acquire on a keyed table adds
// an INSERT ... ON CONFLICT DO NOTHING when the row is missing.
func (d *Dialect) LeaseStore(spec dialect.LeaseTable) (dialect.LeaseStore, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	l := &leaseStore{d: d, spec: spec}
	t, key, owner, lockedAt := quote(spec.Table), quote(spec.Key), quote(spec.Owner), quote(spec.LockedAt)
	fenceRet, fenceSet := "0::bigint", ""
	if spec.Fence != "" {
		fence := quote(spec.Fence)
		fenceRet = fmt.Sprintf("COALESCE(%s, 0)", fence)
		fenceSet = fmt.Sprintf(", %s = COALESCE(%s, 0) + 1", fence, fence)
	}
	// Acquire and insert arguments: $1 owner, $2 ttl (microseconds), $3 key.
	// Renew: $1 ttl, $2 key, $3 owner.
	ttl := interval("$2")
	insCols, insVals := fmt.Sprintf("%s, %s, %s", key, owner, lockedAt), "$3, $1, now()"
	if spec.ExpiresAt != "" {
		exp := quote(spec.ExpiresAt)
		l.acquire = fmt.Sprintf("UPDATE %s SET %s = $1, %s = now(), %s = now() + %s%s WHERE %s = $3 AND (%s IS NULL OR %s IS NULL OR %s < now()) RETURNING %s, %s",
			t, owner, lockedAt, exp, ttl, fenceSet, key, owner, exp, exp, fenceRet, exp)
		insCols += ", " + exp
		insVals += ", now() + " + ttl
		l.renew = fmt.Sprintf("UPDATE %s SET %s = now(), %s = GREATEST(now() + %s, %s + interval '1 microsecond') WHERE %s = $2 AND %s = $3 RETURNING %s, %s",
			t, lockedAt, exp, interval("$1"), exp, key, owner, fenceRet, exp)
		l.release = fmt.Sprintf("UPDATE %s SET %s = NULL, %s = NULL WHERE %s = $1 AND %s = $2", t, owner, exp, key, owner)
		l.force = fmt.Sprintf("UPDATE %s SET %s = NULL, %s = NULL WHERE %s = $1 AND %s IS NOT NULL", t, owner, exp, key, owner)
		l.inspect = fmt.Sprintf("SELECT %s, %s, %s, (%s IS NOT NULL AND COALESCE(%s < now(), false)) FROM %s WHERE %s = $1",
			owner, fenceRet, exp, owner, exp, t, key)
		l.reap = fmt.Sprintf(
			"WITH %[1]s AS %[2]s(SELECT %[3]s FROM %[4]s WHERE %[5]s IS NOT NULL AND %[6]s < now() ORDER BY %[3]s LIMIT $1 FOR UPDATE SKIP LOCKED) "+
				"UPDATE %[4]s AS %[7]s SET %[5]s = NULL, %[6]s = NULL FROM %[1]s WHERE %[7]s.%[3]s = %[1]s.%[3]s AND %[7]s.%[5]s IS NOT NULL AND %[7]s.%[6]s < now()",
			cAlias, d.materialized(), key, t, owner, exp, tAlias)
		if spec.Keyed {
			l.insert = fmt.Sprintf("INSERT INTO %s (%%s) VALUES (%%s) ON CONFLICT (%s) DO NOTHING RETURNING %s, %s", t, key, fenceRet, exp)
		}
	} else {
		// Without an expiry column a lease expires at LockedAt + ttl.
		l.acquire = fmt.Sprintf("UPDATE %s SET %s = $1, %s = now()%s WHERE %s = $3 AND (%s IS NULL OR %s IS NULL OR %s < now() - %s) RETURNING %s, %s + %s",
			t, owner, lockedAt, fenceSet, key, owner, lockedAt, lockedAt, ttl, fenceRet, lockedAt, ttl)
		l.renew = fmt.Sprintf("UPDATE %s SET %s = GREATEST(now(), %s + interval '1 microsecond') WHERE %s = $2 AND %s = $3 RETURNING %s, %s + %s",
			t, lockedAt, lockedAt, key, owner, fenceRet, lockedAt, interval("$1"))
		l.release = fmt.Sprintf("UPDATE %s SET %s = NULL WHERE %s = $1 AND %s = $2", t, owner, key, owner)
		l.force = fmt.Sprintf("UPDATE %s SET %s = NULL WHERE %s = $1 AND %s IS NOT NULL", t, owner, key, owner)
		l.inspect = fmt.Sprintf("SELECT %s, %s, NULL::timestamptz, false FROM %s WHERE %s = $1", owner, fenceRet, t, key)
		if spec.Keyed {
			l.insert = fmt.Sprintf("INSERT INTO %s (%%s) VALUES (%%s) ON CONFLICT (%s) DO NOTHING RETURNING %s, %s + %s", t, key, fenceRet, lockedAt, ttl)
		}
	}
	if spec.Keyed {
		if spec.Fence != "" {
			insCols += ", " + quote(spec.Fence)
			insVals += ", 1"
		}
		l.insert = fmt.Sprintf(l.insert, insCols, insVals)
	}
	l.exists = fmt.Sprintf("SELECT true FROM %s WHERE %s = $1", t, key)
	return l, nil
}

func (l *leaseStore) check(op string, key any, owner string, ttl time.Duration, needOwner, needTTL bool) error {
	if err := l.spec.CheckKey(key); err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	if needOwner && owner == "" {
		return fmt.Errorf("%w: postgres: %s: empty owner", dialect.ErrInvalidConfig, op)
	}
	if needTTL && ttl <= 0 {
		return fmt.Errorf("%w: postgres: %s: ttl must be positive, got %v", dialect.ErrInvalidConfig, op, ttl)
	}
	return nil
}

// Acquire implements [dialect.LeaseStore].
func (l *leaseStore) Acquire(ctx context.Context, key any, owner string, ttl time.Duration) (dialect.LeaseInfo, error) {
	var info dialect.LeaseInfo
	if err := l.check("lease acquire", key, owner, ttl, true, true); err != nil {
		return info, err
	}
	args := []any{owner, micros(ttl), key}
	err := l.d.retry.Do(ctx, "lease acquire", func() error {
		var exp time.Time
		ok, err := queryRow(ctx, l.d.db, l.acquire, args, &info.Fence, &exp)
		if err != nil {
			return interpretError(err)
		}
		if !ok && l.spec.Keyed {
			ok, err = queryRow(ctx, l.d.db, l.insert, args, &info.Fence, &exp)
			if err != nil {
				return interpretError(err)
			}
		} else if !ok {
			found, err := queryRow(ctx, l.d.db, l.exists, []any{key}, new(bool))
			if err != nil {
				return interpretError(err)
			}
			if !found {
				return fmt.Errorf("%w: %v", dialect.ErrKeyNotFound, key)
			}
		}
		if !ok {
			return dialect.ErrLeaseHeld
		}
		info.ExpiresAt = exp.UTC()
		return nil
	})
	if err != nil {
		return dialect.LeaseInfo{}, fmt.Errorf("postgres: lease acquire: %w", err)
	}
	return info, nil
}

// Renew implements [dialect.LeaseStore].
func (l *leaseStore) Renew(ctx context.Context, key any, owner string, ttl time.Duration) (dialect.LeaseInfo, error) {
	var info dialect.LeaseInfo
	if err := l.check("lease renew", key, owner, ttl, true, true); err != nil {
		return info, err
	}
	args := []any{micros(ttl), key, owner}
	err := l.d.retry.Do(ctx, "lease renew", func() error {
		var exp time.Time
		ok, err := queryRow(ctx, l.d.db, l.renew, args, &info.Fence, &exp)
		if err != nil {
			return interpretError(err)
		}
		if !ok {
			return dialect.ErrLeaseLost
		}
		info.ExpiresAt = exp.UTC()
		return nil
	})
	if err != nil {
		return dialect.LeaseInfo{}, fmt.Errorf("postgres: lease renew: %w", err)
	}
	return info, nil
}

func (l *leaseStore) exec(ctx context.Context, op, q string, args ...any) (int64, error) {
	var n int64
	err := l.d.retry.Do(ctx, op, func() error {
		var err error
		n, err = l.d.db.exec(ctx, q, args...)
		return interpretError(err)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: %s: %w", op, err)
	}
	return n, nil
}

// Release implements [dialect.LeaseStore].
func (l *leaseStore) Release(ctx context.Context, key any, owner string) (bool, error) {
	if err := l.check("lease release", key, owner, 0, true, false); err != nil {
		return false, err
	}
	n, err := l.exec(ctx, "lease release", l.release, key, owner)
	return n > 0, err
}

// ForceRelease implements [dialect.LeaseStore].
func (l *leaseStore) ForceRelease(ctx context.Context, key any) (bool, error) {
	if err := l.check("lease force release", key, "", 0, false, false); err != nil {
		return false, err
	}
	n, err := l.exec(ctx, "lease force release", l.force, key)
	return n > 0, err
}

// Inspect implements [dialect.LeaseStore]. Without an ExpiresAt column the
// expiry is unknown (the TTL is the holder's) and Expired is false.
func (l *leaseStore) Inspect(ctx context.Context, key any) (dialect.LeaseState, error) {
	var st dialect.LeaseState
	if err := l.check("lease inspect", key, "", 0, false, false); err != nil {
		return st, err
	}
	var owner sql.NullString
	var exp sql.NullTime
	err := l.d.retry.Do(ctx, "lease inspect", func() error {
		var err error
		st.Exists, err = queryRow(ctx, l.d.db, l.inspect, []any{key}, &owner, &st.Fence, &exp, &st.Expired)
		return interpretError(err)
	})
	if err != nil {
		return dialect.LeaseState{}, fmt.Errorf("postgres: lease inspect: %w", err)
	}
	st.Owner = owner.String
	if owner.Valid && exp.Valid {
		st.ExpiresAt = exp.Time.UTC()
	}
	return st, nil
}

// ReapExpired implements [dialect.LeaseStore]. It needs an ExpiresAt
// column; the rows and their fences stay.
func (l *leaseStore) ReapExpired(ctx context.Context, limit int) (int64, error) {
	if l.reap == "" {
		return 0, fmt.Errorf("postgres: lease reap: reaping leases without an ExpiresAt column: %w", dialect.ErrNotSupported)
	}
	if limit <= 0 {
		return 0, fmt.Errorf("%w: postgres: lease reap: limit must be positive", dialect.ErrInvalidConfig)
	}
	return l.exec(ctx, "lease reap", l.reap, int64(limit))
}

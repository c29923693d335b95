package tasklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/checkonce"
	"github.com/claimlock/claimlock/internal/detach"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
)

// releaseTimeout bounds the clean-up statements the library runs on its own
// (releasing an acquisition whose outcome is unknown, releasing after Do).
const releaseTimeout = 5 * time.Second

// Locker hands out leases on the keys of one table. It is safe for
// concurrent use; a process usually holds one per table.
type Locker struct {
	d        dialect.Dialect
	cfg      Config
	ls       store.LeaseStore
	verified *checkonce.Check // the table's schema check
}

// New validates cfg and prepares the lease statements of cfg.Table on d.
// Errors wrap [dialect.ErrInvalidConfig] and name the bad field.
func New(d dialect.Dialect, cfg Config) (*Locker, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: tasklock: nil dialect", dialect.ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.Table.Validate(); err != nil {
		return nil, fmt.Errorf("tasklock: Config.Table: %w", err)
	}
	ls, err := store.OpenLeases(d, cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("tasklock: Config.Table: %w", err)
	}
	return &Locker{d: d, cfg: cfg, ls: ls, verified: checkonce.New()}, nil
}

// TTL returns the configured TTL.
func (k *Locker) TTL() time.Duration { return k.cfg.TTL }

// CheckKey reports whether key suits the lease table (the right type, not
// empty, not longer than the key column) without touching the database. The
// error wraps [dialect.ErrInvalidConfig].
func (k *Locker) CheckKey(key any) error { return k.checkKey(key) }

func (k *Locker) checkKey(key any) error {
	if err := k.cfg.Table.CheckKey(key); err != nil {
		return fmt.Errorf("tasklock: key: %w", err)
	}
	return nil
}

// Acquire tries once to take the lease on key: one compare-and-set on the
// database clock under a fresh owner token. It returns [dialect.ErrLeaseHeld]
// when someone holds the lease unexpired, [dialect.ErrKeyNotFound] when a task
// table has no row with key, and an error wrapping
// [dialect.ErrInvalidConfig] for a key of the wrong type, empty or longer
// than the key column. The lease's local deadline starts when the statement
// is sent; call [Lease.KeepAlive] to renew it in the background.
//
// If the statement fails in a way that leaves its outcome unknown (a
// cancelled context, a broken connection), Acquire releases the token it
// may have taken, so an unseen acquisition does not block the key for a
// whole TTL. It waits for that release only while ctx lasts (then it goes
// on in the background), so a stalled server never holds Acquire past
// ctx's deadline. A release that finds no hold is tried again over the
// next few seconds: the server may still make the acquisition after
// Acquire returned (MySQL finishes a statement whose connection the driver
// closed).
//
// Until one succeeds, each Acquire first checks the table against the
// catalog: a missing table or column,
// or an owner column too short for a token, is an error wrapping
// [dialect.ErrInvalidConfig] before any lease is written.
//
// An Acquire that failed because ctx ended matches ctx's error, whatever
// the driver reported (a statement it never sent, the context having
// ended, is a "bad connection" to go-sql-driver/mysql).
func (k *Locker) Acquire(ctx context.Context, key any) (*Lease, error) {
	start := time.Now()
	l, err := k.acquire(ctx, key)
	err = errclass.EndedWith(ctx, err)
	k.observeAcquire(ctx, key, l, err, start)
	return l, err
}

func (k *Locker) acquire(ctx context.Context, key any) (*Lease, error) {
	if err := k.checkKey(key); err != nil {
		return nil, err
	}
	if err := k.Verify(ctx); err != nil {
		return nil, err
	}
	owner := store.NewToken()
	stamped := k.cfg.Table.Owner == ""
	if stamped {
		owner = "" // the store reads the lease's stamp back instead
	}
	start := k.cfg.Now()
	info, err := k.ls.Acquire(ctx, key, owner, k.cfg.TTL)
	if err != nil {
		// An acquisition of unknown outcome is released by its owner; a
		// stamped one cannot be (its stamp never came back) and expires.
		if !stamped && !errors.Is(err, dialect.ErrLeaseHeld) && !errors.Is(err, dialect.ErrKeyNotFound) && !errors.Is(err, dialect.ErrInvalidConfig) {
			var late time.Time // a late commit matters until the lease would expire
			if errors.Is(err, dialect.ErrOutcomeUnknown) {
				late = time.Now().Add(k.cfg.TTL)
			}
			k.cleanup(ctx, key, owner, late)
		}
		return nil, fmt.Errorf("tasklock: acquire %v: %w", key, err)
	}
	if took := k.cfg.Now().Sub(start); took >= k.cfg.TTL-k.cfg.SafetyMargin {
		// The statement outlived TTL - SafetyMargin: the lease would be
		// past its local deadline already. Give it back rather than hand
		// out a lease whose holder could not stop in time.
		k.cleanup(ctx, key, info.Owner, time.Time{})
		return nil, fmt.Errorf("tasklock: acquire %v: the statement took %v, more than TTL - SafetyMargin: %w: %w", key, took, dialect.ErrLeaseLost, dialect.ErrLocalDeadline)
	}
	l := newLease(ctx, k, key, info.Owner, info, start)
	k.cfg.Logger.Debug("tasklock: acquired", "key", key, "fence", info.Fence)
	return l, nil
}

// Verify checks the lease table against the database catalog unless a
// check already passed. Acquire calls it; call it at start-up to fail
// fast.
//
// Callers that start together run one check between them: a caller that
// finds another's check in progress waits for it (while its ctx lasts),
// and runs its own only if that one failed.
func (k *Locker) Verify(ctx context.Context) error {
	return k.verified.Run(ctx, "tasklock: verify schema", func(ctx context.Context) error {
		if err := k.ls.VerifySchema(ctx); err != nil {
			return fmt.Errorf("tasklock: verify schema: %w", err)
		}
		return nil
	})
}

// cleanup releases owner's possible hold on key. The release runs on its
// own deadline (releaseTimeout), not ctx's: the acquisition may have failed
// because ctx ended. The caller waits for it only while ctx lasts, so
// Acquire still returns by its context's deadline when the server stalls;
// past that the release finishes in the background.
//
// With a non-zero late (an acquisition of unknown outcome), a release that
// found no hold is tried again after each of [detach.LatePauses] until one
// releases it, or until late: the server may still be running the
// acquisition, which a client that stopped waiting for it cannot stop
// (MySQL finishes a statement whose connection the driver closed; a
// PostgreSQL cancel request can come too late), and its lease would
// otherwise keep the key from every other holder until the TTL. A release
// that fails in a way that may pass (an outage, a server out of
// connections: cut-short statements leave the server finishing them on
// connections the client has closed) is tried again the same way; only a
// permanent error ends the tries.
func (k *Locker) cleanup(ctx context.Context, key any, owner string, late time.Time) {
	detach.Run(ctx, releaseTimeout, func(fctx context.Context) {
		ok, err := k.ls.Release(fctx, key, owner, time.Time{})
		if err != nil && (late.IsZero() || dialect.IsPermanent(err)) {
			k.cfg.Logger.Warn("tasklock: could not release an acquisition of unknown outcome; it expires after the TTL", "key", key, "err", err)
			return
		}
		if ok || late.IsZero() {
			return
		}
		detach.Late(ctx, 2*releaseTimeout, late, func(ctx context.Context) bool {
			ok, err := k.ls.Release(ctx, key, owner, time.Time{})
			switch {
			case err != nil && dialect.IsPermanent(err):
				k.cfg.Logger.Warn("tasklock: could not release an acquisition of unknown outcome; it expires after the TTL", "key", key, "err", err)
				return true
			case err != nil:
				k.cfg.Logger.Debug("tasklock: a late release of an acquisition of unknown outcome failed; tried again", "key", key, "err", err)
			case ok:
				k.cfg.Logger.Info("tasklock: released an acquisition of unknown outcome, which the server made after the acquisition had returned", "key", key)
			}
			return ok
		})
	})
}

// AcquireWait calls [Locker.Acquire] until it succeeds, sleeping between
// tries with jittered exponential backoff (PollInterval doubling up to
// MaxPollInterval). It gives up when ctx ends, returning an error matching
// both [dialect.ErrLeaseHeld] and ctx's error. Errors other than
// [dialect.ErrLeaseHeld] and retryable conflicts ([dialect.IsRetryable]) end the
// wait at once.
func (k *Locker) AcquireWait(ctx context.Context, key any) (*Lease, error) {
	for n := 0; ; n++ {
		l, err := k.Acquire(ctx, key)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, dialect.ErrLeaseHeld) && !dialect.IsRetryable(err) {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("tasklock: acquire %v: %w", key, errors.Join(dialect.ErrLeaseHeld, ctx.Err()))
			}
			return nil, err
		}
		if !loop.Sleep(ctx, loop.Backoff(n, k.cfg.PollInterval, k.cfg.MaxPollInterval), nil) {
			return nil, fmt.Errorf("tasklock: acquire %v: %w", key, errors.Join(dialect.ErrLeaseHeld, ctx.Err()))
		}
	}
}

// ForceRelease frees the lease on key whoever holds it, and reports whether
// it was held. It is an operator's tool for a holder known to be dead: a
// live holder keeps working until its next renewal fails, so use it only
// when fences guard the protected writes.
func (k *Locker) ForceRelease(ctx context.Context, key any) (bool, error) {
	if err := k.checkKey(key); err != nil {
		return false, err
	}
	start := time.Now()
	ok, err := k.ls.ForceRelease(ctx, key)
	k.observe(ctx, OpForceRelease, key, "", 0, ok, err, start)
	if err != nil {
		return false, fmt.Errorf("tasklock: force release %v: %w", key, err)
	}
	k.cfg.Logger.Warn("tasklock: lease force-released", "key", key, "was_held", ok)
	return ok, nil
}

// ReleaseOwner frees the lease on key if owner still holds it, and reports
// whether it did. It is [Locker.ForceRelease] for the holder an operator
// inspected ([Locker.Inspect], [Locker.Held]): a lease taken again
// meanwhile by someone else stays held. It is reported as OpForceRelease.
func (k *Locker) ReleaseOwner(ctx context.Context, key any, owner string) (bool, error) {
	if err := k.checkKey(key); err != nil {
		return false, err
	}
	if owner == "" {
		return false, fmt.Errorf("tasklock: release owner %v: %w: empty owner", key, dialect.ErrInvalidConfig)
	}
	start := time.Now()
	ok, err := k.ls.Release(ctx, key, owner, time.Time{})
	k.observe(ctx, OpForceRelease, key, owner, 0, ok, err, start)
	if err != nil {
		return false, fmt.Errorf("tasklock: release owner %v: %w", key, err)
	}
	k.cfg.Logger.Warn("tasklock: lease force-released", "key", key, "owner", owner, "was_held", ok)
	return ok, nil
}

// State is a lease row as [Locker.Inspect] reads it, on the database
// clock.
type State struct {
	// Owner is the owner token, "" when free (the stamp, for a table
	// without an owner column).
	Owner string
	// Fence is the fence column (0 without one).
	Fence int64
	// ExpiresAt is the expiry on the database clock (zero when free).
	// Without an ExpiresAt column it is the lock time plus the Locker's
	// TTL: the holder's expiry when every holder of the key uses that TTL.
	ExpiresAt time.Time
	// Expired is true when the lease has an owner but its expiry passed, by
	// the database clock: without an ExpiresAt column, when the Locker's
	// TTL has passed since the lock time, so that its Acquire would take
	// the lease.
	Expired bool
	// Exists is false when no row has the key.
	Exists bool
	// Status is the value of the table's Status column as text, "" without
	// one or when NULL: whether the task is finished, for an operator.
	// [Locker.Inspect] reads it; [Locker.Held] does not.
	Status string
}

// Inspect reads the lease row of key as the database sees it now. On a
// table without an ExpiresAt column the expiry is reckoned from the lock
// time and the Locker's TTL (see [State]).
func (k *Locker) Inspect(ctx context.Context, key any) (State, error) {
	if err := k.checkKey(key); err != nil {
		return State{}, err
	}
	st, err := k.ls.Inspect(ctx, key, k.cfg.TTL)
	if err != nil {
		return State{}, fmt.Errorf("tasklock: inspect %v: %w", key, err)
	}
	return State(st), nil
}

// MaxHeldLimit is the largest limit [Locker.Held] takes.
const MaxHeldLimit = store.MaxHeldLimit

// Holder is a held lease as [Locker.Held] lists it, on the database clock.
type Holder struct {
	// Key is the lease's key: a string for text keys, an int64 otherwise.
	Key any
	// State is its owner, fence, expiry and whether it expired (Exists is
	// true).
	State
	// Remaining is the time left until its expiry (zero once expired).
	Remaining time.Duration
}

// Held lists up to limit (at most [MaxHeldLimit]) leases of the table that
// have an owner, soonest expiry first, with the time each has left, both on
// the database clock. With an ExpiresAt column it reads the expiry index.
// Without one it lists the leases with a lock time (and an owner, where
// the table has an owner column), oldest lock first, each expiring at its
// lock time plus the Locker's TTL (see [State]); that reads the whole
// table unless the lock time column is indexed. It is for operators, not
// for loops.
func (k *Locker) Held(ctx context.Context, limit int) ([]Holder, error) {
	held, err := k.ls.Held(ctx, limit, k.cfg.TTL)
	if err != nil {
		return nil, fmt.Errorf("tasklock: held: %w", err)
	}
	out := make([]Holder, len(held))
	for i, h := range held {
		out[i] = Holder{Key: h.Key, State: State(h.LeaseState), Remaining: h.Remaining}
	}
	return out, nil
}

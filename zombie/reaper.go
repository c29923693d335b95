package zombie

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
)

// releaseTimeout bounds the lease release Run makes on its way out, after its
// own context has ended.
const releaseTimeout = 5 * time.Second

// Result is what one sweep did.
type Result struct {
	// Returned rows went back to pending with their token cleared (for a
	// [LeaseReaper]: expired leases cleared).
	Returned int64
	// Parked rows were set to the failed status because their attempts
	// reached [Config.MaxAttempts].
	Parked int64
	// Statements is the number of bounded statements the sweep ran.
	Statements int
	// Elapsed is the sweep's duration on the local clock.
	Elapsed time.Duration
}

// Reaper returns stale claims of one claim table to pending and parks poison
// rows. It is safe for concurrent use.
type Reaper struct {
	cs      store.ClaimStore
	table   string
	cols    []string // scope columns
	scope   []any
	timeout time.Duration
	limit   int
	maxAtt  int
	locker  *tasklock.Locker
	key     any
	logger  *slog.Logger
	obs     observe.Observer
	// verified is set once the table passed VerifySchema.
	verified atomic.Bool
	// grace allows for the reaper's own outages (see outageGrace).
	grace outageGrace
}

// New validates cc (exactly as the claimers of the table see it, through
// [claim.Config.Resolve]) and cfg, and prepares the reaper's statements on d.
// The reaper sweeps the rows cc claims: those of its scope, unless
// [Config.AllScopes] is set. Errors wrap [dialect.ErrInvalidConfig] and name the
// field. New does not touch the database.
func New(d dialect.Dialect, cc claim.Config, cfg Config) (*Reaper, error) {
	if d == nil {
		return nil, invalid("Dialect", "is nil")
	}
	spec, err := cc.Resolve()
	if err != nil {
		return nil, fmt.Errorf("zombie: %w", err)
	}
	if cfg.Timeout <= 0 {
		return nil, invalid("Config.Timeout", "must be positive, got %v", cfg.Timeout)
	}
	limit, err := batchLimit("Config.BatchLimit", cfg.BatchLimit)
	if err != nil {
		return nil, err
	}
	// The table is described once: the parking rule is the claimers'.
	maxAtt, err := spec.MaxAttempts(cc.MaxAttempts)
	if err != nil {
		return nil, fmt.Errorf("zombie: %w", err)
	}
	if cfg.Locker != nil && cfg.LockKey == nil {
		return nil, invalid("Config.LockKey", "is required with Locker")
	}
	if cfg.Locker != nil {
		if err := cfg.Locker.CheckKey(cfg.LockKey); err != nil {
			return nil, invalid("Config.LockKey", "%v", err)
		}
	}
	if cfg.Locker == nil && cfg.LockKey != nil {
		return nil, invalid("Config.LockKey", "is set but Locker is nil")
	}
	cs, err := store.OpenClaims(d, spec)
	if err != nil {
		return nil, fmt.Errorf("zombie: %w", err)
	}
	r := &Reaper{
		cs: cs, table: spec.Table, cols: spec.Scope, timeout: cfg.Timeout, limit: limit,
		maxAtt: maxAtt, locker: cfg.Locker, key: cfg.LockKey,
		logger: logger(cfg.Logger).With("table", spec.Table), obs: cfg.Observer,
	}
	if len(spec.Scope) > 0 && !cfg.AllScopes {
		r.scope = slices.Clone(cc.ScopeValues)
	}
	return r, nil
}

// Stale lists up to limit (at most [claim.MaxListLimit]) rows that the
// next sweep would take: rows of the reaper's scope (every scope with
// Config.AllScopes) processing for longer than the timeout, oldest claim
// or heartbeat first, on the database clock. On a claimed-at column
// coarser than the clock it errs towards listing a row the sweep leaves
// for its next round. It changes nothing: it is for an operator who
// confirms a sweep, not for loops.
func (r *Reaper) Stale(ctx context.Context, limit int) ([]claim.RowInfo, error) {
	older := r.grace.timeout(r.timeout, time.Now())
	rows, err := r.cs.List(ctx, &store.ListParams{Set: store.SetProcessing, ScopeValues: r.scope, OlderThan: older, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("zombie: stale %s: %w", r.table, err)
	}
	out := make([]claim.RowInfo, len(rows))
	for i, row := range rows {
		out[i] = claim.RowInfo(row)
	}
	return out, nil
}

// Sweep runs bounded statements, each touching at most BatchLimit stale
// rows, oldest claim first (parking those at MaxAttempts, returning the
// others to pending), until one touches fewer than BatchLimit rows or ctx
// ends. It
// returns what it did, also when it fails: rows counted were committed.
// Errors are the dialect's (a deadlock that outlived its retries matches
// [dialect.IsRetryable]) or ctx's.
//
// A row is stale when it has been processing longer than the timeout since
// its claim or last heartbeat, on the database clock. Sweep never takes a
// row whose worker heartbeats within the timeout; it ignores the Locker
// (only [Reaper.Run] takes the lease).
//
// After the reaper's own sweeps failed (the database was away for it, and
// so, most likely, for the holders, which could neither heartbeat nor ack),
// the first good sweep and those within one timeout of it add the time
// since the last good sweep before the failures to the timeout: rows that
// went stale only during the outage are left to their holders, whose
// heartbeats and acks land once they reconnect. Rows of holders that died
// meanwhile are taken once that window ends, at most one timeout late.
func (r *Reaper) Sweep(ctx context.Context) (Result, error) {
	start := time.Now()
	res, err := r.sweep(ctx, r.grace.timeout(r.timeout, start))
	res.Elapsed = time.Since(start)
	if grace := r.grace.done(start, time.Now(), r.timeout, err != nil && ctx.Err() == nil); grace > 0 {
		r.logger.Info("claimlock: reaper reached the database again; rows gone stale during its outage are left to their holders for one timeout",
			"outage", grace, "timeout", r.timeout)
	}
	observeSweep(ctx, r.obs, OpSweep, r.table, r.cols, r.scope, start, res, err)
	if err != nil {
		err = fmt.Errorf("zombie: sweep %s: %w", r.table, err)
		if ctx.Err() == nil {
			r.logger.Warn("claimlock: reaper sweep failed", "returned", res.Returned, "parked", res.Parked, "err", err)
		}
		return res, err
	}
	switch {
	case res.Parked > 0:
		r.logger.Warn("claimlock: reaper parked rows that reached MaxAttempts", "parked", res.Parked, "returned", res.Returned,
			"max_attempts", r.maxAtt, "elapsed", res.Elapsed)
	case res.Returned > 0:
		r.logger.Info("claimlock: reaper returned stale rows to pending", "returned", res.Returned, "elapsed", res.Elapsed)
	default:
		r.logger.Debug("claimlock: reaper found nothing stale", "elapsed", res.Elapsed)
	}
	return res, nil
}

func (r *Reaper) sweep(ctx context.Context, timeout time.Duration) (Result, error) {
	var res Result
	// The first sweep verifies the table, which also tells the store the
	// precision of the claimed-at column; until then every staleness test
	// errs a second towards "still held".
	if !r.verified.Load() {
		if err := r.cs.VerifySchema(ctx); err != nil {
			return res, fmt.Errorf("verify schema: %w", err)
		}
		r.verified.Store(true)
	}
	p := &store.ReapParams{Timeout: timeout, Limit: r.limit, MaxAttempts: r.maxAtt, ScopeValues: r.scope}
	perCall := 1
	if r.maxAtt > 0 {
		perCall = 2 // park, then return
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, context.Cause(ctx)
		}
		rr, err := r.cs.Reap(ctx, p)
		res.Statements += perCall
		res.Returned += rr.Returned
		res.Parked += rr.Parked
		if err != nil {
			if ctx.Err() != nil {
				return res, errors.Join(err, context.Cause(ctx))
			}
			return res, err
		}
		if rr.Returned < int64(r.limit) && rr.Parked < int64(r.limit) {
			return res, nil
		}
	}
}

// Run sweeps at once and then every interval (with ±20% jitter, so that a
// fleet does not sweep in step) until ctx ends, when it returns nil. A
// failed sweep is logged and reported to the Observer; the next tick
// tries again.
//
// With [Config.Locker], each tick first tries once (without waiting) to
// take the lease on LockKey; only the holder sweeps, keeping the lease
// alive between ticks, and each sweep runs under the lease's context, so a
// lost lease stops it between or during statements. The lease is released
// when Run returns. An invalid interval or lease key returns an error
// wrapping [dialect.ErrInvalidConfig].
func (r *Reaper) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return invalid("interval", "must be positive, got %v", interval)
	}
	var lease *tasklock.Lease
	drop := func() {
		if lease == nil {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		if _, err := lease.Release(rctx); err != nil {
			r.logger.Warn("claimlock: reaper could not release its lease; it expires after the TTL", "key", r.key, "err", err)
		}
		cancel()
		lease = nil
		r.observeLeader(ctx, false)
	}
	defer drop()
	return loop.Loop{}.Run(ctx, func(ctx context.Context) loop.Next {
		if r.locker == nil {
			_, _ = r.Sweep(ctx)
			return loop.After(jitter(interval))
		}
		if lease != nil && lease.Err() != nil {
			r.logger.Warn("claimlock: reaper lost its lease", "key", r.key, "err", lease.Err())
			drop()
		}
		if lease == nil {
			l, err := r.locker.Acquire(ctx, r.key)
			switch {
			case err == nil:
				lease = l
				lease.KeepAlive(context.WithoutCancel(ctx))
				r.logger.Debug("claimlock: reaper took the lease", "key", r.key, "fence", l.Fence())
				r.observeLeader(ctx, true)
			case ctx.Err() != nil:
				return loop.End(nil)
			case errors.Is(err, dialect.ErrLeaseHeld):
			case errors.Is(err, dialect.ErrInvalidConfig):
				return loop.End(fmt.Errorf("zombie: run: %w", err))
			default:
				r.logger.Warn("claimlock: reaper could not try its lease", "key", r.key, "err", err)
			}
		}
		if lease != nil {
			lctx, cancel := lease.Context(ctx)
			_, _ = r.Sweep(lctx)
			cancel()
		}
		return loop.After(jitter(interval))
	})
}

// jitter returns d scaled by a uniform factor in [0.8, 1.2].
func jitter(d time.Duration) time.Duration { return loop.Spread(d, d*2/5) }

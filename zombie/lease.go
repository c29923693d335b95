package zombie

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
)

// LeaseReaper clears expired leases of a lease table, so that tables of
// keyed leases do not keep the tokens of dead holders. It clears the owner
// but keeps the row, so each key's fence keeps increasing across
// acquisitions. It is optional: an expired lease can be acquired whether or
// not it was reaped. It is safe for concurrent use.
type LeaseReaper struct {
	ls     store.LeaseStore
	table  string
	limit  int
	logger *slog.Logger
	obs    observe.Observer
	// verified is set once the table passed VerifySchema.
	verified atomic.Bool
}

// NewLeaseReaper validates table and cfg and prepares the statements on d.
// The table needs an ExpiresAt column: without one a lease's expiry depends
// on the TTL of whoever looks, which a reaper cannot know. Errors wrap
// [dialect.ErrInvalidConfig] and name the field.
func NewLeaseReaper(d dialect.Dialect, table dialect.LeaseTable, cfg LeaseConfig) (*LeaseReaper, error) {
	if d == nil {
		return nil, invalid("Dialect", "is nil")
	}
	if err := table.Validate(); err != nil {
		return nil, fmt.Errorf("zombie: lease table: %w", err)
	}
	if table.ExpiresAt == "" {
		return nil, invalid("LeaseTable.ExpiresAt", "is required to tell expired leases without knowing their TTL")
	}
	limit, err := batchLimit("LeaseConfig.BatchLimit", cfg.BatchLimit)
	if err != nil {
		return nil, err
	}
	ls, err := store.OpenLeases(d, table)
	if err != nil {
		return nil, fmt.Errorf("zombie: lease table: %w", err)
	}
	return &LeaseReaper{
		ls: ls, table: table.Table, limit: limit,
		logger: logger(cfg.Logger).With("table", table.Table), obs: cfg.Observer,
	}, nil
}

// Sweep clears expired leases (owner set, expiry passed on the database
// clock) with bounded statements of at most BatchLimit leases each, until
// one clears fewer or ctx ends, and returns how many it cleared, also when
// it fails. Live leases are never touched.
func (r *LeaseReaper) Sweep(ctx context.Context) (int64, error) {
	start := time.Now()
	var res Result
	var err error
	// The first sweep verifies the table, which also tells the store the
	// precision of its time columns; until then every expiry test errs a
	// second towards "still held".
	if !r.verified.Load() {
		if err = r.ls.VerifySchema(ctx); err == nil {
			r.verified.Store(true)
		} else {
			err = fmt.Errorf("verify schema: %w", err)
		}
	}
	for err == nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
			break
		}
		var n int64
		n, err = r.ls.ReapExpired(ctx, r.limit)
		res.Statements++
		res.Returned += n
		if err != nil || n < int64(r.limit) {
			break
		}
	}
	res.Elapsed = time.Since(start)
	observeSweep(ctx, r.obs, OpLeaseSweep, r.table, nil, nil, start, res, err)
	if err != nil {
		err = fmt.Errorf("zombie: lease sweep %s: %w", r.table, err)
		if ctx.Err() == nil {
			r.logger.Warn("claimlock: lease reaper sweep failed", "cleared", res.Returned, "err", err)
		}
		return res.Returned, err
	}
	if res.Returned > 0 {
		r.logger.Info("claimlock: lease reaper cleared expired leases", "cleared", res.Returned, "elapsed", res.Elapsed)
	}
	return res.Returned, nil
}

// Run sweeps at once and then every interval (with ±20% jitter) until ctx
// ends, when it returns nil. Failed sweeps are logged and reported to
// the Observer. A non-positive interval returns an error wrapping
// [dialect.ErrInvalidConfig].
func (r *LeaseReaper) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return invalid("interval", "must be positive, got %v", interval)
	}
	return loop.Loop{}.Run(ctx, func(ctx context.Context) loop.Next {
		_, _ = r.Sweep(ctx)
		return loop.After(jitter(interval))
	})
}

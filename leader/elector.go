package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/tasklock"
)

// ErrNotLeader is what [Elector.IsLeader] returns while this process does
// not lead.
var ErrNotLeader = errors.New("leader: not the leader")

// Config configures an [Elector]. Table, Name and TTL are required; every
// other zero value means the documented default. [New] validates it and
// names the first bad field in an error wrapping
// [dialect.ErrInvalidConfig].
type Config struct {
	// Table is the keyed lease table the leader lease lives in
	// (tasklock.KeyTable, made by tasklock.CreateTable). Required.
	Table dialect.LeaseTable
	// Name is the election: the lease's key. Every process that competes
	// for the same leadership uses the same Name. Required.
	Name string
	// TTL is how long the leader lease holds without a renewal: how soon
	// another process takes over after the leader died. Required.
	TTL time.Duration
	// RenewInterval and SafetyMargin are the lease's (see
	// tasklock.Config): zero means TTL/3 and TTL/10.
	RenewInterval, SafetyMargin time.Duration
	// RetryInterval is how often a follower tries to take the lease,
	// with ±20% jitter. Zero means TTL/4.
	RetryInterval time.Duration
	// Logger receives records of leadership taken and lost. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the local clock for the lease's local deadline (see
	// tasklock.Config.Now). Nil means time.Now.
	Now func() time.Time
}

// Term is one tenure of leadership of this process.
type Term struct {
	// Fence is the lease's fencing token: strictly greater than that of
	// every earlier term of the election, in any process.
	Fence int64
	// Lease is the leader lease (prefer the context Run gives to its own
	// methods).
	Lease *tasklock.Lease
}

// Elector competes for one leadership. It is safe for concurrent use.
type Elector struct {
	cfg    Config
	locker *tasklock.Locker

	mu   sync.Mutex
	term *Term // the current term, nil when not leading
}

// New validates cfg and prepares the lease on d. It does not touch the
// database.
func New(d dialect.Dialect, cfg Config) (*Elector, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: leader: nil dialect", dialect.ErrInvalidConfig)
	}
	if cfg.Name == "" {
		return nil, fmt.Errorf("%w: leader: Config.Name is empty", dialect.ErrInvalidConfig)
	}
	if !cfg.Table.Keyed {
		return nil, fmt.Errorf("%w: leader: Config.Table must be a keyed lease table (tasklock.KeyTable)", dialect.ErrInvalidConfig)
	}
	if cfg.RetryInterval < 0 {
		return nil, fmt.Errorf("%w: leader: Config.RetryInterval must not be negative, got %v", dialect.ErrInvalidConfig, cfg.RetryInterval)
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = cfg.TTL / 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	locker, err := tasklock.New(d, tasklock.Config{
		Table: cfg.Table, TTL: cfg.TTL, RenewInterval: cfg.RenewInterval, SafetyMargin: cfg.SafetyMargin,
		Logger: cfg.Logger, Now: cfg.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("leader: %w", err)
	}
	if err := locker.CheckKey(cfg.Name); err != nil {
		return nil, fmt.Errorf("leader: Config.Name: %w", err)
	}
	return &Elector{cfg: cfg, locker: locker}, nil
}

// Run competes for leadership until ctx ends, and calls fn each time this
// process becomes the leader, with a context that is cancelled when
// leadership is lost (the lease lost or past its local deadline) or ctx
// ends. When fn returns, leadership is given up (another process may take
// it at once) and Run competes again, after RetryInterval if fn failed.
// Run returns nil when ctx ends, and an error wrapping
// [dialect.ErrInvalidConfig] for a table that does not fit.
func (e *Elector) Run(ctx context.Context, fn func(ctx context.Context, term Term) error) error {
	if fn == nil {
		return fmt.Errorf("%w: leader: run: nil fn", dialect.ErrInvalidConfig)
	}
	log := e.cfg.Logger.With("election", e.cfg.Name)
	again := func() loop.Next { return loop.After(jitter(e.cfg.RetryInterval)) }
	return loop.Loop{}.Run(ctx, func(ctx context.Context) loop.Next {
		l, err := e.locker.Acquire(ctx, e.cfg.Name)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return loop.End(nil)
		case errors.Is(err, dialect.ErrLeaseHeld):
			return again()
		case dialect.IsPermanent(err):
			return loop.End(fmt.Errorf("leader: %w", err))
		default:
			log.Warn("leader: could not try the lease", "err", err)
			return again()
		}
		if ferr := e.lead(ctx, l, fn, log); ferr != nil && ctx.Err() == nil {
			log.Warn("leader: the leader's work failed; competing again", "err", ferr)
			return again()
		}
		return loop.Next{} // compete again at once
	})
}

// lead runs one term: fn under the lease's context, then the release.
func (e *Elector) lead(ctx context.Context, l *tasklock.Lease, fn func(context.Context, Term) error, log *slog.Logger) (err error) {
	l.KeepAlive(context.WithoutCancel(ctx))
	term := &Term{Fence: l.Fence(), Lease: l}
	lctx, cancel := l.Context(ctx)
	e.mu.Lock()
	e.term = term
	e.mu.Unlock()
	log.Info("leader: leading", "fence", term.Fence)
	defer func() {
		cancel()
		// Not leading any more before the lease is released: IsLeader
		// must never say yes while another process may lead.
		e.mu.Lock()
		e.term = nil
		e.mu.Unlock()
		lost := l.Err()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		if _, rerr := l.Release(rctx); rerr != nil {
			log.Warn("leader: could not release the lease; it expires after the TTL", "err", rerr)
		}
		if lost != nil && errors.Is(lost, dialect.ErrLeaseLost) {
			log.Warn("leader: leadership lost", "fence", term.Fence, "err", lost)
			if err == nil || errors.Is(err, context.Canceled) {
				err = nil // a loss is not the work's failure
			}
			return
		}
		log.Info("leader: stepped down", "fence", term.Fence)
	}()
	return fn(lctx, *term)
}

// Campaign competes for leadership until ctx ends, holding it while it
// can: [Elector.Run] with work that waits for the end of the term. Use it
// with [Elector.IsLeader] (gocron's Elector), in a goroutine of its own.
func (e *Elector) Campaign(ctx context.Context) error {
	return e.Run(ctx, func(ctx context.Context, _ Term) error {
		<-ctx.Done()
		return nil
	})
}

// Leader returns the current term, and false when this process does not
// lead. The term's lease is checked against its local deadline, so a
// process resumed after a freeze is not told it leads.
func (e *Elector) Leader() (Term, bool) {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil || t.Lease.Err() != nil {
		return Term{}, false
	}
	if d, _ := t.Lease.Deadline(); !e.cfg.Now().Before(d) {
		return Term{}, false
	}
	return *t, true
}

// IsLeader returns nil while this process leads, and [ErrNotLeader]
// otherwise. It is gocron v2's Elector method: gocron calls it before each
// run of each job.
func (e *Elector) IsLeader(context.Context) error {
	if _, ok := e.Leader(); !ok {
		return ErrNotLeader
	}
	return nil
}

// jitter returns d scaled by a uniform factor in [0.8, 1.2].
func jitter(d time.Duration) time.Duration { return loop.Spread(d, d*2/5) }

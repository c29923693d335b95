package claim

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/checkonce"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
)

// Claimer claims batches of pending rows from one table (and scope). It is
// safe for concurrent use: any number of goroutines and processes may claim
// from the same table, and no row is ever held by two batches at once.
type Claimer[T any] struct {
	core    *core
	fields  func(*T) []any
	nfields int
}

// core is the part of a claimer that does not depend on the row type.
type core struct {
	d           dialect.Dialect
	cs          store.ClaimStore // base, wrapped for the observer
	base        store.ClaimStore // the store itself, which scope views share
	held        store.Holder     // held claims (held.go); nil where the store has none
	spec        dialect.ClaimTable
	scope       []any
	strategy    dialect.Strategy
	worker      string // Config.Worker or its default, written to the Worker column
	limit       int
	maxAttempts int
	backoff     func(attempts int) time.Duration // nil without a RunAt column
	ackDelay    time.Duration                    // 0: acks are written at once
	ackBuffer   int
	reapTimeout time.Duration // Config.ReapTimeout; 0: no local deadline
	margin      time.Duration // Config.SafetyMargin or its default
	heartbeat   time.Duration // Config.HeartbeatInterval or its default; 0: none
	gate        chan struct{} // bounds concurrent claim statements; nil: no bound
	logger      *slog.Logger
	obs         observe.Observer
	pauses      *pauseCheck // Config.PauseTable's pauses (pause.go); nil: not checked
	pauseScope  string      // the scope's pause text (PauseScope); "" without a PauseTable

	indexOnce sync.Once
	verified  *checkonce.Check // the table's schema check (shared by scope views)
	wake      waker            // idle Run loops (wake.go)
}

// New validates cfg, resolves its strategy against d's capabilities and
// builds the claimer. fields returns pointers into a row value for
// cfg.Columns, in order, for example
//
//	func(r *Target) []any { return []any{&r.OpenID, &r.Payload} }
//
// and may be nil when cfg.Columns is empty. Errors wrap [dialect.ErrInvalidConfig]
// (naming the field) or [dialect.ErrNotSupported] (a strategy the server lacks).
//
// New does not touch the database. Until a check passes, each
// [Claimer.Claim] first verifies the table against the catalog
// ([Claimer.Verify]); the first one also checks for the recommended indexes
// ([Claimer.MissingIndexes]) and logs a warning listing the missing ones.
func New[T any](d dialect.Dialect, cfg Config, fields func(*T) []any) (*Claimer[T], error) {
	if d == nil {
		return nil, invalid("Dialect", "is nil")
	}
	spec, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	if len(cfg.Columns) > 0 && fields == nil {
		return nil, invalid("fields", "is nil but Columns names %d column(s)", len(cfg.Columns))
	}
	if fields != nil {
		var zero T
		if n := len(fields(&zero)); n != len(cfg.Columns) {
			return nil, invalid("fields", "returns %d pointer(s) for %d column(s)", n, len(cfg.Columns))
		}
	}
	caps := d.Capabilities()
	strategy, err := caps.Resolve(cfg.Strategy)
	if err != nil {
		return nil, fmt.Errorf("claim: Strategy: %w", err)
	}
	cs, err := store.OpenClaims(d, spec)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	pauses, err := newPauseCheck(d, cfg, spec.Table)
	if err != nil {
		return nil, err
	}
	pauseScope, err := pauseScopeOf(pauses, cfg.ScopeValues)
	if err != nil {
		return nil, err
	}
	maxAttempts, _ := spec.MaxAttempts(cfg.MaxAttempts) // validated by Resolve
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	k := &core{
		d: d, cs: cs, spec: spec, scope: slices.Clone(cfg.ScopeValues), strategy: strategy, worker: cfg.worker(),
		limit: cfg.batchSize(), maxAttempts: maxAttempts, backoff: cfg.backoff(spec),
		ackDelay: cfg.AckDelay, ackBuffer: cfg.ackBuffer(), gate: cfg.claimGate(caps),
		reapTimeout: cfg.ReapTimeout, margin: cfg.safetyMargin(), heartbeat: cfg.heartbeatInterval(),
		logger: logger.With("table", spec.Table), obs: cfg.Observer,
		base: cs, verified: checkonce.New(), pauses: pauses, pauseScope: pauseScope,
	}
	k.held, _ = cs.(store.Holder)
	k.cs = observed(cs, k)
	return &Claimer[T]{core: k, fields: fields, nfields: len(cfg.Columns)}, nil
}

// Strategy returns the resolved claim strategy.
func (c *Claimer[T]) Strategy() dialect.Strategy { return c.core.strategy }

// IndexDDL returns the CREATE INDEX statements of the indexes recommended
// for the claimer's table: the claim index (scope columns, status, key;
// partial on PostgreSQL), the token index, the reaper's (status,
// claimed_at) index and, depending on the engine and the table, the scope
// and scheduling indexes. online builds each without blocking writes to a
// table in use: PostgreSQL's CREATE INDEX CONCURRENTLY (which cannot run
// inside a transaction block), MySQL's ALGORITHM=INPLACE, LOCK=NONE; SQLite
// has no such form.
func (c *Claimer[T]) IndexDDL(online bool) []string {
	return c.core.cs.IndexDDLWith(store.IndexOptions{Online: online})
}

// MissingIndexes returns the CREATE INDEX statements of the recommended
// indexes that the table lacks. Without them claims scan and lock more rows
// than they take; on MySQL, SKIP LOCKED workers may get empty batches.
func (c *Claimer[T]) MissingIndexes(ctx context.Context) ([]string, error) {
	missing, err := c.core.cs.MissingIndexes(ctx)
	if err != nil {
		return nil, storeError("missing indexes", err)
	}
	return missing, nil
}

// Verify checks the table against the database catalog unless a check
// already passed: the table and every configured column exist, the
// token column can hold a token, and the pause table (Config.PauseTable),
// if any, exists with its columns. Errors wrap [dialect.ErrInvalidConfig] and name the
// field. [Claimer.Claim] calls it; call it at start-up to fail fast. It
// matters most on MySQL with a non-strict sql_mode, which would truncate
// tokens too long for the column silently and strand the claimed rows.
// Callers that start together (a claimer's workers, its scope views) run
// one check between them: a caller that finds another's check in progress
// waits for it while ctx lasts, and runs its own only if that one failed.
func (c *Claimer[T]) Verify(ctx context.Context) error { return c.core.verify(ctx) }

// indexChecks records the claimer configurations whose recommended indexes
// were already checked in this process, so that claimers built per request
// or per task warn once, not once each.
var indexChecks sync.Map // indexCheckKey -> struct{}

// indexCheckKey names a claimer configuration for the index check.
type indexCheckKey struct {
	d     dialect.Dialect
	table string
	scope string
}

func (k *core) scopeValues() []any {
	if len(k.scope) == 0 {
		return nil
	}
	return k.scope
}

// Scope returns a view of c restricted to other values of the Scope
// columns (Config.ClaimTable.Scope), in their order, in place of
// Config.ScopeValues: a job serving many tasks builds one claimer and
// takes a view per task, instead of a claimer per task. The view shares
// c's store, statements, connections, table check and ClaimConcurrency
// slots; it has its own idle [Claimer.Run] loops ([Claimer.Wake] on the
// view wakes those). Everything else (batch size, attempts, backoff, acks,
// observer, logger) is c's. Creating one costs a few small allocations and
// no database round trip. A view of a view replaces the values again.
//
// The values are checked as [New] checks Config.ScopeValues: one per Scope
// column, none nil, each a value database/sql can send as a parameter (a
// number, string, []byte, bool, time.Time or a [driver.Valuer]). Their SQL
// types are not checked here: a value the column cannot be compared with
// fails the first claim. Errors wrap [dialect.ErrInvalidConfig].
func (c *Claimer[T]) Scope(values ...any) (*Claimer[T], error) {
	if err := checkScopeValues(c.core.spec.Scope, values); err != nil {
		return nil, err
	}
	text, err := pauseScopeOf(c.core.pauses, values)
	if err != nil {
		return nil, err
	}
	v := c.core.withScope(values)
	v.pauseScope = text
	return &Claimer[T]{core: v, fields: c.fields, nfields: c.nfields}, nil
}

// withScope returns a core like k for other scope values (see
// [Claimer.Scope]).
func (k *core) withScope(values []any) *core {
	v := &core{
		d: k.d, base: k.base, held: k.held, spec: k.spec, scope: slices.Clone(values), strategy: k.strategy, worker: k.worker,
		limit: k.limit, maxAttempts: k.maxAttempts, backoff: k.backoff, ackDelay: k.ackDelay,
		ackBuffer: k.ackBuffer, reapTimeout: k.reapTimeout, margin: k.margin, heartbeat: k.heartbeat,
		gate: k.gate, logger: k.logger, obs: k.obs, verified: k.verified, pauses: k.pauses,
	}
	v.cs = observed(k.base, v)
	return v
}

// ScopeValues returns the claimer's scope values (Config.ScopeValues, or
// those given to [Claimer.Scope]), in the order of the Scope columns.
func (c *Claimer[T]) ScopeValues() []any { return slices.Clone(c.core.scope) }

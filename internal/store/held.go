package store

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store/render"
)

// HoldParams are the params of [Claims.Hold].
type HoldParams struct {
	// Limit is the most rows to claim.
	Limit int
	// ScopeValues are the scope columns' values.
	ScopeValues []any
	// From, if positive, is a key cursor: the claim takes rows whose key is
	// above it first (integer keys), and starts again from the lowest key
	// when none is. It spares a holder the rows its own other batches hold
	// (they stay pending, so a claim would otherwise skip them one by one).
	From int64
	// Cursor, if set, is the holder's cursor, in place of From: the claim
	// starts above its key, in its turn where the engine's held claims
	// take turns (HeldSQL.Turns), and moves it.
	Cursor *HoldCursor
	// HoldLimit is the server's hold limit: it ends the transaction when
	// it has been idle that long (a frozen or partitioned holder), and
	// bounds each statement and lock wait in it. Positive; MySQL's unit is
	// the second, rounded up.
	HoldLimit time.Duration
}

// Held is a held claim: its transaction, on one connection, holds the row
// locks of the rows it claimed until Commit or Rollback. It is not safe for
// concurrent use (one connection runs one statement at a time).
type Held struct {
	s    *Claims
	tx   Tx
	keys map[any]bool // held keys not yet acked
	over bool
	// saved is keys as they were at the savepoint (nil: none taken).
	saved map[any]bool
}

// HoldCursor is the key cursor of one holder's held claims (integer keys):
// each claim starts above the highest key of the last full batch, past
// the rows the holder's other open batches hold (held rows stay pending,
// and a claim would otherwise skip them one locked row at a time), and
// from the lowest key again after a short batch. It only decides where a
// claim starts, never which rows it may hold.
//
// Where the engine's held claims take turns (HeldSQL.Turns), the claims
// that share a cursor run their claim statements one at a time, each
// starting past the keys the one before it took.
type HoldCursor struct {
	turn chan struct{}
	mu   sync.Mutex
	key  int64 // 0: from the lowest key
}

// NewHoldCursor returns a cursor at the lowest key.
func NewHoldCursor() *HoldCursor { return &HoldCursor{turn: make(chan struct{}, 1)} }

// from returns the key the next claim starts above (0: the lowest).
func (c *HoldCursor) from() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.key
}

// advance moves the cursor after a claim of n rows whose highest key is
// last (0 where it is not a positive integer): past a full batch, or back
// to the lowest key after a short one (nothing more is pending above the
// cursor).
func (c *HoldCursor) advance(n, limit int, last int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case n < limit:
		c.key = 0
	case last > c.key:
		c.key = last
	}
}

// heldSavepoint names the savepoint a held claim takes before its handler
// runs; PostgreSQL, MySQL and MariaDB spell SAVEPOINT and ROLLBACK TO
// SAVEPOINT alike.
const heldSavepoint = "claimlock_held"

// Savepoint marks the held transaction's current state (the rows held, the
// acks written so far) as the one [Held.RollbackToSavepoint] returns to,
// keeping the row locks. An error means the claim is lost (the
// transaction has been rolled back).
func (h *Held) Savepoint(ctx context.Context) error {
	if h.over {
		return fmt.Errorf("%w: savepoint: the held claim has ended", dialect.ErrClaimLost)
	}
	if _, err := h.tx.Exec(ctx, "SAVEPOINT "+heldSavepoint); err != nil {
		return wrapStep("savepoint", h.broken(ctx, err))
	}
	h.saved = maps.Clone(h.keys)
	return nil
}

// RollbackToSavepoint undoes every statement since [Held.Savepoint] (the
// handler's writes, acks and fails) and keeps the row locks: the rows are
// held as they were at the savepoint. It works in a transaction a failed
// statement aborted (PostgreSQL). An error means the claim is lost: the
// savepoint is gone with the transaction (a MySQL deadlock rolls the whole
// transaction back) or the connection is, and the held claim is rolled
// back.
func (h *Held) RollbackToSavepoint(ctx context.Context) error {
	if h.over {
		return fmt.Errorf("%w: rollback to savepoint: the held claim has ended", dialect.ErrClaimLost)
	}
	if h.saved == nil {
		return fmt.Errorf("%w: rollback to savepoint: no savepoint was taken", dialect.ErrInvalidConfig)
	}
	if _, err := h.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+heldSavepoint); err != nil {
		return wrapStep("rollback to savepoint", h.broken(ctx, err))
	}
	h.keys = maps.Clone(h.saved)
	return nil
}

// Interpret classifies an error of a statement run through [Held.Querier]
// as the store's own errors are ([dialect.IsRetryable],
// [dialect.IsPermanent]).
func (h *Held) Interpret(err error) error { return h.s.b.interpret(err) }

// Open reports whether key (normalised) is held and not acked yet.
func (h *Held) Open(key any) bool { return h.keys[key] }

// Holds reports whether the store can hold claims (the engine has the
// statements, and the server SKIP LOCKED).
func (s *Claims) Holds() bool { return s.stmts.has(claimKey{t: tHeldClaim}) && s.b.caps.SkipLocked }

// Hold claims up to p.Limit pending rows in scope by locking them in a
// transaction it leaves open, scanning each (ClaimNames.Returned) with
// scan. It returns the held claim even with no rows (commit or roll it
// back). It never retries: a failed hold has rolled back.
func (s *Claims) Hold(ctx context.Context, p *HoldParams, scan func(Scanner) error) (*Held, int, error) {
	if !s.Holds() {
		return nil, 0, fmt.Errorf("%w: held claims on %s %s (a transaction held through a handler needs row locks and SKIP LOCKED)",
			dialect.ErrNotSupported, s.b.caps.Engine, s.b.caps.Version)
	}
	if p.Limit <= 0 {
		return nil, 0, fmt.Errorf("%w: limit must be positive, got %d", dialect.ErrInvalidConfig, p.Limit)
	}
	if p.HoldLimit <= 0 {
		return nil, 0, fmt.Errorf("%w: the hold limit must be positive, got %v", dialect.ErrInvalidConfig, p.HoldLimit)
	}
	if err := checkScope(s.spec, len(p.ScopeValues)); err != nil {
		return nil, 0, err
	}
	if err := s.checkScopeValues(p.ScopeValues); err != nil {
		return nil, 0, err
	}
	tx, err := s.b.db.Begin(ctx)
	if err != nil {
		return nil, 0, s.b.interpret(err)
	}
	h := &Held{s: s, tx: tx, keys: map[any]bool{}}
	n, err := h.claim(ctx, p, scan)
	if err == nil && ctx.Err() != nil {
		// ctx ended while the claim ran. Its statements all returned, but
		// a driver may have closed the connection as the last one did
		// (go-sql-driver/mysql cancels a statement by closing its
		// connection, also one whose reply it has read), and the server
		// then rolled the transaction back: the rows may not be held.
		err = fmt.Errorf("held claim: the context ended: %w", ctx.Err())
	}
	if err != nil {
		_ = h.end(ctx)
		return nil, 0, s.b.interpret(err)
	}
	return h, n, nil
}

// claim sets the hold limit and claims in the held transaction: above the
// key of p.Cursor (in its turn, where the engine's held claims take turns;
// the cursor moves after a claim that did not fail) or of p.From, and from
// the lowest key when nothing is pending above it.
func (h *Held) claim(ctx context.Context, p *HoldParams, scan func(Scanner) error) (int, error) {
	s := h.s
	if _, err := s.b.exec(ctx, h.tx, s.st(claimKey{t: tHeldLimit}), &render.Args{HoldLimit: p.HoldLimit}); err != nil {
		return 0, fmt.Errorf("hold limit: %w", err)
	}
	from := p.From
	if c := p.Cursor; c != nil {
		if s.b.claims.Held.Turns {
			select {
			case c.turn <- struct{}{}:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			defer func() { <-c.turn }()
		}
		from = c.from()
	}
	n, err := h.claimAbove(ctx, p, from, scan)
	if err == nil && p.Cursor != nil {
		p.Cursor.advance(n, p.Limit, h.highestKey())
	}
	return n, err
}

// highestKey returns the highest integer key the claim holds, or 0 where
// none is a positive integer (text keys).
func (h *Held) highestKey() int64 {
	var last int64
	for k := range h.keys {
		if v, ok := k.(int64); ok && v > last {
			last = v
		}
	}
	return last
}

// claimAbove claims above the key from, if positive (integer keys), and
// from the lowest key when nothing is pending above it.
func (h *Held) claimAbove(ctx context.Context, p *HoldParams, from int64, scan func(Scanner) error) (int, error) {
	s := h.s
	if st := s.st(claimKey{t: tHeldClaim, v: ClaimVariant{From: true}}); from > 0 && st.SQL != "" {
		n, err := h.claimWith(ctx, st, &render.Args{Limit: p.Limit, Scope: p.ScopeValues, From: from}, scan)
		if err != nil || n > 0 {
			return n, err
		}
		// Nothing above the cursor: from the start (nothing is locked yet,
		// so no row comes twice).
	}
	return h.claimFromStart(ctx, p, scan)
}

// claimFromStart claims from the lowest key. Where the engine has a Look
// (HeldSQL.Look), it first reads the first pending key without locks:
// none, and the claim holds nothing; one, and the claim starts at it
// (integer keys; the claim of other keys still starts from the lowest).
// A row that becomes pending below that key between the two statements is
// for the next claim, as it would be had the claim run a moment earlier;
// rows held by other batches are still pending, so the key is never above
// a row this claim could hold when the look ran.
func (h *Held) claimFromStart(ctx context.Context, p *HoldParams, scan func(Scanner) error) (int, error) {
	s := h.s
	low := s.st(claimKey{t: tHeldClaim})
	a := &render.Args{Limit: p.Limit, Scope: p.ScopeValues}
	look := s.st(claimKey{t: tHeldLook})
	if look.SQL == "" {
		return h.claimWith(ctx, low, a, scan)
	}
	var first any
	err := s.b.query(ctx, h.tx, look, &render.Args{Scope: p.ScopeValues}, func(r Rows) error {
		var id any
		if err := r.Scan(&id); err != nil {
			return err
		}
		k, err := NormalizeKey(s.spec.IDKind, id)
		first = k
		return err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("held look: %w", err)
	case first == nil:
		return 0, nil
	}
	if k, ok := first.(int64); ok && k > math.MinInt64 {
		if from := s.st(claimKey{t: tHeldClaim, v: ClaimVariant{From: true}}); from.SQL != "" {
			a.From = k - 1
			return h.claimWith(ctx, from, a, scan)
		}
	}
	return h.claimWith(ctx, low, a, scan)
}

func (h *Held) claimWith(ctx context.Context, st render.Stmt, a *render.Args, scan func(Scanner) error) (int, error) {
	s := h.s
	n := 0
	err := s.b.query(ctx, h.tx, st, a, func(r Rows) error {
		key := &keyScanner{r: r, kind: s.spec.IDKind}
		if err := scan(key); err != nil {
			return err
		}
		if key.key == nil {
			return fmt.Errorf("held claim: the row's key was not scanned")
		}
		h.keys[key.key] = true
		n++
		return nil
	})
	return n, err
}

// keyScanner passes a row to the caller's scan and keeps its key, the
// first column, normalised.
type keyScanner struct {
	r    Rows
	kind dialect.IDKind
	key  any
}

func (k *keyScanner) Scan(dest ...any) error {
	if err := k.r.Scan(dest...); err != nil {
		return err
	}
	if len(dest) == 0 {
		return nil
	}
	v, err := derefKey(dest[0])
	if err != nil {
		return err
	}
	k.key, err = NormalizeKey(k.kind, v)
	return err
}

// derefKey reads the key a scan stored through dest.
func derefKey(dest any) (any, error) {
	switch d := dest.(type) {
	case *any:
		return *d, nil
	case *int64:
		return *d, nil
	case *int:
		return *d, nil
	case *int32:
		return *d, nil
	case *string:
		return *d, nil
	case *[]byte:
		return string(*d), nil
	}
	return nil, fmt.Errorf("held claim: cannot read a key scanned into %T", dest)
}

// Read reads the held rows of ids in the held transaction, passing each to
// scan (ClaimNames.Returned), in key order.
func (h *Held) Read(ctx context.Context, ids []any, scan func(Scanner) error) error {
	keys, err := normalizeKeys(h.s.spec.IDKind, ids)
	if err != nil {
		return err
	}
	return h.s.b.query(ctx, h.tx, h.s.st(claimKey{t: tHeldRead}), &render.Args{Keys: keys}, func(r Rows) error { return scan(r) })
}

// Querier returns the held transaction, for the handler's own statements:
// they commit or roll back with the acks.
func (h *Held) Querier() Querier { return h.tx }

// Ack writes p's outcome for the rows of p.IDs the claim holds and has not
// acked yet, in the held transaction; the others are reported lost
// (p.Token and p.Versions are ignored: the locks make both moot, a writer
// waits for the commit). With MaxAttempts, a failure parks the rows whose
// attempts, counting this failure, reach it.
func (h *Held) Ack(ctx context.Context, p *AckParams) (AckResult, error) {
	var res AckResult
	if h.over {
		return res, fmt.Errorf("%w: the held claim has ended", dialect.ErrInvalidConfig)
	}
	s := h.s
	keys, err := s.ackKeys(ctx, p, true)
	if err != nil {
		return res, err
	}
	var held []any
	pos := map[any]int{}
	for i, k := range keys {
		if !h.keys[k] {
			res.Lost = append(res.Lost, i)
			continue
		}
		h.keys[k] = false
		held = append(held, k)
		pos[k] = i
	}
	if len(held) == 0 {
		return res, nil
	}
	groups := map[ackTo][]any{toOf(p.Outcome): held}
	if p.Outcome == OutcomeRetry && p.MaxAttempts > 0 {
		if groups, err = h.parkGroups(ctx, p, held, pos, &res); err != nil {
			return AckResult{}, h.broken(ctx, err)
		}
	}
	a := &render.Args{Error: s.errorText(p.Error), Delay: s.delay(p.Delay)}
	for to, g := range groups {
		a.Keys = g
		n, err := s.b.exec(ctx, h.tx, s.st(claimKey{t: tHeldAck, to: to, v: s.hinted(ClaimVariant{})}), a)
		if err != nil {
			return AckResult{}, h.broken(ctx, err)
		}
		// Fewer is possible where affected rows are changed rows (a retry
		// that changes nothing on MySQL); more never.
		if n > int64(len(g)) {
			return AckResult{}, h.broken(ctx, fmt.Errorf("wrote %d rows for %d held rows", n, len(g)))
		}
	}
	if p.Outcome == OutcomeDone && s.archives() {
		if err := s.move(ctx, h.tx, held); err != nil {
			return AckResult{}, h.broken(ctx, err)
		}
	}
	slices.Sort(res.Parked)
	return res, nil
}

// parkGroups reads the attempts of the held rows of a failure bounded by
// MaxAttempts and groups them: those whose attempts, counting this
// failure, reach it are parked (their positions, by pos, added to
// res.Parked), the others go back to pending.
func (h *Held) parkGroups(ctx context.Context, p *AckParams, held []any, pos map[any]int, res *AckResult) (map[ackTo][]any, error) {
	s := h.s
	groups := map[ackTo][]any{}
	err := s.b.query(ctx, h.tx, s.st(claimKey{t: tHeldAttempts}), &render.Args{Keys: held}, func(r Rows) error {
		var id any
		var att int64
		if err := r.Scan(&id, &att); err != nil {
			return err
		}
		k, err := NormalizeKey(s.spec.IDKind, id)
		if err != nil {
			return err
		}
		if att+1 >= int64(p.MaxAttempts) {
			groups[toFailed] = append(groups[toFailed], k)
			res.Parked = append(res.Parked, pos[k])
		} else {
			groups[toPending] = append(groups[toPending], k)
		}
		return nil
	})
	return groups, err
}

// broken rolls the held claim back after a failed statement (its
// transaction is aborted, or its connection gone) and returns err as a
// loss of the claim: nothing of the held claim was written.
func (h *Held) broken(ctx context.Context, err error) error {
	h.end(ctx)
	return fmt.Errorf("%w: %w", dialect.ErrClaimLost, h.s.b.interpret(err))
}

// Unacked returns how many held rows have not been acked.
func (h *Held) Unacked() int {
	n := 0
	for _, v := range h.keys {
		if v {
			n++
		}
	}
	return n
}

// Ping runs a trivial statement in the held transaction: it tells that the
// transaction still lives and restarts the server's idle clock. An error
// means the claim is lost (the transaction has been rolled back).
func (h *Held) Ping(ctx context.Context) error {
	if h.over {
		return fmt.Errorf("%w: the held claim has ended", dialect.ErrClaimLost)
	}
	r, err := h.tx.Query(ctx, "SELECT 1")
	if err == nil {
		for r.Next() {
		}
		err = r.Err()
		r.Close()
	}
	if err != nil {
		return wrapStep("ping", h.broken(ctx, err))
	}
	return nil
}

// Commit commits the held transaction: the acks and the handler's writes
// take effect together and the locks are released; rows not acked are
// pending as before. A COMMIT that fails on a broken connection has an
// unknown outcome ([dialect.ErrOutcomeUnknown]).
func (h *Held) Commit(ctx context.Context) error {
	if h.over {
		return fmt.Errorf("%w: commit: the held claim has ended", dialect.ErrInvalidConfig)
	}
	h.over = true
	if unlimit := h.s.st(claimKey{t: tHeldUnlimit}); unlimit.SQL != "" {
		if _, err := h.s.b.exec(ctx, h.tx, unlimit, &render.Args{}); err != nil {
			_ = h.end(ctx)
			return fmt.Errorf("%w: %w", dialect.ErrClaimLost, h.s.b.interpret(err))
		}
	}
	if err := h.tx.Commit(ctx); err != nil {
		_ = h.tx.Rollback(context.WithoutCancel(ctx))
		return fmt.Errorf("%w: %w", dialect.ErrOutcomeUnknown, h.s.b.interpret(err))
	}
	return nil
}

// Rollback rolls the held transaction back: every row is pending as it was
// before the claim, the handler's writes are undone.
func (h *Held) Rollback(ctx context.Context) error {
	if h.over {
		return nil
	}
	return h.end(ctx)
}

// end rolls the held transaction back, restoring the session's own limits
// first (an engine whose Limit outlives the transaction), so that the
// connection goes back to the pool as it came. It is bounded by ctx's
// deadline but not ended by its cancellation.
func (h *Held) end(ctx context.Context) error {
	h.over = true
	ctx = context.WithoutCancel(ctx)
	if unlimit := h.s.st(claimKey{t: tHeldUnlimit}); unlimit.SQL != "" {
		if _, err := h.s.b.exec(ctx, h.tx, unlimit, &render.Args{}); err != nil {
			// The connection is gone or unusable: the rollback below
			// fails as well, and the connection is dropped.
			h.s.b.logger.Debug("claimlock: held claim: restoring the session's limits failed", "err", err)
		}
	}
	return h.tx.Rollback(ctx)
}

// Holder is a claim store that can hold claims ([Claims]).
type Holder interface {
	Holds() bool
	PoolSize() int
	Hold(ctx context.Context, p *HoldParams, scan func(Scanner) error) (*Held, int, error)
}

var _ Holder = (*Claims)(nil)

// PoolSize returns the most connections the engine's pool opens, or 0 when
// it is not bounded or not known: a [ConnDB]'s MaxOpenConns, or the
// MaxConns of a pool that reports it.
func (s *Claims) PoolSize() int { return s.b.poolSize() }

package mysql

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/store/render"
)

// claimer is the MySQL claim of one table: mark rows (token-update: UPDATE
// ... LIMIT; SKIP LOCKED: SELECT ... FOR UPDATE SKIP LOCKED then UPDATE in
// one transaction), then read them back by token. The rows are handed to
// scan only after the marking committed. A claim that fails with a broken
// connection may have marked rows under its token: they stay processing
// until the token is released or the reaper returns them.
type claimer struct {
	d *Dialect
	s store.ClaimSteps
	// noHint is set once FORCE INDEX failed because the recommended claim
	// index is missing (the claimer warns about it).
	noHint atomic.Bool
}

// ClaimRunner implements [store.ClaimOverride]: the claimer of one table,
// on the statements the store's claim table renders for it (Mark,
// SkipLockedPick, SkipLockedMark in sql.go).
func (s *storeDriver) ClaimRunner(t store.ClaimSteps) (store.ClaimRunner, error) {
	return &claimer{d: s.d, s: t}, nil
}

// Claim implements [store.ClaimRunner].
func (c *claimer) Claim(ctx context.Context, p *store.ClaimParams, scan func(store.Scanner) error) (int, error) {
	after, set := c.s.CursorAfter(p.ScopeValues)
	var marked int64
	var err error
	if p.Strategy == dialect.StrategySkipLocked {
		marked, err = c.markSkipLocked(ctx, p, after, set)
	} else {
		marked, err = c.markTokenUpdate(ctx, p, after, set, true, func(hinted, plain render.Stmt, a *render.Args) (int64, error) {
			return c.updateClaim(ctx, hinted, plain, a)
		})
	}
	return c.readBack(p, after, marked, err, scan, func(scan func(store.Scanner) error, wrapScan func(store.Scanner) store.Scanner) (int, error) {
		return c.s.ReadBack(ctx, nil, p.Token, scan, wrapScan)
	})
}

// readBack reads back the marked rows with read and moves the scope's
// rotating key cursor (internal/store's cursor.go) past the keys it read.
// A claim that marked nothing sets it back to the lowest key.
func (c *claimer) readBack(p *store.ClaimParams, after any, marked int64, err error, scan func(store.Scanner) error,
	read func(func(store.Scanner) error, func(store.Scanner) store.Scanner) (int, error)) (int, error) {
	if err != nil || marked == 0 {
		if err == nil {
			c.s.CursorAdvance(p.ScopeValues, after, nil)
		}
		return 0, err
	}
	var keys []any
	n, err := read(scan, func(r store.Scanner) store.Scanner { return c.s.KeyRecorder(r, &keys) })
	if err == nil {
		c.s.CursorAdvance(p.ScopeValues, after, keys)
	}
	return n, err
}

// markTokenUpdate marks up to p.Limit rows in the rotating key order: the
// pending rows above the cursor after (when set) first and, when those are
// fewer than the limit, the rest from the lowest key (the wrap), so a claim
// reports fewer rows than asked only after a statement from the lowest key,
// or, run on its own, when that second statement failed after the first
// had marked rows (they are returned, not stranded).
//
// exec runs one marking statement: on its own with retries (a claim,
// standalone), or in the caller's transaction (ack+claim), where a failed
// statement fails the whole transaction and nothing is handed over.
func (c *claimer) markTokenUpdate(ctx context.Context, p *store.ClaimParams, after any, set, standalone bool, exec func(hinted, plain render.Stmt, a *render.Args) (int64, error)) (int64, error) {
	a := &render.Args{Token: p.Token, Worker: p.Worker, Scope: p.ScopeValues, Limit: p.Limit}
	var n int64
	if set {
		a.After = after
		hinted, plain := c.s.Mark(true, true), c.s.Mark(false, true)
		var err error
		if n, err = exec(hinted, plain, a); err != nil || n >= int64(p.Limit) {
			return n, err
		}
	}
	a.Limit = p.Limit - int(n)
	hinted, plain := c.s.Mark(true, false), c.s.Mark(false, false)
	m, err := exec(hinted, plain, a)
	if err != nil && n > 0 && standalone {
		// The rows above the cursor are committed under the token: hand
		// them over (the read-back also finds any the failed statement may
		// have marked) rather than strand them until a reaper returns
		// them. On Galera a statement can exhaust its retries on
		// certification conflicts while the first one went through.
		c.d.b.Logger().Debug("claimlock: mysql claim from the lowest key failed; returning the rows claimed above the cursor", "rows", n, "err", err)
		return n, nil
	}
	return n + m, err
}

// updateClaim runs one token-update claim statement (hinted, or unhinted
// when the claim index is missing) and returns the rows it marked.
func (c *claimer) updateClaim(ctx context.Context, hinted, plain render.Stmt, a *render.Args) (int64, error) {
	var n int64
	err := c.d.b.Do(ctx, "claim", false, func() error {
		return c.d.inReadCommitted(ctx, func(q store.Querier) error {
			var err error
			n, err = c.updateOn(ctx, q, hinted, plain, a)
			return err
		})
	})
	return n, err
}

// updateOn runs one token-update claim statement on q.
func (c *claimer) updateOn(ctx context.Context, q store.Querier, hinted, plain render.Stmt, a *render.Args) (int64, error) {
	var n int64
	err := c.withHint(func(st render.Stmt) error {
		var err error
		n, err = store.Exec(ctx, q, c.d.b.Style(), st, a)
		return err
	}, hinted, plain)
	return n, err
}

// withHint runs fn with the hinted statement, falling back to the plain one
// for good when the server reports the hinted index missing.
func (c *claimer) withHint(fn func(render.Stmt) error, hinted, plain render.Stmt) error {
	if c.noHint.Load() {
		return fn(plain)
	}
	err := fn(hinted)
	if isErrNumber(err, errKeyDoesNotExist) {
		c.noHint.Store(true)
		err = fn(plain)
	}
	return err
}

// markSkipLocked selects and marks up to p.Limit rows in one transaction,
// in the rotating key order: above the cursor after (when set) first and,
// when that comes back short, from the lowest key (in the same
// transaction: rows it locked but does not mark stay pending).
func (c *claimer) markSkipLocked(ctx context.Context, p *store.ClaimParams, after any, set bool) (int64, error) {
	var n int64
	err := c.d.b.Do(ctx, "claim", false, func() error {
		return c.d.b.InTx(ctx, func(q store.Querier) error {
			var err error
			n, err = c.pickAndMark(ctx, q, p, after, set)
			return err
		})
	})
	return n, err
}

// pickAndMark selects and marks up to p.Limit rows with SKIP LOCKED in the
// transaction q, and returns how many it marked. The select from the
// lowest key also returns the rows above the cursor that this transaction
// locked already (its own locks are not skipped): they are kept, and the
// lowest others fill the limit.
func (c *claimer) pickAndMark(ctx context.Context, q store.Querier, p *store.ClaimParams, after any, set bool) (int64, error) {
	var ids []any
	var err error
	if set {
		if ids, err = c.selectSkipping(ctx, q, true, &render.Args{Scope: p.ScopeValues, After: after, Limit: p.Limit}); err != nil {
			return 0, err
		}
	}
	if len(ids) < p.Limit {
		low, err := c.selectSkipping(ctx, q, false, &render.Args{Scope: p.ScopeValues, Limit: p.Limit})
		if err != nil {
			return 0, err
		}
		for _, id := range low {
			if len(ids) == p.Limit {
				break
			}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	return store.Exec(ctx, q, c.d.b.Style(), c.s.SkipLockedMark(), &render.Args{Token: p.Token, Worker: p.Worker, Keys: ids})
}

// selectSkipping runs one SKIP LOCKED select and returns the keys it locked.
func (c *claimer) selectSkipping(ctx context.Context, q store.Querier, from bool, a *render.Args) ([]any, error) {
	hinted, plain := c.s.SkipLockedPick(true, from), c.s.SkipLockedPick(false, from)
	var ids []any
	err := c.withHint(func(st render.Stmt) error {
		ids = ids[:0]
		return store.Query(ctx, q, c.d.b.Style(), st, a, func(r store.Rows) error {
			var id any
			if err := r.Scan(&id); err != nil {
				return err
			}
			k, err := store.NormalizeKey(c.s.IDKind(), id)
			ids = append(ids, k)
			return err
		})
	}, hinted, plain)
	return ids, err
}

package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store/render"
)

var _ AckClaimer = (*Claims)(nil)

// AckAndClaim implements [AckClaimer]. With [ClaimSQL.AckClaim]
// (PostgreSQL) an ack that needs no row-by-row decision (no versions) is one
// statement: the ack and the claim are data-modifying CTEs of one UPDATE
// whose rows say which keys were acked (and parked) and which rows were
// claimed. Otherwise both run in one transaction from [DB.Begin]: the ack
// as [Claims.Ack] decides it (one UPDATE, or lock, decide and update by
// group), then the claim (the engine's claim statement, or its
// [ClaimRunner]'s ClaimTx), then one COMMIT. Either way the two commit
// together.
func (s *Claims) AckAndClaim(ctx context.Context, p *AckClaimParams, scan func(Scanner) error) (AckResult, int, error) {
	const op = "ack and claim"
	if p == nil {
		return AckResult{}, 0, fmt.Errorf("%w: nil params", dialect.ErrInvalidConfig)
	}
	ap, cp := &p.Ack, &p.Claim
	if err := checkClaim(s.spec, cp); err != nil {
		return AckResult{}, 0, err
	}
	if err := s.checkScopeValues(cp.ScopeValues); err != nil {
		return AckResult{}, 0, err
	}
	cp, err := s.withWorker(ctx, cp)
	if err != nil {
		return AckResult{}, 0, err
	}
	claimSt, err := s.claimStmt(cp)
	if err != nil {
		return AckResult{}, 0, err
	}
	if len(ap.IDs) == 0 {
		n, err := s.Claim(ctx, cp, scan)
		return AckResult{}, n, err
	}
	if ap.Token == cp.Token {
		return AckResult{}, 0, fmt.Errorf("%w: the claim token is the ack's", dialect.ErrInvalidConfig)
	}
	keys, idx, a, err := s.ackPrep(ctx, ap)
	if err != nil {
		return AckResult{}, 0, err
	}
	versioned := ap.Versions != nil && ap.Outcome == OutcomeDone
	one := s.st(claimKey{t: tAckClaim, to: toOf(ap.Outcome), v: ClaimVariant{Pipelined: true}})
	if ap.Outcome == OutcomeRetry && ap.MaxAttempts > 0 {
		one = s.st(claimKey{t: tAckClaim, v: ClaimVariant{ParkAt: true, Pipelined: true}})
	}
	// The claim takes rows from the rotating cursor (cursor.go), which
	// moves once the statement or transaction committed; an engine's own
	// claim (its ClaimRunner) keeps its cursor itself.
	cur := s.cursors.get(cp.ScopeValues)
	after := cur.after(s.spec.IDKind)
	r := &ackClaim{scan: scan}
	if !versioned && one.SQL != "" {
		b := *a
		b.AckToken, b.Token, b.Worker, b.Limit, b.Scope, b.After = ap.Token, cp.Token, cp.Worker, cp.Limit, cp.ScopeValues, after
		err = s.b.Do(ctx, op, false, func() error {
			r.reset()
			return s.ackClaimOne(ctx, one, &b, idx, len(keys), &r.res, s.recordKeys(r.count, &r.claimed))
		})
	} else {
		claim := &render.Args{Token: cp.Token, Worker: cp.Worker, Limit: cp.Limit, Scope: cp.ScopeValues, After: after}
		err = s.b.Do(ctx, op, false, func() error { return s.ackClaimTx(ctx, r, ap, a, keys, idx, cp, claimSt, claim) })
	}
	if err != nil {
		return AckResult{}, 0, err
	}
	if s.runner == nil || !versioned && one.SQL != "" {
		cur.advance(after, r.claimed)
	}
	s.pendingAfterAck(ctx, ap, r.res)
	if r.scanErr != nil {
		return r.res, r.n, r.scanErr
	}
	return r.res, r.n, nil
}

// ackClaim is what one AckAndClaim gathers, attempt after attempt.
type ackClaim struct {
	scan    func(Scanner) error
	res     AckResult
	n       int   // claimed rows
	scanErr error // scan's first error
	claimed []any // the claimed rows' keys
}

// reset forgets what an attempt that did not commit gathered.
func (r *ackClaim) reset() { r.res, r.n, r.scanErr, r.claimed = AckResult{}, 0, nil, r.claimed[:0] }

// count hands a claimed row to scan. Scan errors do not abort (see
// AckClaimer): the first is kept and the remaining rows are only counted.
func (r *ackClaim) count(row Scanner) error {
	r.n++
	if r.scanErr == nil {
		r.scanErr = r.scan(row)
	}
	return nil
}

// ackClaimTx runs one attempt of an ack+claim in a transaction: the ack as
// [Claims.Ack] decides it, then the claim (claimSt with claim's arguments,
// or the engine's own ClaimRunner). An ack that lost some keys rolls back
// before the claim and runs again, decided row by row.
func (s *Claims) ackClaimTx(ctx context.Context, r *ackClaim, ap *AckParams, a *render.Args, keys []any, idx *keyIndex,
	cp *ClaimParams, claimSt render.Stmt, claim *render.Args) error {
	versioned := ap.Versions != nil && ap.Outcome == OutcomeDone
	count := s.recordKeys(r.count, &r.claimed)
	run := func(fast bool) error {
		r.reset()
		return s.b.InTx(ctx, func(tx Querier) error {
			if err := s.ackIn(ctx, tx, ap, a, keys, idx, fast && !versioned, &r.res); err != nil {
				return err
			}
			if s.runner != nil {
				_, err := s.runner.ClaimTx(ctx, tx, cp, count)
				return err
			}
			return s.b.query(ctx, tx, claimSt, claim, func(row Rows) error { return count(row) })
		})
	}
	err := run(true)
	if errors.Is(err, errPartialAck) {
		// Some keys were lost: the transaction rolled back before the
		// claim; decide the ack row by row this time.
		err = run(false)
	}
	return err
}

// ackIn runs the ack of [Claims.ack] on tx. fast tries the one UPDATE that
// decides nothing row by row; on an engine without RETURNING it returns
// errPartialAck when the UPDATE matched fewer rows than keys, so that the
// caller rolls back and runs again without fast.
func (s *Claims) ackIn(ctx context.Context, tx Querier, p *AckParams, a *render.Args, keys []any, idx *keyIndex, fast bool, res *AckResult) error {
	parkAt := p.Outcome == OutcomeRetry && p.MaxAttempts > 0
	st := s.st(claimKey{t: tAck, v: ClaimVariant{ParkAt: true}})
	if !parkAt {
		st = s.st(claimKey{t: tAck, to: toOf(p.Outcome), v: s.hinted(ClaimVariant{})})
	}
	fast = fast && !s.moves(p)
	switch {
	case fast && s.b.caps.Returning:
		return s.ackReturning(ctx, tx, st, a, idx, len(keys), res)
	case fast && !parkAt:
		n, err := s.b.exec(ctx, tx, st, a)
		if err == nil && n != int64(idx.distinct()) {
			err = errPartialAck
		}
		return err
	}
	return s.ackByRow(ctx, tx, p, a, keys, idx, res)
}

// ackClaimOne runs a one-statement ack+claim on the pool. Its first row
// (kind 0) holds the acked and the parked keys as JSON arrays; the claimed
// rows (kind 1) follow, with the claim's columns after three that claim
// skips. Every row has the same destination types from one row to the
// next, so that drivers that plan a scan per column type (pgx) plan once.
func (s *Claims) ackClaimOne(ctx context.Context, st render.Stmt, a *render.Args, idx *keyIndex, nkeys int, res *AckResult, claim func(Scanner) error) error {
	got := make([]bool, nkeys)
	first := true
	head := pastHead{skip: []any{new(any), new(any), new(any)}}
	err := s.b.query(ctx, s.b.db, st, a, func(r Rows) error {
		if !first {
			head.r = r
			return claim(head)
		}
		first = false
		var kind int64
		var acked, parked sql.NullString
		dest := []any{&kind, &acked, &parked}
		for range s.names.Returned {
			dest = append(dest, new(any))
		}
		if err := r.Scan(dest...); err != nil {
			return err
		}
		if kind != 0 {
			return fmt.Errorf("the first row is of kind %d, not the ack's", kind)
		}
		return s.ackedKeys(acked.String, parked.String, idx, got, res)
	})
	if first && err == nil {
		err = errors.New("ack and claim: no ack row")
	}
	res.Lost = missing(got)
	return err
}

// ackedKeys marks in got the positions of the keys of the JSON array acked
// and adds those of parked to res.Parked.
func (s *Claims) ackedKeys(acked, parked string, idx *keyIndex, got []bool, res *AckResult) error {
	for _, list := range []struct {
		text   string
		parked bool
	}{{acked, false}, {parked, true}} {
		if list.text == "" {
			continue
		}
		var keys []any
		dec := json.NewDecoder(strings.NewReader(list.text))
		dec.UseNumber()
		if err := dec.Decode(&keys); err != nil {
			return fmt.Errorf("ack and claim: acked keys: %w", err)
		}
		for _, k := range keys {
			if n, ok := k.(json.Number); ok {
				v, err := n.Int64()
				if err != nil {
					return fmt.Errorf("ack and claim: acked key %s: %w", n, err)
				}
				k = v
			}
			nk, err := NormalizeKey(s.spec.IDKind, k)
			if err != nil {
				return err
			}
			i, ok := idx.find(nk)
			if !ok {
				continue
			}
			if list.parked {
				res.Parked = append(res.Parked, i)
			} else {
				got[i] = true
			}
		}
	}
	slices.Sort(res.Parked)
	return nil
}

// pastHead scans a row's columns after the first len(skip), which it scans
// into skip (NULLs on claimed rows).
type pastHead struct {
	r    Rows
	skip []any
}

func (p pastHead) Scan(dest ...any) error {
	n := len(p.skip)
	return p.r.Scan(append(p.skip[:n:n], dest...)...)
}

// find returns the position of normalised key k.
func (x *keyIndex) find(k any) (int, bool) {
	if x.text {
		s, ok := k.(string)
		if !ok {
			return 0, false
		}
		i, ok := x.strs[s]
		return i, ok
	}
	v, ok := k.(int64)
	if !ok {
		return 0, false
	}
	i, ok := x.ints[v]
	return i, ok
}

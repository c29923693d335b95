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
)

// TxClaimFunc runs one claim, with params the store validated, on q, a
// transaction the store opened: no retries, no commit. A [Claimer] override
// sets [Claims.ClaimInTx] to one, so that ack+claim runs the engine's own
// claim protocol inside its transaction.
type TxClaimFunc func(ctx context.Context, q Querier, p *ClaimParams, scan func(Scanner) error) (int, error)

// pipeStmts are the one-statement ack+claim statements of an engine with
// [ClaimSQL.AckClaim]: by the ack's target status literal, the parking
// retry's, and all of them by their name in [Claims.Statements].
type pipeStmts struct {
	to     map[string]Stmt
	park   Stmt
	byName map[string]Stmt
}

// renderPipeline renders the ack+claim statements from src (empty: the
// engine has none).
func (s *Claims) renderPipeline(r *renderer, src string) {
	if src == "" {
		return
	}
	s.pipe.to, s.pipe.byName = map[string]Stmt{}, map[string]Stmt{}
	for _, t := range []struct{ name, target string }{{"done", s.Names.Done}, {"pending", s.Names.Pending}, {"failed", s.Names.Failed}} {
		// An archiving ack locks, updates, copies and deletes: not one
		// statement (see ackByRow).
		archived := t.target == s.Names.Done && s.Spec.Archive != ""
		if t.target != "" && !archived {
			del := t.target == s.Names.Done && s.Spec.DeleteDone
			st := r.stmt("ack claim", src, func(n *Names) { n.Target, n.Pipelined, n.Delete = t.target, true, del })
			s.pipe.to[t.target], s.pipe.byName["ack claim "+t.name] = st, st
		}
	}
	if s.Names.Attempts != "" && s.Names.Failed != "" {
		s.pipe.park = r.stmt("ack claim park", src, func(n *Names) { n.ParkAt, n.Pipelined = true, true })
		s.pipe.byName["ack claim park"] = s.pipe.park
	}
}

// name adds the ack+claim statements to the statements by name.
func (p *pipeStmts) name(m map[string]Stmt) {
	for k, v := range p.byName {
		m[k] = v
	}
}

var _ AckClaimer = (*Claims)(nil)

// AckAndClaim implements [AckClaimer]. With [ClaimSQL.AckClaim]
// (PostgreSQL) an ack that needs no row-by-row decision (no versions) is one
// statement: the ack and the claim are data-modifying CTEs of one UPDATE
// whose rows say which keys were acked (and parked) and which rows were
// claimed. Otherwise both run in one transaction from [DB.Begin]: the ack
// as [Claims.Ack] decides it (one UPDATE, or lock, decide and update by
// group), then the claim (the engine's claim statement, or its override's
// [Claims.ClaimInTx]), then one COMMIT. Either way the two commit together.
func (s *Claims) AckAndClaim(ctx context.Context, p *AckClaimParams, scan func(Scanner) error) (AckResult, int, error) {
	const op = "ack and claim"
	var res AckResult
	if p == nil {
		return res, 0, fmt.Errorf("%w: nil params", dialect.ErrInvalidConfig)
	}
	ap, cp := &p.Ack, &p.Claim
	if err := checkClaim(s.Spec, cp); err != nil {
		return res, 0, err
	}
	if err := s.checkScopeValues(cp.ScopeValues); err != nil {
		return res, 0, err
	}
	claimSt, err := s.claimStmt(cp)
	if err != nil {
		return res, 0, err
	}
	if len(ap.IDs) == 0 {
		n, err := s.Claim(ctx, cp, scan)
		return res, n, err
	}
	if ap.Token == cp.Token {
		return res, 0, fmt.Errorf("%w: the claim token is the ack's", dialect.ErrInvalidConfig)
	}
	if err := checkAck(s.Spec, ap); err != nil {
		return res, 0, err
	}
	if ap.Outcome == OutcomeRetry {
		if err := s.checkMaxAttempts(ap.MaxAttempts); err != nil {
			return res, 0, err
		}
	}
	keys, err := normalizeKeys(s.Spec.IDKind, ap.IDs)
	if err != nil {
		return res, 0, err
	}
	if ap.Error != "" && ap.Outcome != OutcomeDone {
		if err := s.ensureErrorWidth(ctx); err != nil {
			return res, 0, err
		}
	}
	if err := s.timeLimits().fits("RunAt", "retry delay", ap.Delay); err != nil {
		return res, 0, err
	}
	idx := newKeyIndex(s.Spec.IDKind, keys)
	a := &Args{Token: ap.Token, Keys: keys, MaxAttempts: ap.MaxAttempts, Error: s.errorText(ap.Error), Delay: s.delay(ap.Delay)}
	versioned := ap.Versions != nil && ap.Outcome == OutcomeDone
	parkAt := ap.Outcome == OutcomeRetry && ap.MaxAttempts > 0

	// scan errors do not abort (see AckClaimer): the first is kept
	// and the remaining rows are only counted.
	var n int
	var scanErr error
	count := func(r Scanner) error {
		n++
		if scanErr == nil {
			scanErr = scan(r)
		}
		return nil
	}
	one := s.pipe.park
	if !parkAt {
		one = s.pipe.to[s.target(ap.Outcome)]
	}
	// The claim takes rows from the rotating cursor (cursor.go), which
	// moves once the statement or transaction committed; an engine's own
	// claim (ClaimInTx) keeps its cursor itself.
	cur := s.cursors.get(cp.ScopeValues)
	after := cur.after(s.Spec.IDKind)
	var claimed []any
	count = s.recordKeys(count, &claimed)
	if !versioned && one.SQL != "" {
		b := *a
		b.AckToken, b.Token, b.Limit, b.Scope, b.After = ap.Token, cp.Token, cp.Limit, cp.ScopeValues, after
		err = s.E.Do(ctx, op, false, func() error {
			res, n, scanErr, claimed = AckResult{}, 0, nil, claimed[:0]
			return s.ackClaimOne(ctx, one, &b, idx, len(keys), &res, count)
		})
	} else {
		err = s.E.Do(ctx, op, false, func() error {
			run := func(fast bool) error {
				res, n, scanErr, claimed = AckResult{}, 0, nil, claimed[:0]
				return s.E.InTx(ctx, func(tx Querier) error {
					if err := s.ackIn(ctx, tx, ap, a, keys, idx, fast && !versioned, &res); err != nil {
						return err
					}
					if s.ClaimInTx != nil {
						_, err := s.ClaimInTx(ctx, tx, cp, count)
						return err
					}
					return Query(ctx, tx, s.E.Dialect, claimSt, &Args{Token: cp.Token, Limit: cp.Limit, Scope: cp.ScopeValues, After: after},
						func(r Rows) error { return count(r) })
				})
			}
			err := run(true)
			if errors.Is(err, errPartialAck) {
				// Some keys were lost: the transaction rolled back before the
				// claim; decide the ack row by row this time.
				err = run(false)
			}
			return err
		})
	}
	if err != nil {
		return AckResult{}, 0, err
	}
	if s.ClaimInTx == nil || !versioned && one.SQL != "" {
		cur.advance(after, claimed)
	}
	requeued := len(res.Requeued)
	if ap.Outcome == OutcomeRetry && ap.Delay <= 0 {
		requeued += len(ap.IDs) - len(res.Lost) - len(res.Parked)
	}
	s.pending(ctx, nil, int64(requeued))
	if scanErr != nil {
		return res, n, scanErr
	}
	return res, n, nil
}

// ackIn runs the ack of [Claims.ack] on tx. fast tries the one UPDATE that
// decides nothing row by row; on an engine without RETURNING it returns
// errPartialAck when the UPDATE matched fewer rows than keys, so that the
// caller rolls back and runs again without fast.
func (s *Claims) ackIn(ctx context.Context, tx Querier, p *AckParams, a *Args, keys []any, idx *keyIndex, fast bool, res *AckResult) error {
	parkAt := p.Outcome == OutcomeRetry && p.MaxAttempts > 0
	st := s.ackPark
	if !parkAt {
		st = s.key().ackTo[s.target(p.Outcome)]
	}
	fast = fast && !s.moves(p)
	switch {
	case fast && s.E.Returning:
		return s.ackReturning(ctx, tx, st, a, idx, len(keys), res)
	case fast && !parkAt:
		n, err := Exec(ctx, tx, s.E.Dialect, st, a)
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
func (s *Claims) ackClaimOne(ctx context.Context, st Stmt, a *Args, idx *keyIndex, nkeys int, res *AckResult, claim func(Scanner) error) error {
	got := make([]bool, nkeys)
	first := true
	head := pastHead{skip: []any{new(any), new(any), new(any)}}
	err := Query(ctx, s.E.DB, s.E.Dialect, st, a, func(r Rows) error {
		if !first {
			head.r = r
			return claim(head)
		}
		first = false
		var kind int64
		var acked, parked sql.NullString
		dest := []any{&kind, &acked, &parked}
		for range s.Names.Returned {
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
			return fmt.Errorf("acked keys: %w", err)
		}
		for _, k := range keys {
			if n, ok := k.(json.Number); ok {
				v, err := n.Int64()
				if err != nil {
					return fmt.Errorf("acked key %s: %w", n, err)
				}
				k = v
			}
			nk, err := NormalizeKey(s.Spec.IDKind, k)
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

// ReadBackTx is [Claims.ReadBack] on q, a transaction the store opened
// ([TxClaimFunc]): it reads the rows the transaction marked, before its
// commit, without retries of its own.
func (s *Claims) ReadBackTx(ctx context.Context, q Querier, token string, scan func(Scanner) error, wrapScan func(Scanner) Scanner) (int, error) {
	n := 0
	err := Query(ctx, q, s.E.Dialect, s.readBack, &Args{Token: token}, counting(&n, scan, wrapScan))
	return n, err
}

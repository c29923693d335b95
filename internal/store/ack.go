package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store/render"
)

// errPartialAck rolls back a one-statement ack that matched fewer rows than
// keys, on an engine without RETURNING, so that the ack is decided row by
// row instead.
var errPartialAck = errors.New("ack matched fewer rows than keys")

// ack is the ack of [Claims.Ack], without the notification.
//
// When every row's fate is known before reading it (no versions; no
// MaxAttempts, or an engine with RETURNING) it is one UPDATE ... WHERE token
// = ? AND key IN (...). With RETURNING the keys it returns are the acked
// rows and the rest were lost. Without it the UPDATE runs in a transaction
// that commits only when it matched every key (it clears the token of every
// row it matches, so affected rows are matched rows on any DSN); otherwise
// it rolls back and the ack is decided row by row: in one transaction, lock
// the rows the token still holds, decide each in Go (version moved: back to
// pending; attempts at MaxAttempts: parked), and update them by group. Keys
// the lock did not return are lost and untouched.
func (s *Claims) ack(ctx context.Context, p *AckParams) (AckResult, error) {
	var res AckResult
	if len(p.IDs) == 0 {
		return res, nil
	}
	keys, idx, a, err := s.ackPrep(ctx, p)
	if err != nil {
		return res, err
	}
	if st, ok := s.oneStatement(p); ok {
		done := false
		err := s.b.Do(ctx, "ack", false, func() error {
			res = AckResult{}
			if s.b.caps.Returning {
				done = true
				return s.ackReturning(ctx, s.b.db, st, a, idx, len(keys), &res)
			}
			err := s.b.InTx(ctx, func(tx Querier) error {
				n, err := s.b.exec(ctx, tx, st, a)
				if err == nil && n != int64(idx.distinct()) {
					err = errPartialAck
				}
				return err
			})
			if errors.Is(err, errPartialAck) {
				return nil
			}
			done = err == nil
			return err
		})
		if err != nil || done {
			return res, err
		}
	}
	err = s.b.Do(ctx, "ack", false, func() error {
		res = AckResult{}
		return s.b.InTx(ctx, func(tx Querier) error { return s.ackByRow(ctx, tx, p, a, keys, idx, &res) })
	})
	if err != nil {
		return AckResult{}, err
	}
	return res, nil
}

// oneStatement returns the statement that writes the ack p whole, with no
// decision row by row, and ok false when there is none: with versions
// (each row's version decides its outcome), or when parking at MaxAttempts
// on an engine without RETURNING (the statement cannot say which rows it
// parked).
func (s *Claims) oneStatement(p *AckParams) (st render.Stmt, ok bool) {
	versioned := p.Versions != nil && p.Outcome == OutcomeDone
	parkAt := p.Outcome == OutcomeRetry && p.MaxAttempts > 0
	switch {
	case versioned || parkAt && !s.b.caps.Returning || s.moves(p):
		return render.Stmt{}, false
	case parkAt:
		return s.st(claimKey{t: tAck, v: ClaimVariant{ParkAt: true}}), true
	}
	return s.st(claimKey{t: tAck, to: toOf(p.Outcome), v: s.hinted(ClaimVariant{})}), true
}

// moves reports whether the ack p moves its done rows to the archive
// table: it then locks them, updates them, copies and deletes them, in one
// transaction (ackByRow).
func (s *Claims) moves(p *AckParams) bool {
	return s.archives() && p.Outcome == OutcomeDone
}

// archives reports a table whose done rows move to an archive table.
func (s *Claims) archives() bool {
	return s.stmts.has(claimKey{t: tArchive, v: ClaimVariant{ByKeys: true}})
}

// move copies the done rows of keys, which the caller's transaction has
// just acked (and so holds), to the archive table and deletes them from the
// claim table. It fails, so that the transaction rolls back, if it did not
// copy every one.
func (s *Claims) move(ctx context.Context, tx Querier, keys []any) error {
	a := &render.Args{Keys: keys}
	n, err := s.b.exec(ctx, tx, s.st(claimKey{t: tArchive, v: ClaimVariant{ByKeys: true}}), a)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if n != int64(len(keys)) {
		return fmt.Errorf("archive: copied %d of %d acked rows", n, len(keys))
	}
	purge := s.st(claimKey{t: tPurge, v: ClaimVariant{ByKeys: true}})
	if purge.SQL == "" {
		return nil
	}
	if n, err = s.b.exec(ctx, tx, purge, a); err != nil {
		return fmt.Errorf("archive: delete: %w", err)
	}
	if n != int64(len(keys)) {
		return fmt.Errorf("archive: deleted %d of %d archived rows", n, len(keys))
	}
	return nil
}

// ackPrep validates an ack's params and returns its normalised keys, their
// index and the statements' arguments (see [Claims.ackKeys]).
func (s *Claims) ackPrep(ctx context.Context, p *AckParams) ([]any, *keyIndex, *render.Args, error) {
	keys, err := s.ackKeys(ctx, p, false)
	if err != nil {
		return nil, nil, nil, err
	}
	a := &render.Args{Token: p.Token, Keys: keys, MaxAttempts: p.MaxAttempts, Error: s.errorText(p.Error), Delay: s.delay(p.Delay)}
	return keys, newKeyIndex(s.spec.IDKind, keys), a, nil
}

// ackKeys validates the params of every ack, held (see [checkAck]) or
// not, and returns its normalised keys: the one place an ack's params are
// checked. A failure's text is cut to the Error column's width, which it
// learns from the catalog first if need be.
func (s *Claims) ackKeys(ctx context.Context, p *AckParams, held bool) ([]any, error) {
	if err := checkAck(s.spec, p, held); err != nil {
		return nil, err
	}
	if p.Outcome == OutcomeRetry {
		if err := s.checkMaxAttempts(p.MaxAttempts); err != nil {
			return nil, err
		}
	}
	if err := s.timeLimits().fits("RunAt", "retry delay", p.Delay); err != nil {
		return nil, err
	}
	keys, err := normalizeKeys(s.spec.IDKind, p.IDs)
	if err != nil {
		return nil, err
	}
	if p.Error != "" && p.Outcome != OutcomeDone {
		if err := s.ensureWidths(ctx); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// normalizeKeys applies [NormalizeKey] to every key, returning a
// new slice.
func normalizeKeys(kind dialect.IDKind, keys []any) ([]any, error) {
	out := make([]any, len(keys))
	for i, k := range keys {
		// Keys already in their normal form keep their interface value:
		// converting them again would allocate one box per key.
		switch k.(type) {
		case int64:
			if kind != dialect.IDText {
				out[i] = k
				continue
			}
		case string:
			if kind == dialect.IDText {
				out[i] = k
				continue
			}
		}
		n, err := NormalizeKey(kind, k)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// toOf is the status an outcome sets.
func toOf(o AckOutcome) ackTo {
	switch o {
	case OutcomeFailed:
		return toFailed
	case OutcomeRetry:
		return toPending
	}
	return toDone
}

// ackReturning runs a one-statement ack that returns each changed key and
// whether it was parked, on q.
func (s *Claims) ackReturning(ctx context.Context, q Querier, st render.Stmt, a *render.Args, idx *keyIndex, n int, res *AckResult) error {
	got := make([]bool, n)
	err := s.b.query(ctx, q, st, a, func(r Rows) error {
		var parked bool
		if err := r.Scan(idx.dest(), &parked); err != nil {
			return err
		}
		if i, ok := idx.scanned(); ok {
			got[i] = true
			if parked {
				res.Parked = append(res.Parked, i)
			}
		}
		return nil
	})
	res.Lost = missing(got)
	return err
}

// keyIndex finds the caller's position of a key read from the database.
// Keys are scanned into a typed variable and looked up in a typed map, with
// no boxing per row. A key the caller did not pass (a collation that matched
// other bytes) is not found.
type keyIndex struct {
	text bool
	ints map[int64]int
	strs map[string]int
	iv   int64
	sv   string
}

func newKeyIndex(kind dialect.IDKind, keys []any) *keyIndex {
	x := &keyIndex{text: kind == dialect.IDText}
	if x.text {
		x.strs = make(map[string]int, len(keys))
	} else {
		x.ints = make(map[int64]int, len(keys))
	}
	for i := len(keys) - 1; i >= 0; i-- { // the first of duplicates wins
		if x.text {
			x.strs[keys[i].(string)] = i
		} else {
			x.ints[keys[i].(int64)] = i
		}
	}
	return x
}

// distinct returns how many different keys the index holds.
func (x *keyIndex) distinct() int { return len(x.ints) + len(x.strs) }

// dest is the scan destination of one key.
func (x *keyIndex) dest() any {
	if x.text {
		return &x.sv
	}
	return &x.iv
}

// scanned returns the position of the key last scanned into dest.
func (x *keyIndex) scanned() (int, bool) {
	if x.text {
		i, ok := x.strs[x.sv]
		return i, ok
	}
	i, ok := x.ints[x.iv]
	return i, ok
}

// missing returns the positions not marked in got, in order.
func missing(got []bool) []int {
	var out []int
	for i, ok := range got {
		if !ok {
			out = append(out, i)
		}
	}
	return out
}

// lockedRow is a row an ack locked: its key, its position in the ack's
// keys, and its version and attempts.
type lockedRow struct {
	key               any
	pos               int
	version, attempts int64
}

// ackByRow is the per-row ack inside a transaction: lock what the token
// holds, decide, update by group.
func (s *Claims) ackByRow(ctx context.Context, tx Querier, p *AckParams, a *render.Args, keys []any, idx *keyIndex, res *AckResult) error {
	var hs []lockedRow
	hint := s.hinted(ClaimVariant{})
	err := s.b.query(ctx, tx, s.st(claimKey{t: tAckLock, v: hint}), a, func(r Rows) error {
		var v, at sql.NullInt64
		if err := r.Scan(idx.dest(), &v, &at); err != nil {
			return err
		}
		if i, ok := idx.scanned(); ok {
			hs = append(hs, lockedRow{key: keys[i], pos: i, version: v.Int64, attempts: at.Int64})
		}
		return nil
	})
	if err != nil {
		return err
	}
	done, requeue, failed, pending := decide(p, hs, res)
	got := make([]bool, len(keys))
	for _, h := range hs {
		got[h.pos] = true
	}
	requeueV := hint
	requeueV.Undo = true
	groups := []struct {
		st   render.Stmt
		keys []any
	}{
		{s.st(claimKey{t: tAck, to: toDone, v: hint}), done}, {s.st(claimKey{t: tAck, to: toPending, v: requeueV}), requeue},
		{s.st(claimKey{t: tAck, to: toFailed, v: hint}), failed}, {s.st(claimKey{t: tAck, to: toPending, v: hint}), pending},
	}
	for _, g := range groups {
		if len(g.keys) == 0 {
			continue
		}
		ga := &render.Args{Token: p.Token, Keys: g.keys, Error: a.Error, Delay: a.Delay}
		if s.b.caps.Returning {
			// The statement returns rows; read them so that the driver
			// finishes it inside the transaction.
			err = s.b.query(ctx, tx, g.st, ga, func(Rows) error { return nil })
		} else {
			_, err = s.b.exec(ctx, tx, g.st, ga)
		}
		if err != nil {
			return fmt.Errorf("update: %w", err)
		}
	}
	if len(done) > 0 && s.moves(p) {
		if err := s.move(ctx, tx, done); err != nil {
			return err
		}
	}
	res.Lost = missing(got)
	return nil
}

// decide sorts the locked rows of the ack p by what it does to them: done,
// back to pending because their version moved since the claim (reported in
// res.Requeued), failed (a failure, or a retry that reached MaxAttempts:
// res.Parked), or back to pending.
func decide(p *AckParams, hs []lockedRow, res *AckResult) (done, requeue, failed, pending []any) {
	for _, h := range hs {
		switch p.Outcome {
		case OutcomeDone:
			if p.Versions != nil && h.version != p.Versions[h.pos] {
				requeue = append(requeue, h.key)
				res.Requeued = append(res.Requeued, h.pos)
			} else {
				done = append(done, h.key)
			}
		case OutcomeFailed:
			failed = append(failed, h.key)
		case OutcomeRetry:
			if p.MaxAttempts > 0 && h.attempts >= int64(p.MaxAttempts) {
				failed = append(failed, h.key)
				res.Parked = append(res.Parked, h.pos)
			} else {
				pending = append(pending, h.key)
			}
		}
	}
	return done, requeue, failed, pending
}

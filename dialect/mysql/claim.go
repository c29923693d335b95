package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/internal/sqlb"
)

type claimStore struct {
	d    *Dialect
	spec dialect.ClaimTable

	table, id, status, token, claimedAt, attempts, version string
	scope                                                  []string
	pending, processing, done, failed                      string

	claimSet    string // SET list of a claim (token is its one placeholder)
	claimUpdate string // with FORCE INDEX (the claim index)
	claimNoHint string // the same without the hint, for tables lacking the index
	noHint      atomic.Bool
	claimSelect string
	skipSelect  string // with FORCE INDEX (the claim index)
	skipNoHint  string
	// The *From forms add "AND key > ?" for the key cursor (integer keys).
	claimUpdateFrom string
	claimNoHintFrom string
	skipSelectFrom  string
	skipNoHintFrom  string
	cursor          keyCursor
	heartbeat       string
	heartbeatHeld   string
	statsAll        string
	statsScope      string
	decAttempts     string // ", attempts = GREATEST(attempts, 1) - 1" or ""
}

// ClaimStore implements [dialect.Dialect].
func (d *Dialect) ClaimStore(spec dialect.ClaimTable) (dialect.ClaimStore, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	s := &claimStore{
		d: d, spec: spec,
		table: quote(spec.Table), id: quote(spec.ID), status: quote(spec.Status),
		token: quote(spec.Token), claimedAt: quote(spec.ClaimedAt),
		pending: spec.Pending.Literal(), processing: spec.Processing.Literal(), done: spec.Done.Literal(),
	}
	if spec.Failed.IsSet() {
		s.failed = spec.Failed.Literal()
	}
	if spec.Attempts != "" {
		s.attempts = quote(spec.Attempts)
		// GREATEST(x, 1) - 1 never goes below zero, even on an UNSIGNED column.
		s.decAttempts = fmt.Sprintf(", %s = GREATEST(%s, 1) - 1", s.attempts, s.attempts)
	}
	if spec.Version != "" {
		s.version = quote(spec.Version)
	}
	for _, c := range spec.Scope {
		s.scope = append(s.scope, quote(c))
	}
	cols := []string{s.id}
	if s.version != "" {
		cols = append(cols, s.version)
	}
	for _, c := range spec.Columns {
		cols = append(cols, quote(c))
	}
	scopeAnd := ""
	if len(s.scope) > 0 {
		scopeAnd = sqlb.ScopeWhere(s.scope, 0, false, false) + " AND "
	}
	inc := ""
	if s.attempts != "" {
		inc = fmt.Sprintf(", %s = %s + 1", s.attempts, s.attempts)
	}
	s.claimSet = fmt.Sprintf("%s = %s, %s = ?, %s = %s%s", s.status, s.processing, s.token, s.claimedAt, now, inc)
	claimIdx := quote(dialect.IndexName(spec.Table, "claim"))
	// MariaDB (10.11 measured) does not pick the claim index for an UPDATE
	// that changes one of its columns: it range-scans the reaper's
	// (status, claimed_at) index and sorts every pending row, locking all of
	// them (100k pending rows: ~90 ms per claim, and every concurrent claim
	// waits). FORCE INDEX gives a range scan of the claim index.
	//
	// The UPDATE orders by the claim index's own columns, (scope..., status,
	// key), which for one scope and one status is key order. With a bare
	// ORDER BY key MariaDB 10.11 sorts instead of reading the index in order
	// whenever the connection's collation differs from the status column's
	// (utf8mb4_general_ci from Go against the utf8mb4_bin the schema helpers
	// create): it then reads and locks every pending row of the scope for
	// each claim (5,000 pending rows: 13 ms instead of 2 ms per claim, and
	// concurrent claims queue behind those locks). Listing the index columns
	// needs no such reasoning. The SKIP LOCKED SELECT is the other way
	// round: ORDER BY key reads the index in order there, and the long form
	// sorts.
	updOrder := sqlb.Join(append(append([]string{}, s.scope...), s.status, s.id))
	from := fmt.Sprintf(" AND %s > ?", s.id)
	update := func(hint, from string) string {
		return fmt.Sprintf("UPDATE %s%s SET %s WHERE %s%s = %s%s ORDER BY %s LIMIT ?",
			s.table, hint, s.claimSet, scopeAnd, s.status, s.pending, from, updOrder)
	}
	skip := func(hint, from string) string {
		return fmt.Sprintf("SELECT %s FROM %s%s WHERE %s%s = %s%s ORDER BY %s LIMIT ? FOR UPDATE SKIP LOCKED",
			s.id, s.table, hint, scopeAnd, s.status, s.pending, from, s.id)
	}
	hint := " FORCE INDEX (" + claimIdx + ")"
	s.claimUpdate, s.claimNoHint = update(hint, ""), update("", "")
	s.claimUpdateFrom, s.claimNoHintFrom = update(hint, from), update("", from)
	// Without the hint MariaDB 10.11 reads "key > ?" as a filter on a ref
	// scan of (scope, status) when the cursor is low, which walks the
	// delete-marked entries the cursor is there to skip.
	s.skipSelect, s.skipNoHint = skip(hint, ""), skip("", "")
	s.skipSelectFrom, s.skipNoHintFrom = skip(hint, from), skip("", from)
	s.cursor.enabled = spec.IDKind == dialect.IDInt
	s.claimSelect = fmt.Sprintf("SELECT %s FROM %s WHERE %s = ? ORDER BY %s", sqlb.Join(cols), s.table, s.token, s.id)
	s.heartbeat = fmt.Sprintf("UPDATE %[1]s SET %[2]s = GREATEST(%[3]s, COALESCE(%[2]s + INTERVAL 1 MICROSECOND, %[3]s)) WHERE %[4]s = ? AND %[5]s = %[6]s",
		s.table, s.claimedAt, now, s.token, s.status, s.processing)
	s.heartbeatHeld = fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s = ? AND %s = %s", s.table, s.token, s.status, s.processing)

	oldestPending := "NULL"
	if spec.CreatedAt != "" {
		oldestPending = micros(fmt.Sprintf("MIN(CASE WHEN %s = %s THEN %s END)", s.status, s.pending, quote(spec.CreatedAt)))
	}
	failedCount := "0"
	if s.failed != "" {
		failedCount = fmt.Sprintf("COALESCE(SUM(%s = %s), 0)", s.status, s.failed)
	}
	stats := fmt.Sprintf(
		"SELECT COALESCE(SUM(%[1]s = %[2]s), 0), COALESCE(SUM(%[1]s = %[3]s), 0), COALESCE(SUM(%[1]s = %[4]s), 0), %[5]s, COUNT(*), "+
			"%[6]s, %[7]s, %[8]s FROM %[9]s",
		s.status, s.pending, s.processing, s.done, failedCount,
		micros(fmt.Sprintf("MIN(CASE WHEN %s = %s THEN %s END)", s.status, s.processing, s.claimedAt)),
		oldestPending, micros(now), s.table)
	s.statsAll = stats
	s.statsScope = stats
	if len(s.scope) > 0 {
		s.statsScope = stats + " WHERE " + sqlb.ScopeWhere(s.scope, 0, false, false)
	}
	return s, nil
}

// Claim implements [dialect.ClaimStore].
//
// Token-update: UPDATE ... ORDER BY key LIMIT ? (autocommit in a READ
// COMMITTED session, else in a READ COMMITTED transaction), then SELECT ...
// WHERE token = ?. SKIP LOCKED: a READ COMMITTED transaction that selects the
// keys FOR UPDATE SKIP LOCKED and marks them, then the same SELECT. The rows
// are handed to scan only after the marking committed. A claim that fails
// with a broken connection may have marked rows under p.Token: they stay
// processing until the token is released or the reaper returns them.
func (s *claimStore) Claim(ctx context.Context, p *dialect.ClaimParams, scan func(dialect.Scanner) error) (int, error) {
	if err := s.spec.CheckClaim(p); err != nil {
		return 0, fmt.Errorf("mysql: claim: %w", err)
	}
	var marked int64
	var err error
	switch p.Strategy {
	case dialect.StrategyTokenUpdate:
		marked, err = s.markTokenUpdate(ctx, p)
	case dialect.StrategySkipLocked:
		if !s.d.caps.SkipLocked {
			_, err = s.d.caps.Resolve(dialect.StrategySkipLocked)
			return 0, fmt.Errorf("mysql: claim: %w", err)
		}
		marked, err = s.markSkipLocked(ctx, p)
	default:
		return 0, fmt.Errorf("%w: mysql: claim: strategy %v (resolve auto first)", dialect.ErrInvalidConfig, p.Strategy)
	}
	if err != nil {
		return 0, fmt.Errorf("mysql: claim: %w", err)
	}
	if marked == 0 {
		if p.Strategy == dialect.StrategyTokenUpdate {
			s.cursor.reset()
		}
		return 0, nil
	}
	var rows *sql.Rows
	err = s.d.do(ctx, "claim select", true, func() error {
		var err error
		rows, err = s.d.db.QueryContext(ctx, s.claimSelect, p.Token)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: claim: read claimed rows: %w", err)
	}
	defer rows.Close()
	n := 0
	var sc dialect.Scanner = rows
	var last lastKey
	if p.Strategy == dialect.StrategyTokenUpdate && s.cursor.enabled {
		last.rows = rows
		sc = &last
	}
	for rows.Next() {
		if err := scan(sc); err != nil {
			return n, err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("mysql: claim: read claimed rows: %w", interpretError(err))
	}
	if p.Strategy == dialect.StrategyTokenUpdate {
		if marked == int64(p.Limit) && last.ok {
			s.cursor.advance(last.key)
		} else {
			s.cursor.reset()
		}
	}
	return n, nil
}

// markTokenUpdate marks up to p.Limit rows. With a key cursor it first
// claims above the cursor; when that comes back short it claims the rest from
// the start of the scope, so a claim reports fewer rows than asked only after
// a scan from the start.
func (s *claimStore) markTokenUpdate(ctx context.Context, p *dialect.ClaimParams) (int64, error) {
	from, ok := s.cursor.from()
	var n int64
	if ok {
		args := make([]any, 0, 3+len(p.ScopeValues))
		args = append(args, p.Token)
		args = append(args, p.ScopeValues...)
		args = append(args, from, p.Limit)
		var err error
		if n, err = s.updateClaim(ctx, s.claimUpdateFrom, s.claimNoHintFrom, args); err != nil {
			return n, err
		}
		if n >= int64(p.Limit) {
			return n, nil
		}
	}
	args := make([]any, 0, 2+len(p.ScopeValues))
	args = append(args, p.Token)
	args = append(args, p.ScopeValues...)
	args = append(args, int64(p.Limit)-n)
	m, err := s.updateClaim(ctx, s.claimUpdate, s.claimNoHint, args)
	return n + m, err
}

// updateClaim runs one token-update claim statement (hinted, or unhinted
// when the claim index is missing) and returns the rows it marked.
func (s *claimStore) updateClaim(ctx context.Context, hinted, plain string, args []any) (int64, error) {
	var n int64
	err := s.d.do(ctx, "claim", false, func() error {
		return s.d.inReadCommitted(ctx, func(q querier) error {
			query := hinted
			if s.noHint.Load() {
				query = plain
			}
			r, err := q.ExecContext(ctx, query, args...)
			if isErrNumber(err, errKeyDoesNotExist) && !s.noHint.Load() {
				// The recommended claim index is missing (the claimer
				// warns about it): claim without the hint from now on.
				s.noHint.Store(true)
				r, err = q.ExecContext(ctx, plain, args...)
			}
			if err != nil {
				return err
			}
			n, err = r.RowsAffected()
			return err
		})
	})
	return n, err
}

// markSkipLocked selects and marks up to p.Limit rows in one transaction.
// With a key cursor it selects above the cursor first and, when that comes
// back short, selects again from the start of the scope (in the same
// transaction: rows it locked but does not mark stay pending).
func (s *claimStore) markSkipLocked(ctx context.Context, p *dialect.ClaimParams) (int64, error) {
	from, ok := s.cursor.from()
	args := make([]any, 0, 2+len(p.ScopeValues))
	args = append(args, p.ScopeValues...)
	var fromArgs []any
	if ok {
		fromArgs = append(append(make([]any, 0, 2+len(p.ScopeValues)), args...), from, p.Limit)
	}
	args = append(args, p.Limit)
	var n int64
	var ids []any
	err := s.d.do(ctx, "claim", false, func() error {
		n, ids = 0, nil
		return s.d.readCommittedTx(ctx, func(q querier) error {
			var err error
			if ok {
				if ids, err = s.selectSkipping(ctx, q, s.skipSelectFrom, s.skipNoHintFrom, fromArgs); err != nil {
					return err
				}
			}
			if len(ids) < p.Limit {
				if ids, err = s.selectSkipping(ctx, q, s.skipSelect, s.skipNoHint, args); err != nil || len(ids) == 0 {
					return err
				}
			}
			upd := fmt.Sprintf("UPDATE %s SET %s WHERE %s = %s AND %s IN (%s)",
				s.table, s.claimSet, s.status, s.pending, s.id, sqlb.Placeholders(len(ids), 0, false))
			r, err := q.ExecContext(ctx, upd, append([]any{p.Token}, ids...)...)
			if err != nil {
				return err
			}
			n, err = r.RowsAffected()
			return err
		})
	})
	if err == nil && n == int64(p.Limit) && len(ids) > 0 {
		if last, isInt := ids[len(ids)-1].(int64); isInt {
			s.cursor.advance(last)
		}
	} else if err == nil {
		s.cursor.reset()
	}
	return n, err
}

// selectSkipping runs one SKIP LOCKED select (hinted, or unhinted when the
// claim index is missing) and returns the keys it locked.
func (s *claimStore) selectSkipping(ctx context.Context, q querier, hinted, plain string, args []any) ([]any, error) {
	if s.noHint.Load() {
		return queryIDs(ctx, q, plain, args)
	}
	ids, err := queryIDs(ctx, q, hinted, args)
	if isErrNumber(err, errKeyDoesNotExist) {
		// The recommended claim index is missing (the claimer warns about
		// it): select without the hint from now on.
		s.noHint.Store(true)
		return queryIDs(ctx, q, plain, args)
	}
	return ids, err
}

func queryIDs(ctx context.Context, q querier, query string, args []any) ([]any, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []any
	for rows.Next() {
		var id any
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, key(id))
	}
	return ids, rows.Err()
}

// key normalises a scanned or caller-supplied key so equal keys compare
// equal: []byte becomes string, integers int64 (uint64 too, when it fits).
func key(v any) any {
	if u, ok := v.(uint64); ok && u <= math.MaxInt64 {
		return int64(u)
	}
	return sqlb.Key(v)
}

// Ack implements [dialect.ClaimStore]. Every path runs in a READ COMMITTED
// transaction. When each row's fate does not depend on the row (no versions,
// no MaxAttempts) it first tries one UPDATE ... WHERE token = ? AND key IN
// (...): it changes the status and clears the token of every row it matches,
// so its affected-rows count equals the matched rows on any DSN, and when it
// equals the number of keys the transaction commits. Otherwise (some row was
// lost, or the outcome is per row) it locks the rows the token still holds
// with SELECT ... FOR UPDATE, decides each one in Go, and updates them by
// group; keys the SELECT did not return are lost.
func (s *claimStore) Ack(ctx context.Context, p *dialect.AckParams) (dialect.AckResult, error) {
	var res dialect.AckResult
	if len(p.IDs) == 0 {
		return res, nil
	}
	if err := s.spec.CheckAck(p); err != nil {
		return res, fmt.Errorf("mysql: %w", err)
	}
	ids := make([]any, len(p.IDs))
	for i, id := range p.IDs {
		ids[i] = key(id)
	}
	idx := make(map[any]int, len(ids))
	for i, id := range ids {
		idx[id] = i
	}
	perRow := p.Versions != nil && p.Outcome == dialect.OutcomeDone || p.Outcome == dialect.OutcomeRetry && p.MaxAttempts > 0
	if !perRow {
		target := s.done
		switch p.Outcome {
		case dialect.OutcomeFailed:
			target = s.failed
		case dialect.OutcomeRetry:
			target = s.pending
		}
		q := fmt.Sprintf("UPDATE %s SET %s = %s, %s = NULL WHERE %s = ? AND %s IN (%s)",
			s.table, s.status, target, s.token, s.token, s.id, sqlb.Placeholders(len(ids), 0, false))
		args := append([]any{p.Token}, ids...)
		all := false
		err := s.d.do(ctx, "ack", false, func() error {
			err := s.d.readCommittedTx(ctx, func(tx querier) error {
				r, err := tx.ExecContext(ctx, q, args...)
				if err != nil {
					return err
				}
				n, err := r.RowsAffected()
				if err != nil {
					return err
				}
				if n != int64(len(idx)) {
					return errPartialAck
				}
				return nil
			})
			if err == errPartialAck {
				return nil
			}
			all = err == nil
			return err
		})
		if err != nil {
			return dialect.AckResult{}, fmt.Errorf("mysql: ack: %w", err)
		}
		if all {
			return res, nil
		}
	}
	err := s.d.do(ctx, "ack", false, func() error {
		res = dialect.AckResult{}
		return s.d.readCommittedTx(ctx, func(tx querier) error { return s.ackLocked(ctx, tx, p, ids, idx, &res) })
	})
	if err != nil {
		return dialect.AckResult{}, fmt.Errorf("mysql: ack: %w", err)
	}
	return res, nil
}

// errPartialAck rolls back a fast-path ack that did not match every key.
var errPartialAck = fmt.Errorf("mysql: ack matched fewer rows than keys")

// ackLocked is the per-row ack: lock what the token holds, decide, update.
func (s *claimStore) ackLocked(ctx context.Context, tx querier, p *dialect.AckParams, ids []any, idx map[any]int, res *dialect.AckResult) error {
	cols := s.id
	if s.version != "" {
		cols += ", " + s.version
	} else {
		cols += ", 0"
	}
	if s.attempts != "" {
		cols += ", " + s.attempts
	} else {
		cols += ", 0"
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s = ? AND %s IN (%s) FOR UPDATE",
		cols, s.table, s.token, s.id, sqlb.Placeholders(len(ids), 0, false))
	rows, err := tx.QueryContext(ctx, q, append([]any{p.Token}, ids...)...)
	if err != nil {
		return err
	}
	type held struct {
		id                any
		pos               int
		version, attempts int64
	}
	var hs []held
	for rows.Next() {
		var h held
		var id any
		var v, a sql.NullInt64
		if err := rows.Scan(&id, &v, &a); err != nil {
			rows.Close()
			return err
		}
		h.id = key(id)
		pos, ok := idx[h.id]
		if !ok {
			// The collation matched a key that differs from the caller's
			// bytes (case, trailing spaces): leave the row untouched, and
			// the caller's key is reported lost, which stays true to
			// "lost rows were not touched".
			continue
		}
		h.pos, h.version, h.attempts = pos, v.Int64, a.Int64
		hs = append(hs, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// Group the held rows by their new state.
	const (
		gDone = iota
		gRequeue
		gFailed
		gPending
		nGroups
	)
	var groups [nGroups][]any
	got := make(map[int]bool, len(hs))
	for _, h := range hs {
		got[h.pos] = true
		switch p.Outcome {
		case dialect.OutcomeDone:
			if p.Versions != nil && h.version != p.Versions[h.pos] {
				groups[gRequeue] = append(groups[gRequeue], h.id)
				res.Requeued = append(res.Requeued, h.pos)
			} else {
				groups[gDone] = append(groups[gDone], h.id)
			}
		case dialect.OutcomeFailed:
			groups[gFailed] = append(groups[gFailed], h.id)
		case dialect.OutcomeRetry:
			if p.MaxAttempts > 0 && h.attempts >= int64(p.MaxAttempts) {
				groups[gFailed] = append(groups[gFailed], h.id)
				res.Parked = append(res.Parked, h.pos)
			} else {
				groups[gPending] = append(groups[gPending], h.id)
			}
		}
	}
	sets := [nGroups]string{
		gDone:    fmt.Sprintf("%s = %s, %s = NULL", s.status, s.done, s.token),
		gRequeue: fmt.Sprintf("%s = %s, %s = NULL%s", s.status, s.pending, s.token, s.decAttempts),
		gFailed:  fmt.Sprintf("%s = %s, %s = NULL", s.status, s.failed, s.token),
		gPending: fmt.Sprintf("%s = %s, %s = NULL", s.status, s.pending, s.token),
	}
	for g, gids := range groups {
		if len(gids) == 0 {
			continue
		}
		q := fmt.Sprintf("UPDATE %s SET %s WHERE %s = ? AND %s IN (%s)",
			s.table, sets[g], s.token, s.id, sqlb.Placeholders(len(gids), 0, false))
		if _, err := tx.ExecContext(ctx, q, append([]any{p.Token}, gids...)...); err != nil {
			return err
		}
	}
	res.Lost = sqlb.Missing(len(ids), got)
	return nil
}

// Heartbeat implements [dialect.ClaimStore]: ClaimedAt moves to
// GREATEST(now, ClaimedAt + 1 microsecond), then the rows still held are
// counted. Counting instead of trusting affected rows keeps the answer right
// on a DATETIME column without microseconds, where the write can round to
// the old value and MySQL would report the row as unchanged.
func (s *claimStore) Heartbeat(ctx context.Context, token string) (int64, error) {
	var n int64
	err := s.d.do(ctx, "heartbeat", true, func() error {
		if _, err := s.d.db.ExecContext(ctx, s.heartbeat, token); err != nil {
			return err
		}
		return s.d.db.QueryRowContext(ctx, s.heartbeatHeld, token).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: heartbeat: %w", err)
	}
	return n, nil
}

// Release implements [dialect.ClaimStore]. It clears the token of every row
// it matches, so affected rows are matched rows.
func (s *claimStore) Release(ctx context.Context, token string, ids []any) (int64, error) {
	q := fmt.Sprintf("UPDATE %s SET %s = %s, %s = NULL%s WHERE %s = ? AND %s = %s",
		s.table, s.status, s.pending, s.token, s.decAttempts, s.token, s.status, s.processing)
	args := []any{token}
	if ids != nil {
		if len(ids) == 0 {
			return 0, nil
		}
		q += fmt.Sprintf(" AND %s IN (%s)", s.id, sqlb.Placeholders(len(ids), 0, false))
		for _, id := range ids {
			args = append(args, key(id))
		}
	}
	var n int64
	err := s.d.do(ctx, "release", false, func() error {
		r, err := s.d.db.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: release: %w", err)
	}
	return n, nil
}

// Reap implements [dialect.ClaimStore] with bounded UPDATE ... ORDER BY key
// LIMIT ? statements in READ COMMITTED: first parking (when MaxAttempts is
// positive), then returning.
func (s *claimStore) Reap(ctx context.Context, p *dialect.ReapParams) (dialect.ReapResult, error) {
	var res dialect.ReapResult
	if err := s.spec.CheckReap(p); err != nil {
		return res, fmt.Errorf("mysql: %w", err)
	}
	scope := ""
	var scopeArgs []any
	if p.ScopeValues != nil {
		scope = sqlb.ScopeWhere(s.scope, 0, false, true)
		scopeArgs = p.ScopeValues
	}
	us := p.Timeout.Microseconds()
	if us == 0 {
		us = 1
	}
	run := func(set, extra string) (int64, error) {
		q := fmt.Sprintf("UPDATE %s SET %s WHERE %s = %s AND %s < %s - INTERVAL ? MICROSECOND%s%s ORDER BY %s LIMIT ?",
			s.table, set, s.status, s.processing, s.claimedAt, now, extra, scope, s.id)
		args := append(append([]any{us}, scopeArgs...), p.Limit)
		var n int64
		err := s.d.do(ctx, "reap", false, func() error {
			return s.d.inReadCommitted(ctx, func(q2 querier) error {
				r, err := q2.ExecContext(ctx, q, args...)
				if err != nil {
					return err
				}
				n, err = r.RowsAffected()
				return err
			})
		})
		return n, err
	}
	var err error
	res.Parked, res.Returned, err = sqlb.ReapSteps(sqlb.ReapCols{
		Status: s.status, Token: s.token, Attempts: s.attempts, Pending: s.pending, Failed: s.failed,
	}, p.MaxAttempts, run)
	if err != nil {
		return res, fmt.Errorf("mysql: reap: %w", err)
	}
	return res, nil
}

// Stats implements [dialect.ClaimStore] with one scan.
func (s *claimStore) Stats(ctx context.Context, scopeValues []any) (dialect.Stats, error) {
	var st dialect.Stats
	q := s.statsAll
	if scopeValues != nil {
		if err := s.spec.CheckScope(len(scopeValues)); err != nil {
			return st, fmt.Errorf("mysql: stats: %w", err)
		}
		q = s.statsScope
	}
	var total, nowUS int64
	var oldProc, oldPend sql.NullInt64
	err := s.d.do(ctx, "stats", true, func() error {
		return s.d.db.QueryRowContext(ctx, q, scopeValues...).Scan(&st.Pending, &st.Processing, &st.Done, &st.Failed, &total, &oldProc, &oldPend, &nowUS)
	})
	if err != nil {
		return dialect.Stats{}, fmt.Errorf("mysql: stats: %w", err)
	}
	st.Other = total - st.Pending - st.Processing - st.Done - st.Failed
	if oldProc.Valid {
		st.OldestProcessing = max(time.Duration(nowUS-oldProc.Int64)*time.Microsecond, 0)
	}
	if oldPend.Valid {
		st.OldestPending = max(time.Duration(nowUS-oldPend.Int64)*time.Microsecond, 0)
	}
	return st, nil
}

// IndexDDL implements [dialect.ClaimStore]. MySQL has no CREATE INDEX IF NOT
// EXISTS; [Dialect.ExecDDL] skips an index that already exists.
func (s *claimStore) IndexDDL() []string {
	var out []string
	for _, ix := range s.spec.Indexes() {
		out = append(out, fmt.Sprintf("CREATE INDEX %s ON %s (%s)", quote(ix.Name), s.table, quoteAll(ix.Columns)))
	}
	return out
}

// MissingIndexes implements [dialect.ClaimStore] by index name, looking in
// information_schema.statistics of the table's schema (the current database
// unless the table is schema-qualified).
func (s *claimStore) MissingIndexes(ctx context.Context) ([]string, error) {
	schema, table := splitTable(s.spec.Table)
	ddl := s.IndexDDL()
	var out []string
	for i, ix := range s.spec.Indexes() {
		var n int
		err := s.d.do(ctx, "missing indexes", true, func() error {
			return s.d.db.QueryRowContext(ctx,
				"SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND index_name = ?",
				schema, table, ix.Name).Scan(&n)
		})
		if err != nil {
			return nil, fmt.Errorf("mysql: missing indexes: %w", err)
		}
		if n == 0 {
			out = append(out, ddl[i])
		}
	}
	return out, nil
}

// splitTable splits schema.table; schema is nil when the name has one part.
func splitTable(name string) (schema any, table string) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i], name[i+1:]
		}
	}
	return nil, name
}

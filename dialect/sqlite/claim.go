package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/internal/sqlb"
)

type claimStore struct {
	d    *Dialect
	spec dialect.ClaimTable

	table, id, status, token, claimedAt, attempts, version, createdAt string
	scope                                                             []string
	returning                                                         string

	claimSQL   string
	heartbeat  string
	statsAll   string
	statsScope string
	pending    string
	processing string
	done       string
	failed     string
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
	}
	if spec.Version != "" {
		s.version = quote(spec.Version)
	}
	if spec.CreatedAt != "" {
		s.createdAt = quote(spec.CreatedAt)
	}
	for _, c := range spec.Scope {
		s.scope = append(s.scope, quote(c))
	}
	ret := []string{s.id}
	if s.version != "" {
		ret = append(ret, s.version)
	}
	for _, c := range spec.Columns {
		ret = append(ret, quote(c))
	}
	s.returning = sqlb.Join(ret)

	inc := ""
	if s.attempts != "" {
		inc = fmt.Sprintf(", %s = %s + 1", s.attempts, s.attempts)
	}
	s.claimSQL = fmt.Sprintf(
		"UPDATE %[1]s SET %[2]s = %[3]s, %[4]s = ?, %[5]s = %[6]s%[7]s WHERE %[8]s IN (SELECT %[8]s FROM %[1]s WHERE %[2]s = %[9]s%[10]s ORDER BY %[8]s LIMIT ?) AND %[2]s = %[9]s RETURNING %[11]s",
		s.table, s.status, s.processing, s.token, s.claimedAt, nowMS, inc, s.id, s.pending,
		sqlb.ScopeWhere(s.scope, 0, false, true), s.returning)
	s.heartbeat = fmt.Sprintf("UPDATE %s SET %s = MAX(%s, %s + 1) WHERE %s = ? AND %s = %s",
		s.table, s.claimedAt, nowMS, s.claimedAt, s.token, s.status, s.processing)
	oldestPending := "NULL"
	if s.createdAt != "" {
		oldestPending = fmt.Sprintf("MIN(CASE WHEN %s = %s THEN %s END)", s.status, s.pending, s.createdAt)
	}
	failedCount := "0"
	if s.failed != "" {
		failedCount = fmt.Sprintf("COALESCE(SUM(%s = %s), 0)", s.status, s.failed)
	}
	stats := fmt.Sprintf(
		"SELECT COALESCE(SUM(%[1]s = %[2]s), 0), COALESCE(SUM(%[1]s = %[3]s), 0), COALESCE(SUM(%[1]s = %[4]s), 0), %[5]s, COUNT(*), "+
			"MIN(CASE WHEN %[1]s = %[3]s THEN %[6]s END), %[7]s, %[8]s FROM %[9]s%[10]s",
		s.status, s.pending, s.processing, s.done, failedCount, s.claimedAt, oldestPending, nowMS, s.table, "%s")
	s.statsAll = fmt.Sprintf(stats, "")
	s.statsScope = s.statsAll
	if len(s.scope) > 0 {
		s.statsScope = fmt.Sprintf(stats, " WHERE "+sqlb.ScopeWhere(s.scope, 0, false, false))
	}
	return s, nil
}

func (s *claimStore) Claim(ctx context.Context, p *dialect.ClaimParams, scan func(dialect.Scanner) error) (int, error) {
	if p.Strategy == dialect.StrategySkipLocked {
		return 0, fmt.Errorf("sqlite: claim: %w", &notSupported{"SKIP LOCKED"})
	}
	if err := s.spec.CheckClaim(p); err != nil {
		return 0, fmt.Errorf("sqlite: claim: %w", err)
	}
	args := make([]any, 0, 2+len(p.ScopeValues))
	args = append(args, p.Token)
	args = append(args, p.ScopeValues...)
	args = append(args, p.Limit)
	var n int
	err := s.d.retry.Do(ctx, "claim", func() error {
		n = 0
		rows, err := s.d.db.QueryContext(ctx, s.claimSQL, args...)
		if err != nil {
			return interpretError(err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
			n++
		}
		return interpretError(rows.Err())
	})
	if err != nil {
		return n, fmt.Errorf("sqlite: claim: %w", err)
	}
	return n, nil
}

type notSupported struct{ what string }

func (e *notSupported) Error() string        { return e.what + " is not supported by SQLite" }
func (e *notSupported) Is(target error) bool { return target == dialect.ErrNotSupported }

// Ack implements [dialect.ClaimStore]. Without versions it is one UPDATE ...
// RETURNING; with versions, two statements in one immediate transaction.
func (s *claimStore) Ack(ctx context.Context, p *dialect.AckParams) (dialect.AckResult, error) {
	var res dialect.AckResult
	if len(p.IDs) == 0 {
		return res, nil
	}
	if err := s.spec.CheckAck(p); err != nil {
		return res, fmt.Errorf("sqlite: %w", err)
	}
	in := sqlb.Placeholders(len(p.IDs), 0, false)
	if p.Versions != nil && p.Outcome == dialect.OutcomeDone {
		idx := sqlb.IndexOf(p.IDs)
		err := s.d.retry.Do(ctx, "ack", func() error {
			res = dialect.AckResult{}
			return s.d.immediate(ctx, func(c *sql.Conn) error { return s.ackVersioned(ctx, c, p, idx, &res) })
		})
		if err != nil {
			return dialect.AckResult{}, fmt.Errorf("sqlite: ack: %w", err)
		}
		return res, nil
	}
	set, statusCol := s.outcomeSet(p)
	// Only a retry with MaxAttempts can park a row: only then is the new
	// status worth returning.
	parking := p.Outcome == dialect.OutcomeRetry && s.failed != ""
	ret := s.id
	if parking {
		ret += ", " + statusCol
	}
	q := fmt.Sprintf("UPDATE %s SET %s WHERE %s = ? AND %s IN (%s) RETURNING %s", s.table, set, s.token, s.id, in, ret)
	args := make([]any, 0, 1+len(p.IDs))
	args = append(args, p.Token)
	args = append(args, p.IDs...)
	keys := newKeyIndex(p.IDs)
	got := make([]bool, len(p.IDs))
	err := s.d.retry.Do(ctx, "ack", func() error {
		res = dialect.AckResult{}
		clear(got)
		rows, err := s.d.db.QueryContext(ctx, q, args...)
		if err != nil {
			return interpretError(err)
		}
		defer rows.Close()
		var id any
		var st any
		dest := []any{&id}
		if parking {
			dest = append(dest, &st)
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			i, ok := keys.find(id)
			if !ok {
				continue
			}
			got[i] = true
			if parking && fmt.Sprint(sqlb.Key(st)) == s.spec.Failed.String() {
				res.Parked = append(res.Parked, i)
			}
		}
		if err := rows.Err(); err != nil {
			return interpretError(err)
		}
		for i, ok := range got {
			if !ok {
				res.Lost = append(res.Lost, i)
			}
		}
		return nil
	})
	if err != nil {
		return dialect.AckResult{}, fmt.Errorf("sqlite: ack: %w", err)
	}
	return res, nil
}

// outcomeSet returns the SET list for an ack outcome and the expression to
// RETURN as the new status.
func (s *claimStore) outcomeSet(p *dialect.AckParams) (set, status string) {
	switch p.Outcome {
	case dialect.OutcomeFailed:
		return fmt.Sprintf("%s = %s, %s = NULL", s.status, s.failed, s.token), s.status
	case dialect.OutcomeRetry:
		if p.MaxAttempts > 0 {
			return fmt.Sprintf("%s = CASE WHEN %s >= %d THEN %s ELSE %s END, %s = NULL",
				s.status, s.attempts, p.MaxAttempts, s.failed, s.pending, s.token), s.status
		}
		return fmt.Sprintf("%s = %s, %s = NULL", s.status, s.pending, s.token), s.status
	default:
		return fmt.Sprintf("%s = %s, %s = NULL", s.status, s.done, s.token), s.status
	}
}

func (s *claimStore) ackVersioned(ctx context.Context, c *sql.Conn, p *dialect.AckParams, idx map[any]int, res *dialect.AckResult) error {
	var cond strings.Builder
	args := []any{p.Token}
	for i, id := range p.IDs {
		if i > 0 {
			cond.WriteString(" OR ")
		}
		fmt.Fprintf(&cond, "(%s = ? AND %s = ?)", s.id, s.version)
		args = append(args, id, p.Versions[i])
	}
	got := make(map[int]bool, len(p.IDs))
	q := fmt.Sprintf("UPDATE %s SET %s = %s, %s = NULL WHERE %s = ? AND (%s) RETURNING %s",
		s.table, s.status, s.done, s.token, s.token, cond.String(), s.id)
	if err := collectIDs(ctx, c, q, args, idx, got, nil); err != nil {
		return err
	}
	dec := ""
	if s.attempts != "" {
		dec = fmt.Sprintf(", %s = MAX(%s - 1, 0)", s.attempts, s.attempts)
	}
	q = fmt.Sprintf("UPDATE %s SET %s = %s, %s = NULL%s WHERE %s = ? AND %s IN (%s) RETURNING %s",
		s.table, s.status, s.pending, s.token, dec, s.token, s.id, sqlb.Placeholders(len(p.IDs), 0, false), s.id)
	if err := collectIDs(ctx, c, q, append([]any{p.Token}, p.IDs...), idx, got, &res.Requeued); err != nil {
		return err
	}
	res.Lost = sqlb.Missing(len(p.IDs), got)
	return nil
}

func collectIDs(ctx context.Context, c *sql.Conn, q string, args []any, idx map[any]int, got map[int]bool, into *[]int) error {
	rows, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id any
		if err := rows.Scan(&id); err != nil {
			return err
		}
		if i, ok := idx[sqlb.Key(id)]; ok {
			got[i] = true
			if into != nil {
				*into = append(*into, i)
			}
		}
	}
	return rows.Err()
}

func (s *claimStore) Heartbeat(ctx context.Context, token string) (int64, error) {
	var n int64
	err := s.d.retry.Do(ctx, "heartbeat", func() error {
		r, err := s.d.db.ExecContext(ctx, s.heartbeat, token)
		if err != nil {
			return interpretError(err)
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: heartbeat: %w", err)
	}
	return n, nil
}

func (s *claimStore) Release(ctx context.Context, token string, ids []any) (int64, error) {
	dec := ""
	if s.attempts != "" {
		dec = fmt.Sprintf(", %s = MAX(%s - 1, 0)", s.attempts, s.attempts)
	}
	q := fmt.Sprintf("UPDATE %s SET %s = %s, %s = NULL%s WHERE %s = ? AND %s = %s",
		s.table, s.status, s.pending, s.token, dec, s.token, s.status, s.processing)
	args := []any{token}
	if ids != nil {
		if len(ids) == 0 {
			return 0, nil
		}
		q += fmt.Sprintf(" AND %s IN (%s)", s.id, sqlb.Placeholders(len(ids), 0, false))
		args = append(args, ids...)
	}
	var n int64
	err := s.d.retry.Do(ctx, "release", func() error {
		r, err := s.d.db.ExecContext(ctx, q, args...)
		if err != nil {
			return interpretError(err)
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: release: %w", err)
	}
	return n, nil
}

func (s *claimStore) Reap(ctx context.Context, p *dialect.ReapParams) (dialect.ReapResult, error) {
	var res dialect.ReapResult
	if err := s.spec.CheckReap(p); err != nil {
		return res, fmt.Errorf("sqlite: %w", err)
	}
	scope := ""
	var scopeArgs []any
	if p.ScopeValues != nil {
		scope = sqlb.ScopeWhere(s.scope, 0, false, true)
		scopeArgs = p.ScopeValues
	}
	ms := p.Timeout.Milliseconds()
	if ms == 0 {
		ms = 1
	}
	stale := fmt.Sprintf("%s = %s AND %s < %s - ?", s.status, s.processing, s.claimedAt, nowMS)
	run := func(set, extra string) (int64, error) {
		q := fmt.Sprintf("UPDATE %[1]s SET %[2]s WHERE %[3]s IN (SELECT %[3]s FROM %[1]s WHERE %[4]s%[5]s%[6]s ORDER BY %[3]s LIMIT ?) AND %[4]s%[5]s",
			s.table, set, s.id, stale, extra, scope)
		args := []any{ms}
		args = append(args, scopeArgs...)
		args = append(args, p.Limit, ms)
		var n int64
		err := s.d.retry.Do(ctx, "reap", func() error {
			r, err := s.d.db.ExecContext(ctx, q, args...)
			if err != nil {
				return interpretError(err)
			}
			n, err = r.RowsAffected()
			return err
		})
		return n, err
	}
	var err error
	res.Parked, res.Returned, err = sqlb.ReapSteps(sqlb.ReapCols{
		Status: s.status, Token: s.token, Attempts: s.attempts, Pending: s.pending, Failed: s.failed,
	}, p.MaxAttempts, run)
	if err != nil {
		return res, fmt.Errorf("sqlite: reap: %w", err)
	}
	return res, nil
}

func (s *claimStore) Stats(ctx context.Context, scopeValues []any) (dialect.Stats, error) {
	var st dialect.Stats
	q, args := s.statsAll, scopeValues
	if scopeValues != nil {
		if err := s.spec.CheckScope(len(scopeValues)); err != nil {
			return st, fmt.Errorf("sqlite: stats: %w", err)
		}
		q = s.statsScope
	}
	var total int64
	var oldProc, oldPend sql.NullInt64
	var now int64
	err := s.d.db.QueryRowContext(ctx, q, args...).Scan(&st.Pending, &st.Processing, &st.Done, &st.Failed, &total, &oldProc, &oldPend, &now)
	if err != nil {
		return st, fmt.Errorf("sqlite: stats: %w", interpretError(err))
	}
	st.Other = total - st.Pending - st.Processing - st.Done - st.Failed
	if oldProc.Valid {
		st.OldestProcessing = time.Duration(now-oldProc.Int64) * time.Millisecond
	}
	if oldPend.Valid {
		st.OldestPending = time.Duration(now-oldPend.Int64) * time.Millisecond
	}
	return st, nil
}

func (s *claimStore) IndexDDL() []string {
	var out []string
	for _, ix := range s.spec.Indexes() {
		cols := make([]string, len(ix.Columns))
		for i, c := range ix.Columns {
			cols[i] = quote(c)
		}
		out = append(out, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)", quote(ix.Name), s.table, sqlb.Join(cols)))
	}
	return out
}

func (s *claimStore) MissingIndexes(ctx context.Context) ([]string, error) {
	ddl := s.IndexDDL()
	var out []string
	for i, ix := range s.spec.Indexes() {
		var n int
		err := s.d.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?", ix.Name).Scan(&n)
		if err != nil {
			return nil, fmt.Errorf("sqlite: missing indexes: %w", err)
		}
		if n == 0 {
			out = append(out, ddl[i])
		}
	}
	return out, nil
}

// keyIndex finds a scanned key's position among an ack's keys. Integer keys
// (the common case) are looked up without boxing.
type keyIndex struct {
	ints map[int64]int
	any  map[any]int
}

func newKeyIndex(ids []any) keyIndex {
	ints := make(map[int64]int, len(ids))
	for i, id := range ids {
		k, ok := sqlb.Key(id).(int64)
		if !ok {
			return keyIndex{any: sqlb.IndexOf(ids)}
		}
		ints[k] = i
	}
	return keyIndex{ints: ints}
}

func (x keyIndex) find(id any) (int, bool) {
	if x.ints != nil {
		k, ok := id.(int64)
		if !ok {
			return 0, false
		}
		i, ok := x.ints[k]
		return i, ok
	}
	i, ok := x.any[sqlb.Key(id)]
	return i, ok
}

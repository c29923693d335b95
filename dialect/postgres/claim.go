package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/internal/sqlb"
)

// Table and CTE aliases used inside statements, so that columns of a
// schema-qualified table can be qualified without repeating the schema.
const (
	tAlias = "cl_t"
	cAlias = "cl_c"
)

type claimStore struct {
	d    *Dialect
	spec dialect.ClaimTable

	table, id, status, token, claimedAt, attempts, version, createdAt string
	scope                                                             []string
	pending, processing, done, failed                                 string
	// orderExpr is the plan-stable ordering expression: id + 0 or
	// (id || ''), which the primary key cannot supply.
	orderExpr string

	claimSkip, claimToken string
	pendingExists         string
	heartbeat             string
	statsAll, statsScope  string
	releaseAll, releaseIn string
	ackVersionDone        string
	ackVersionRequeue     string
	arrayType             string
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
	if spec.IDKind == dialect.IDText {
		s.orderExpr = "(" + s.id + " || '')"
		s.arrayType = "text[]"
	} else {
		s.orderExpr = s.id + " + 0"
		s.arrayType = "bigint[]"
	}

	ret := []string{tAlias + "." + s.id}
	if s.version != "" {
		ret = append(ret, tAlias+"."+s.version)
	}
	for _, c := range spec.Columns {
		ret = append(ret, tAlias+"."+quote(c))
	}
	returning := sqlb.Join(ret)
	inc := ""
	if s.attempts != "" {
		inc = fmt.Sprintf(", %s = %s.%s + 1", s.attempts, tAlias, s.attempts)
	}
	// Arguments: $1 token, $2.. scope values, then the limit.
	scopeWhere := sqlb.ScopeWhere(s.scope, 2, true, true)
	limitPH := fmt.Sprintf("$%d", 2+len(s.scope))
	claim := func(lock string) string {
		return fmt.Sprintf(
			"WITH %[1]s AS %[2]s(SELECT %[3]s FROM %[4]s WHERE %[5]s = %[6]s%[7]s ORDER BY %[8]s LIMIT %[9]s %[10]s) "+
				"UPDATE %[4]s AS %[11]s SET %[5]s = %[12]s, %[13]s = $1, %[14]s = now()%[15]s FROM %[1]s "+
				"WHERE %[11]s.%[3]s = %[1]s.%[3]s AND %[11]s.%[5]s = %[6]s RETURNING %[16]s",
			cAlias, d.materialized(), s.id, s.table, s.status, s.pending, scopeWhere, s.orderExpr, limitPH, lock,
			tAlias, s.processing, s.token, s.claimedAt, inc, returning)
	}
	s.claimSkip = claim("FOR UPDATE SKIP LOCKED")
	s.claimToken = claim("FOR UPDATE")
	s.pendingExists = fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s WHERE %s = %s%s)",
		s.table, s.status, s.pending, sqlb.ScopeWhere(s.scope, 1, true, true))

	s.heartbeat = fmt.Sprintf("UPDATE %s SET %s = GREATEST(now(), %s + interval '1 microsecond') WHERE %s = $1 AND %s = %s",
		s.table, s.claimedAt, s.claimedAt, s.token, s.status, s.processing)

	dec := ""
	if s.attempts != "" {
		dec = fmt.Sprintf(", %s = GREATEST(%s - 1, 0)", s.attempts, s.attempts)
	}
	s.releaseAll = fmt.Sprintf("UPDATE %s SET %s = %s, %s = NULL%s WHERE %s = $1 AND %s = %s",
		s.table, s.status, s.pending, s.token, dec, s.token, s.status, s.processing)
	s.releaseIn = s.releaseAll + fmt.Sprintf(" AND %s = ANY($2::%s)", s.id, s.arrayType)

	if s.version != "" {
		s.ackVersionDone = fmt.Sprintf(
			"UPDATE %[1]s AS %[2]s SET %[3]s = %[4]s, %[5]s = NULL FROM unnest($2::%[6]s, $3::bigint[]) AS v(id, ver) "+
				"WHERE %[2]s.%[5]s = $1 AND %[2]s.%[7]s = v.id AND %[2]s.%[8]s = v.ver RETURNING %[2]s.%[7]s",
			s.table, tAlias, s.status, s.done, s.token, s.arrayType, s.id, s.version)
		s.ackVersionRequeue = fmt.Sprintf("UPDATE %s SET %s = %s, %s = NULL%s WHERE %s = $1 AND %s = ANY($2::%s) RETURNING %s",
			s.table, s.status, s.pending, s.token, dec, s.token, s.id, s.arrayType, s.id)
	}

	oldestPending := "NULL::bigint"
	if s.createdAt != "" {
		oldestPending = ageMicros(fmt.Sprintf("MIN(%s) FILTER (WHERE %s = %s)", s.createdAt, s.status, s.pending))
	}
	failedCount := "0::bigint"
	if s.failed != "" {
		failedCount = fmt.Sprintf("COUNT(*) FILTER (WHERE %s = %s)", s.status, s.failed)
	}
	stats := fmt.Sprintf(
		"SELECT COUNT(*) FILTER (WHERE %[1]s = %[2]s), COUNT(*) FILTER (WHERE %[1]s = %[3]s), COUNT(*) FILTER (WHERE %[1]s = %[4]s), %[5]s, COUNT(*), %[6]s, %[7]s FROM %[8]s",
		s.status, s.pending, s.processing, s.done, failedCount,
		ageMicros(fmt.Sprintf("MIN(%s) FILTER (WHERE %s = %s)", s.claimedAt, s.status, s.processing)),
		oldestPending, s.table)
	s.statsAll = stats
	s.statsScope = stats
	if len(s.scope) > 0 {
		s.statsScope = stats + " WHERE " + sqlb.ScopeWhere(s.scope, 1, true, false)
	}
	return s, nil
}

// ageMicros renders the age of a time expression on the database clock in
// whole microseconds, never negative (NULL stays NULL).
func ageMicros(t string) string {
	return fmt.Sprintf("GREATEST(CAST(EXTRACT(EPOCH FROM (now() - %s)) * 1000000 AS bigint), 0)", t)
}

// Claim implements [dialect.ClaimStore] with one statement: a materialized
// CTE picks and locks the candidates (SKIP LOCKED, or waiting FOR UPDATE
// under the token-update strategy), the outer UPDATE marks them.
func (s *claimStore) Claim(ctx context.Context, p *dialect.ClaimParams, scan func(dialect.Scanner) error) (int, error) {
	if err := s.spec.CheckClaim(p); err != nil {
		return 0, fmt.Errorf("postgres: claim: %w", err)
	}
	q := s.claimSkip
	switch p.Strategy {
	case dialect.StrategyTokenUpdate:
		q = s.claimToken
	case dialect.StrategySkipLocked, dialect.StrategyAuto:
	default:
		return 0, fmt.Errorf("%w: postgres: claim: unknown strategy %d", dialect.ErrInvalidConfig, p.Strategy)
	}
	args := make([]any, 0, 2+len(p.ScopeValues))
	args = append(args, p.Token)
	args = append(args, p.ScopeValues...)
	args = append(args, int64(p.Limit))
	var n int
	run := func() error {
		return s.d.retry.Do(ctx, "claim", func() error {
			n = 0
			r, err := s.d.db.query(ctx, q, args...)
			if err != nil {
				return interpretError(err)
			}
			defer r.Close()
			for r.Next() {
				if err := scan(r); err != nil {
					return err
				}
				n++
			}
			return interpretError(r.Err())
		})
	}
	err := run()
	// With plain FOR UPDATE, PostgreSQL applies the LIMIT before locking:
	// a claim that waited behind concurrent claimers re-checks the rows it
	// waited for, drops those no longer pending, and can come back empty
	// while other rows are still pending. An empty token-update batch is
	// therefore confirmed against a plain read and the claim re-run (a few
	// times at most) while pending rows remain.
	for try := 0; err == nil && n == 0 && p.Strategy == dialect.StrategyTokenUpdate && try < maxEmptyReruns; try++ {
		var more bool
		if _, err = queryRow(ctx, s.d.db, s.pendingExists, p.ScopeValues, &more); err != nil || !more {
			break
		}
		err = run()
	}
	if err != nil {
		return n, fmt.Errorf("postgres: claim: %w", interpretError(err))
	}
	return n, nil
}

// maxEmptyReruns bounds the re-runs of a token-update claim that came back
// empty while pending rows remained.
const maxEmptyReruns = 8

// keys converts ack/release ids to a typed array ([]int64 or []string)
// matching the key kind, plus their normalised values for the index map.
func (s *claimStore) keys(ids []any) (any, []any, error) {
	norm := make([]any, len(ids))
	if s.spec.IDKind == dialect.IDText {
		out := make([]string, len(ids))
		for i, id := range ids {
			switch x := id.(type) {
			case string:
				out[i] = x
			case []byte:
				out[i] = string(x)
			default:
				return nil, nil, fmt.Errorf("%w: postgres: id %v has type %T; want a string", dialect.ErrInvalidConfig, id, id)
			}
			norm[i] = out[i]
		}
		return out, norm, nil
	}
	out := make([]int64, len(ids))
	for i, id := range ids {
		switch x := id.(type) {
		case int:
			out[i] = int64(x)
		case int8:
			out[i] = int64(x)
		case int16:
			out[i] = int64(x)
		case int32:
			out[i] = int64(x)
		case int64:
			out[i] = x
		case uint:
			if uint64(x) > math.MaxInt64 {
				return nil, nil, fmt.Errorf("%w: postgres: id %d overflows bigint", dialect.ErrInvalidConfig, x)
			}
			out[i] = int64(x)
		case uint8:
			out[i] = int64(x)
		case uint16:
			out[i] = int64(x)
		case uint32:
			out[i] = int64(x)
		case uint64:
			if x > math.MaxInt64 {
				return nil, nil, fmt.Errorf("%w: postgres: id %d overflows bigint", dialect.ErrInvalidConfig, x)
			}
			out[i] = int64(x)
		default:
			return nil, nil, fmt.Errorf("%w: postgres: id %v has type %T; want an integer", dialect.ErrInvalidConfig, id, id)
		}
		norm[i] = out[i]
	}
	return out, norm, nil
}

// ackSQL returns the one-statement ack for a non-versioned outcome. It
// returns each acked key and whether the row was parked as failed.
func (s *claimStore) ackSQL(p *dialect.AckParams) string {
	var set string
	parked := "false"
	switch p.Outcome {
	case dialect.OutcomeFailed:
		set = fmt.Sprintf("%s = %s", s.status, s.failed)
	case dialect.OutcomeRetry:
		if p.MaxAttempts > 0 {
			set = fmt.Sprintf("%s = CASE WHEN %s >= %d THEN %s ELSE %s END", s.status, s.attempts, p.MaxAttempts, s.failed, s.pending)
			parked = fmt.Sprintf("%s = %s", s.status, s.failed)
		} else {
			set = fmt.Sprintf("%s = %s", s.status, s.pending)
		}
	default:
		set = fmt.Sprintf("%s = %s", s.status, s.done)
	}
	return fmt.Sprintf("UPDATE %s SET %s, %s = NULL WHERE %s = $1 AND %s = ANY($2::%s) RETURNING %s, %s",
		s.table, set, s.token, s.token, s.id, s.arrayType, s.id, parked)
}

// Ack implements [dialect.ClaimStore]. Without versions it is one UPDATE ...
// RETURNING; with versions, two statements in one READ COMMITTED
// transaction: done where the version still matches, pending for the rest.
func (s *claimStore) Ack(ctx context.Context, p *dialect.AckParams) (dialect.AckResult, error) {
	var res dialect.AckResult
	if len(p.IDs) == 0 {
		return res, nil
	}
	if err := s.spec.CheckAck(p); err != nil {
		return res, fmt.Errorf("postgres: %w", err)
	}
	arr, _, err := s.keys(p.IDs)
	if err != nil {
		return res, err
	}
	idx := newKeyIndex(arr)
	versioned := p.Versions != nil && p.Outcome == dialect.OutcomeDone
	got := make([]bool, len(p.IDs))
	err = s.d.retry.Do(ctx, "ack", func() error {
		res = dialect.AckResult{}
		clear(got)
		if versioned {
			return s.d.inTx(ctx, func(tx querier) error {
				err := s.collect(ctx, tx, s.ackVersionDone, []any{p.Token, arr, p.Versions}, idx, false, func(i int, _ bool) {
					got[i] = true
				})
				if err != nil {
					return err
				}
				err = s.collect(ctx, tx, s.ackVersionRequeue, []any{p.Token, arr}, idx, false, func(i int, _ bool) {
					got[i] = true
					res.Requeued = append(res.Requeued, i)
				})
				res.Lost = missing(got)
				return err
			})
		}
		err := s.collect(ctx, s.d.db, s.ackSQL(p), []any{p.Token, arr}, idx, true, func(i int, parked bool) {
			got[i] = true
			if parked {
				res.Parked = append(res.Parked, i)
			}
		})
		if err != nil {
			return interpretError(err)
		}
		res.Lost = missing(got)
		return nil
	})
	if err != nil {
		return dialect.AckResult{}, fmt.Errorf("postgres: ack: %w", err)
	}
	return res, nil
}

// collect runs q, which returns a key per row (followed by a boolean
// "parked" flag when flagged), and calls fn with the index of each key that
// is one of the caller's ids.
func (s *claimStore) collect(ctx context.Context, db querier, q string, args []any, idx keyIndex, flagged bool, fn func(i int, parked bool)) error {
	r, err := db.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer r.Close()
	var iv int64
	var sv string
	var parked bool
	dest := make([]any, 1, 2)
	if idx.strs != nil {
		dest[0] = &sv
	} else {
		dest[0] = &iv
	}
	if flagged {
		dest = append(dest, &parked)
	}
	for r.Next() {
		parked = false
		if err := r.Scan(dest...); err != nil {
			return err
		}
		i, ok := idx.ints[iv]
		if idx.strs != nil {
			i, ok = idx.strs[sv]
		}
		if ok {
			fn(i, parked)
		}
	}
	return r.Err()
}

// keyIndex maps an ack's keys (as converted by keys) to their positions.
type keyIndex struct {
	ints map[int64]int
	strs map[string]int
}

func newKeyIndex(arr any) keyIndex {
	switch a := arr.(type) {
	case []string:
		m := make(map[string]int, len(a))
		for i, k := range a {
			m[k] = i
		}
		return keyIndex{strs: m}
	case []int64:
		m := make(map[int64]int, len(a))
		for i, k := range a {
			m[k] = i
		}
		return keyIndex{ints: m}
	}
	return keyIndex{ints: map[int64]int{}}
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

// Heartbeat implements [dialect.ClaimStore].
func (s *claimStore) Heartbeat(ctx context.Context, token string) (int64, error) {
	var n int64
	err := s.d.retry.Do(ctx, "heartbeat", func() error {
		var err error
		n, err = s.d.db.exec(ctx, s.heartbeat, token)
		return interpretError(err)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: heartbeat: %w", err)
	}
	return n, nil
}

// Release implements [dialect.ClaimStore].
func (s *claimStore) Release(ctx context.Context, token string, ids []any) (int64, error) {
	q, args := s.releaseAll, []any{token}
	if ids != nil {
		if len(ids) == 0 {
			return 0, nil
		}
		arr, _, err := s.keys(ids)
		if err != nil {
			return 0, err
		}
		q, args = s.releaseIn, append(args, arr)
	}
	var n int64
	err := s.d.retry.Do(ctx, "release", func() error {
		var err error
		n, err = s.d.db.exec(ctx, q, args...)
		return interpretError(err)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: release: %w", err)
	}
	return n, nil
}

// Reap implements [dialect.ClaimStore]: each statement locks at most
// p.Limit stale rows in key order with SKIP LOCKED in a materialized CTE
// (never a LIMIT subquery under IN, which PostgreSQL may re-run), parking
// first when MaxAttempts is set, then returning the rest to pending.
func (s *claimStore) Reap(ctx context.Context, p *dialect.ReapParams) (dialect.ReapResult, error) {
	var res dialect.ReapResult
	if err := s.spec.CheckReap(p); err != nil {
		return res, fmt.Errorf("postgres: %w", err)
	}
	scope := ""
	var scopeArgs []any
	if p.ScopeValues != nil {
		scope = sqlb.ScopeWhere(s.scope, 3, true, true)
		scopeArgs = p.ScopeValues
	}
	// Arguments: $1 timeout in microseconds, $2 limit, $3.. scope values.
	stale := fmt.Sprintf("%s = %s AND %s < now() - %s", s.status, s.processing, s.claimedAt, interval("$1"))
	run := func(set, extra string) (int64, error) {
		q := fmt.Sprintf(
			"WITH %[1]s AS %[2]s(SELECT %[3]s FROM %[4]s WHERE %[5]s%[6]s%[7]s ORDER BY %[3]s LIMIT $2 FOR UPDATE SKIP LOCKED) "+
				"UPDATE %[4]s AS %[8]s SET %[9]s FROM %[1]s WHERE %[8]s.%[3]s = %[1]s.%[3]s AND %[8]s.%[10]s = %[11]s",
			cAlias, s.d.materialized(), s.id, s.table, stale, extra, scope, tAlias, set, s.status, s.processing)
		args := append([]any{micros(p.Timeout), int64(p.Limit)}, scopeArgs...)
		var n int64
		err := s.d.retry.Do(ctx, "reap", func() error {
			var err error
			n, err = s.d.db.exec(ctx, q, args...)
			return interpretError(err)
		})
		return n, err
	}
	var err error
	res.Parked, res.Returned, err = sqlb.ReapSteps(sqlb.ReapCols{
		Status: s.status, Token: s.token, Attempts: s.attempts, Pending: s.pending, Failed: s.failed,
	}, p.MaxAttempts, run)
	if err != nil {
		return res, fmt.Errorf("postgres: reap: %w", err)
	}
	return res, nil
}

// Stats implements [dialect.ClaimStore] with one scan; ages are computed on
// the database clock.
func (s *claimStore) Stats(ctx context.Context, scopeValues []any) (dialect.Stats, error) {
	var st dialect.Stats
	q, args := s.statsAll, []any(nil)
	if scopeValues != nil {
		if err := s.spec.CheckScope(len(scopeValues)); err != nil {
			return st, fmt.Errorf("postgres: stats: %w", err)
		}
		q, args = s.statsScope, scopeValues
	}
	var total int64
	var oldProc, oldPend sql.NullInt64
	err := s.d.retry.Do(ctx, "stats", func() error {
		_, err := queryRow(ctx, s.d.db, q, args, &st.Pending, &st.Processing, &st.Done, &st.Failed, &total, &oldProc, &oldPend)
		return interpretError(err)
	})
	if err != nil {
		return dialect.Stats{}, fmt.Errorf("postgres: stats: %w", err)
	}
	st.Other = total - st.Pending - st.Processing - st.Done - st.Failed
	if oldProc.Valid {
		st.OldestProcessing = time.Duration(oldProc.Int64) * time.Microsecond
	}
	if oldPend.Valid {
		st.OldestPending = time.Duration(oldPend.Int64) * time.Microsecond
	}
	return st, nil
}

// index is one recommended index: its name and its DDL.
type index struct{ name, ddl string }

func (s *claimStore) indexes() []index {
	names := s.spec.Indexes() // the names; the claim index's columns differ here
	claimName, tokenName, reapName := names[0].Name, names[1].Name, names[2].Name
	cols := append(append([]string{}, s.scope...), "("+s.orderExpr+")")
	return []index{
		{claimName, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s) WHERE %s = %s",
			quote(claimName), s.table, sqlb.Join(cols), s.status, s.pending)},
		{tokenName, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)", quote(tokenName), s.table, s.token)},
		{reapName, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s, %s)", quote(reapName), s.table, s.status, s.claimedAt)},
	}
}

// IndexDDL implements [dialect.ClaimStore]: the partial claim index on
// (scope..., (id + 0)) WHERE status = pending (the expression the claim
// orders by, which the primary key cannot supply), the token index and the
// reaper's (status, claimed_at) index.
func (s *claimStore) IndexDDL() []string {
	var out []string
	for _, ix := range s.indexes() {
		out = append(out, ix.ddl)
	}
	return out
}

// schemaAndTable splits a validated table name; schema is "" when the name
// is not qualified.
func schemaAndTable(name string) (schema, table string) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i], name[i+1:]
		}
	}
	return "", name
}

// MissingIndexes implements [dialect.ClaimStore]. It looks the indexes up
// by name in pg_indexes, in the table's schema (current_schema() unless the
// table name is schema-qualified).
func (s *claimStore) MissingIndexes(ctx context.Context) ([]string, error) {
	schema, table := schemaAndTable(s.spec.Table)
	var schemaArg any
	if schema != "" {
		schemaArg = schema
	}
	ixs := s.indexes()
	names := make([]string, len(ixs))
	for i, ix := range ixs {
		names[i] = ix.name
	}
	have := map[string]bool{}
	err := s.d.retry.Do(ctx, "missing indexes", func() error {
		r, err := s.d.db.query(ctx,
			"SELECT indexname FROM pg_indexes WHERE schemaname = COALESCE($1::text, current_schema()) AND tablename = $2::text AND indexname = ANY($3::text[])",
			schemaArg, table, names)
		if err != nil {
			return interpretError(err)
		}
		defer r.Close()
		for r.Next() {
			var n string
			if err := r.Scan(&n); err != nil {
				return err
			}
			have[n] = true
		}
		return interpretError(r.Err())
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: missing indexes: %w", err)
	}
	var out []string
	for _, ix := range ixs {
		if !have[ix.name] {
			out = append(out, ix.ddl)
		}
	}
	return out, nil
}

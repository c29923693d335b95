package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store/render"
)

// Claims is the engine-neutral [ClaimStore] of one table.
type Claims struct {
	b     *Backend
	spec  dialect.ClaimTable
	names ClaimNames
	// stmts are the statements rendered for the table (claimstmts.go).
	stmts statements[claimKey]
	// runner runs the claims of an engine that runs them itself
	// ([ClaimOverride]); nil: the Claim statement.
	runner ClaimRunner
	// slack is added to the reap timeout: see defaultSlack.
	slack atomic.Int64
	// limits are the unix-time columns' limits, learnt by VerifySchema.
	limits atomic.Pointer[timeLimits]
	// cursors are the rotating claim cursors, by scope (cursor.go).
	cursors cursors
	// runAtSlack is the RunAt column's resolution, learnt by
	// VerifySchema: see delay.
	runAtSlack atomic.Int64
	// types are the types of the columns whose values calls pass or
	// bound, learnt by VerifySchema; nil before.
	types atomic.Pointer[claimTypes]
	// keyHint is set by VerifySchema when the key column leads the
	// primary key on a Driver that HintsKeys: the key-list statements
	// then name it.
	keyHint atomic.Bool
	// errorWidth is the Error column's width in characters, learnt by
	// VerifySchema (0: not learnt yet; -1: unbounded).
	errorWidth atomic.Int64
	// workerWidth is the Worker column's width in characters, as
	// errorWidth.
	workerWidth atomic.Int64
}

var (
	_ ClaimStore = (*Claims)(nil)
	_ IndexDDLer = (*Claims)(nil)
)

// newClaims validates spec and renders the engine's statements for it.
func newClaims(b *Backend, spec dialect.ClaimTable) (*Claims, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.TextTimes && !b.drv.SupportsTextTimes() {
		return nil, fmt.Errorf("%w: TextTimes: only SQLite keeps times as text; %s has time types", dialect.ErrInvalidConfig, b.drv.Name())
	}
	if spec.Archive != "" && b.claims.Archive == "" {
		return nil, fmt.Errorf("%w: Archive: %s has no archive statement", dialect.ErrNotSupported, b.drv.Name())
	}
	if !b.caps.Returning && b.claims.HeartbeatHeld == "" {
		return nil, fmt.Errorf("%w: %s: a heartbeat needs a statement listing the held keys (no UPDATE ... RETURNING)", dialect.ErrNotSupported, b.drv.Name())
	}
	s := &Claims{b: b, spec: spec, names: b.claimNames(spec)}
	var err error
	if s.stmts, err = b.renderClaims(spec, s.names); err != nil {
		return nil, err
	}
	s.slack.Store(int64(defaultSlack))
	if o, ok := b.drv.(ClaimOverride); ok {
		if s.runner, err = o.ClaimRunner(claimSteps{s}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// st returns the statement of key k (its SQL "" where the store has none).
func (s *Claims) st(k claimKey) render.Stmt { return s.stmts.get(k) }

// hinted is the variant of the key-list statements (acks, their row locks,
// releases of listed rows): naming the primary key once VerifySchema found
// the key column to be the primary key.
func (s *Claims) hinted(v ClaimVariant) ClaimVariant {
	v.KeyHint = s.keyHint.Load()
	return v
}

// claimTypes are the column types a claim store checks values against.
type claimTypes struct {
	scope    []colType
	attempts colType
}

// checkScopeValues refuses scope values that the scope columns would
// convert lossily or cannot hold, once the store knows the columns' types.
func (s *Claims) checkScopeValues(values []any) error {
	types := s.types.Load()
	if types == nil {
		return nil
	}
	for i, v := range values {
		if err := types.scope[i].checkValue(fmt.Sprintf("scope value %d (%s)", i, s.spec.Scope[i]), v); err != nil {
			return err
		}
	}
	return nil
}

// delay returns the delay to bind for a run-at d from now: d plus the
// RunAt column's resolution, so that a column holding whole seconds, which
// stores a time up to a second early, never lets a row be claimed before
// d has passed (zero stays zero: run now).
func (s *Claims) delay(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + time.Duration(s.runAtSlack.Load())
}

// timeLimits returns the limits VerifySchema learnt (nil before).
func (s *Claims) timeLimits() timeLimits {
	if p := s.limits.Load(); p != nil {
		return *p
	}
	return nil
}

// checkMaxAttempts refuses a MaxAttempts that the Attempts column cannot
// reach, once the store knows its type: no row would ever be parked (a
// claim would fail on the column's overflow first).
func (s *Claims) checkMaxAttempts(n int) error {
	if types := s.types.Load(); types != nil && n > 0 {
		return types.attempts.checkInt("MaxAttempts", int64(n))
	}
	return nil
}

// Claim implements [ClaimStore].
func (s *Claims) Claim(ctx context.Context, p *ClaimParams, scan func(Scanner) error) (int, error) {
	if err := checkClaim(s.spec, p); err != nil {
		return 0, err
	}
	if err := s.checkScopeValues(p.ScopeValues); err != nil {
		return 0, err
	}
	p, err := s.withWorker(ctx, p)
	if err != nil {
		return 0, err
	}
	st, err := s.claimStmt(p)
	if err != nil {
		return 0, err
	}
	if s.runner != nil {
		n, err := s.runner.Claim(ctx, p, scan)
		return n, err
	}
	cur := s.cursors.get(p.ScopeValues)
	a := &render.Args{Token: p.Token, Worker: p.Worker, Limit: p.Limit, Scope: p.ScopeValues, After: cur.after(s.spec.IDKind)}
	var n int
	var keys []any
	err = s.b.Do(ctx, "claim", false, func() error {
		n, keys = 0, keys[:0]
		return s.b.query(ctx, s.b.db, st, a, counting(&n, s.recordKeys(scan, &keys), nil))
	})
	if err == nil {
		cur.advance(a.After, keys)
	}
	return n, err
}

// claimStmt returns the claim statement of p's strategy (one statement
// serves both), or an error for a strategy the server lacks or an
// unresolved one.
func (s *Claims) claimStmt(p *ClaimParams) (render.Stmt, error) {
	switch p.Strategy {
	case dialect.StrategyTokenUpdate:
		return s.st(claimKey{t: tClaim}), nil
	case dialect.StrategySkipLocked:
		if !s.b.caps.SkipLocked {
			_, err := s.b.caps.Resolve(p.Strategy)
			return render.Stmt{}, err
		}
		return s.st(claimKey{t: tClaim}), nil
	}
	return render.Stmt{}, fmt.Errorf("%w: strategy %v (resolve auto first)", dialect.ErrInvalidConfig, p.Strategy)
}

// Read implements [ClaimStore].
func (s *Claims) Read(ctx context.Context, token string, ids []any, scan func(Scanner) error) (int, error) {
	st, a, none, err := s.tokenStmt(tReadBack, ClaimVariant{ByKeys: true}, token, ids)
	if err != nil || none {
		return 0, err
	}
	return s.read(ctx, st, a, scan, nil)
}

// tokenStmt returns the statement t of token's rows and its arguments:
// all of them (ids nil), or those of ids (the variant byKeys). none
// reports an empty ids, which needs no statement.
func (s *Claims) tokenStmt(t claimTmpl, byKeys ClaimVariant, token string, ids []any) (st render.Stmt, a *render.Args, none bool, err error) {
	if token == "" {
		return st, nil, false, fmt.Errorf("%w: empty token", dialect.ErrInvalidConfig)
	}
	a = &render.Args{Token: token}
	if ids == nil {
		return s.st(claimKey{t: t}), a, false, nil
	}
	if len(ids) == 0 {
		return st, nil, true, nil
	}
	if a.Keys, err = normalizeKeys(s.spec.IDKind, ids); err != nil {
		return st, nil, false, err
	}
	return s.st(claimKey{t: t, v: byKeys}), a, false, nil
}

func (s *Claims) read(ctx context.Context, st render.Stmt, a *render.Args, scan func(Scanner) error, wrapScan func(Scanner) Scanner) (int, error) {
	n := 0
	err := s.b.Do(ctx, "read back", true, func() error {
		n = 0
		return s.b.query(ctx, s.b.db, st, a, counting(&n, scan, wrapScan))
	})
	return n, err
}

// counting returns a row callback for Query that hands each row to scan
// (through wrapScan, if set) and counts the rows in *n.
func counting(n *int, scan func(Scanner) error, wrapScan func(Scanner) Scanner) func(Rows) error {
	return func(r Rows) error {
		var sc Scanner = r
		if wrapScan != nil {
			sc = wrapScan(r)
		}
		if err := scan(sc); err != nil {
			return err
		}
		*n++
		return nil
	}
}

// Heartbeat implements [ClaimStore]: one statement that returns the held
// keys where UPDATE has RETURNING, else the update and a read of the keys
// the token holds after it.
func (s *Claims) Heartbeat(ctx context.Context, token string) ([]any, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: empty token", dialect.ErrInvalidConfig)
	}
	a := &render.Args{Token: token}
	var held []any
	err := s.b.Do(ctx, "heartbeat", true, func() error {
		held = held[:0]
		beat := s.st(claimKey{t: tHeartbeat})
		list := beat
		if s.stmts.has(claimKey{t: tHeartbeatHeld}) {
			if _, err := s.b.exec(ctx, s.b.db, beat, a); err != nil {
				return err
			}
			list = s.st(claimKey{t: tHeartbeatHeld})
		}
		return s.b.query(ctx, s.b.db, list, a, func(r Rows) error {
			k, err := scanKey(r, s.spec.IDKind)
			held = append(held, k)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return held, nil
}

// scanKey scans the one key column of r in its normalised form: an int64
// for integer keys, a string for text keys.
func scanKey(r Rows, kind dialect.IDKind) (any, error) {
	if kind == dialect.IDText {
		var k string
		err := r.Scan(&k)
		return k, err
	}
	var k int64
	err := r.Scan(&k)
	return k, err
}

// Release implements [ClaimStore].
func (s *Claims) Release(ctx context.Context, token string, ids []any) (int64, error) {
	st, a, none, err := s.tokenStmt(tRelease, s.hinted(ClaimVariant{ByKeys: true}), token, ids)
	if err != nil || none {
		return 0, err
	}
	var n int64
	err = s.b.Do(ctx, "release", false, func() error {
		var err error
		n, err = s.b.exec(ctx, s.b.db, st, a)
		return err
	})
	s.pending(ctx, nil, n)
	return n, err
}

// Reap implements [ClaimStore]: when MaxAttempts is set it first
// parks the stale rows whose attempts reached it, then it returns the rest
// of the stale rows to pending, each step one bounded statement.
func (s *Claims) Reap(ctx context.Context, p *ReapParams) (ReapResult, error) {
	var res ReapResult
	if err := checkReap(s.spec, p); err != nil {
		return res, err
	}
	if err := s.checkMaxAttempts(p.MaxAttempts); err != nil {
		return res, err
	}
	if err := s.checkScopeValues(p.ScopeValues); err != nil {
		return res, err
	}
	// A row is stale when its claimed-at time is older than the timeout plus
	// the column's resolution, so a time stored rounded down never makes a
	// row look stale early.
	timeout := p.Timeout + time.Duration(s.slack.Load())
	a := &render.Args{Timeout: timeout, Limit: p.Limit, MaxAttempts: p.MaxAttempts, Scope: p.ScopeValues, Below: int64(p.MaxAttempts)}
	// A sweep without MaxAttempts returns every stale row; with it, it parks
	// those whose attempts reached it, then returns those below it, binding
	// no attempts bound at all without it, so that nothing larger than the
	// Attempts column's type is ever passed.
	v := ClaimVariant{Scoped: p.ScopeValues != nil}
	var err error
	if p.MaxAttempts > 0 {
		park := v
		park.Park = true
		if res.Parked, err = s.reapStep(ctx, park, a); err != nil {
			return res, err
		}
		v.Below = true
	}
	res.Returned, err = s.reapStep(ctx, v, a)
	s.pending(ctx, p.ScopeValues, res.Returned)
	return res, err
}

// reapStep runs the reap statement of variant v: on a server with SKIP
// LOCKED and an engine with ReapLock, the lock of the stale rows' keys and
// the update of those in one transaction; otherwise the one statement, in
// a transaction of its own where the engine's sessions are not READ
// COMMITTED.
func (s *Claims) reapStep(ctx context.Context, v ClaimVariant, a *render.Args) (int64, error) {
	st, lock := s.st(claimKey{t: tReap, v: v}), s.st(claimKey{t: tReapLock, v: v})
	// The update of the locked keys is a return or a park: which keys is
	// the lock's business (Below).
	kv := v
	kv.Below = false
	update := s.st(claimKey{t: tReapKeys, v: kv})
	var n int64
	err := s.b.Do(ctx, "reap", false, func() error {
		if lock.SQL != "" {
			return s.b.InTx(ctx, func(tx Querier) error {
				var err error
				n, err = s.reapSkipping(ctx, tx, lock, update, a)
				return err
			})
		}
		if !s.b.drv.IsolatesWrites() {
			var err error
			n, err = s.b.exec(ctx, s.b.db, st, a)
			return err
		}
		return s.b.InTx(ctx, func(tx Querier) error {
			var err error
			n, err = s.b.exec(ctx, tx, st, a)
			return err
		})
	})
	return n, err
}

// reapSkipping locks the keys of stale rows that are not locked now and
// updates them, in the caller's transaction.
func (s *Claims) reapSkipping(ctx context.Context, tx Querier, lock, update render.Stmt, a *render.Args) (int64, error) {
	var keys []any
	err := s.b.query(ctx, tx, lock, a, func(r Rows) error {
		var id any
		if err := r.Scan(&id); err != nil {
			return err
		}
		k, err := NormalizeKey(s.spec.IDKind, id)
		keys = append(keys, k)
		return err
	})
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	b := *a
	b.Keys = keys
	return s.b.exec(ctx, tx, update, &b)
}

// Stats implements [ClaimStore] with one statement; ages are
// computed on the database clock.
func (s *Claims) Stats(ctx context.Context, scopeValues []any) (Stats, error) {
	var st Stats
	stmt := s.st(claimKey{t: tStats})
	if scopeValues != nil {
		if err := checkScope(s.spec, len(scopeValues)); err != nil {
			return st, err
		}
		if err := s.checkScopeValues(scopeValues); err != nil {
			return st, err
		}
		stmt = s.st(claimKey{t: tStats, v: ClaimVariant{Scoped: true}})
	}
	var total int64
	var oldProc, oldPend sql.NullInt64
	err := s.b.Do(ctx, "stats", true, func() error {
		_, err := s.b.queryRow(ctx, s.b.db, stmt, &render.Args{Scope: scopeValues},
			&st.Pending, &st.Processing, &st.Done, &st.Failed, &total, &oldProc, &oldPend)
		return err
	})
	if err != nil {
		return Stats{}, err
	}
	st.Other = total - st.Pending - st.Processing - st.Done - st.Failed
	st.OldestProcessing = max(time.Duration(oldProc.Int64)*time.Microsecond, 0)
	st.OldestPending = max(time.Duration(oldPend.Int64)*time.Microsecond, 0)
	return st, nil
}

// Statements returns every statement of the store that the claim table
// lists by name (claimstmts.go), with the engine's placeholders: for tests
// and EXPLAIN checks. Where the server has SKIP LOCKED, "claim skip
// locked" is the claim statement (it serves both strategies).
func (s *Claims) Statements() map[string]string {
	m := s.stmts.sqlByName()
	if q, ok := m["claim"]; ok && s.b.caps.SkipLocked {
		m["claim skip locked"] = q
	}
	return m
}

// Rendered returns every statement rendered for the store, in the order
// they were rendered: for the golden files.
func (s *Claims) Rendered() []Rendered { return s.stmts.rendered }

// Bind returns the statement Statements calls name, with its arguments
// taken from a in the order of its placeholders: for EXPLAIN checks. ok is
// false when the store has no such statement.
func (s *Claims) Bind(name string, a *render.Args) (query string, args []any, ok bool) {
	if name == "claim skip locked" && s.b.caps.SkipLocked {
		name = "claim"
	}
	return s.stmts.bind(s.b, name, a)
}

// checkClaim validates the params of [ClaimStore.Claim]. The strategy is
// the engine's to check.
func checkClaim(s dialect.ClaimTable, p *ClaimParams) error {
	if p.Token == "" {
		return fmt.Errorf("%w: empty claim token", dialect.ErrInvalidConfig)
	}
	if p.Limit <= 0 {
		return fmt.Errorf("%w: claim limit must be positive, got %d", dialect.ErrInvalidConfig, p.Limit)
	}
	return checkScope(s, len(p.ScopeValues))
}

// checkScope reports whether n scope values fit the table's Scope columns.
func checkScope(s dialect.ClaimTable, n int) error {
	if n != len(s.Scope) {
		return fmt.Errorf("%w: %d scope values for %d scope columns", dialect.ErrInvalidConfig, n, len(s.Scope))
	}
	return nil
}

// withWorker returns p with its Worker ready for the Worker column: valid
// UTF-8 without NUL bytes, cut to the column's width (learnt from the
// catalog the first time if VerifySchema has not), or "" without the
// column. p itself is not changed.
func (s *Claims) withWorker(ctx context.Context, p *ClaimParams) (*ClaimParams, error) {
	if s.names.Worker == "" || p.Worker == "" {
		return p, nil
	}
	if err := s.ensureWidths(ctx); err != nil {
		return nil, err
	}
	w := strings.ReplaceAll(strings.ToValidUTF8(p.Worker, "\uFFFD"), "\x00", "\uFFFD")
	if n := s.workerWidth.Load(); n > 0 && int64(utf8.RuneCountInString(w)) > n {
		w = cutRunes(w, int(n))
	}
	q := *p
	q.Worker = w
	return &q, nil
}

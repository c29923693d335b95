package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// ClaimSQL are an engine's claim-table statements as text/template sources
// over [Names]. Values are placeholders: {{arg "token"}}, {{arg "limit"}},
// {{arg "timeout"}} (a duration in the engine's time unit),
// {{arg "max_attempts"}} (through {{template "maxatt" .}}, which every
// engine defines: its placeholder, typed where the engine would otherwise
// take the Attempts column's type for it), {{scope .Scope}} for
// " AND col = ?" per scope column, and {{keys}} for the condition on a list
// of keys.
type ClaimSQL struct {
	// Claim marks up to "limit" pending rows in scope under "token" and,
	// on a Returning engine, returns Names.Returned. It takes the rows in
	// rotating key order (cursor.go): the pending rows whose key is above
	// "after" in key order, then, to fill the limit, those from the lowest
	// key up to "after". It serves both
	// strategies: a Returning engine's claim never waits for row locks
	// (PostgreSQL: SKIP LOCKED; SQLite: one writer). Engines without
	// RETURNING leave it empty and implement [Claimer].
	Claim string
	// ReadBack returns Names.Returned of the rows "token" holds (with
	// ByKeys, only the {{keys}} rows), in key order.
	ReadBack string
	// Ack sets Target (or, with ParkAt, the failed status where attempts
	// reached "max_attempts" and pending elsewhere), clears the token and,
	// with Undo, undoes the attempts increment, for the {{keys}} rows
	// "token" holds. On a Returning engine it returns the key and a boolean
	// "parked" for each row it changed.
	Ack string
	// AckLock locks and returns key, version (0 without) and attempts (0
	// without) of the {{keys}} rows "token" holds, for acks decided row by
	// row inside a transaction.
	AckLock string
	// Heartbeat moves the claimed-at time of the rows "token" holds
	// strictly forward to the database clock. On a Returning engine it
	// returns the key of each row it moved.
	Heartbeat string
	// HeartbeatHeld lists the keys of the rows "token" holds after a
	// heartbeat, on engines without UPDATE ... RETURNING (required there).
	HeartbeatHeld string
	// Release returns the processing rows "token" holds (with ByKeys, only
	// the {{keys}} rows) to pending, clearing the token and undoing the
	// attempts increment.
	Release string
	// Reap parks (Park: attempts at "max_attempts") or returns to pending
	// (token cleared) at most "limit" rows processing for longer than
	// "timeout" on the database clock (Scoped: in scope). With an Attempts
	// column the return takes only rows with fewer than "below" attempts:
	// a row that went stale between the park and the return statement of
	// one sweep is parked by the next sweep, never returned to be claimed
	// beyond MaxAttempts (the model in model/ found that gap).
	Reap string
	// ReapLock and ReapKeys, if set, replace Reap where the server has
	// SKIP LOCKED (engines whose Reap is an UPDATE ... LIMIT that would wait
	// for locked rows: MySQL). In one transaction ReapLock selects and locks
	// the keys of at most "limit" stale rows, skipping rows locked now, and
	// ReapKeys updates those {{keys}} rows as Reap would: they are locked,
	// so they are still stale.
	ReapLock, ReapKeys string
	// Unpark returns at most "limit" failed rows (Scoped: in scope;
	// ByKeys: of the {{keys}}) to pending, clearing token, Error and RunAt
	// and, with Reset, the attempts. Empty without a failed status.
	Unpark string
	// RetryNow sets RunAt to NULL for at most "limit" pending rows (Scoped,
	// ByKeys as Unpark) whose RunAt is in the future.
	RetryNow string
	// List returns at most "limit" rows of the set Set (0 failed, oldest
	// claim first; 1 processing for "older" or longer, oldest first; 2
	// pending with a future RunAt, soonest first), Scoped as Unpark: key, token (''), attempts (0), age of ClaimedAt in
	// microseconds (-1 when NULL), microseconds until RunAt (0 when NULL or
	// past) and error ('').
	List string
	// Stats returns one row: pending, processing, done, failed and total
	// counts, then the ages in microseconds on the database clock of the
	// oldest processing row (by claimed-at) and of the oldest pending row
	// (by created-at), NULL when there is none (Scoped: in scope).
	Stats string
	// Columns lists the table's columns of "schema" (NULL: the current
	// one) and "table", one row each: name, character length (0 when not
	// bounded), data type, fractional-second precision (-1 when not a time
	// column), collation ("" when unknown), whether it is nullable, the
	// full declared type ([ColumnInfo.ColumnType]; "" when the data type
	// says it all) and whether it is the table's primary key by itself.
	Columns string
	// IndexExists counts the indexes named "index" of "schema"."table" in
	// one row: those queries can use, then all of them (an engine whose
	// indexes are never invalid counts the same ones twice).
	IndexExists string
	// Indexes are the recommended indexes' DDL by kind: claim, token,
	// reap, scope (scoped tables) and sched (tables with RunAt), each
	// rendered with IndexCols set to the portable definition's columns
	// ([Indexes]), and with Online for the form of
	// [IndexOptions.Online]. An engine leaves the scope index empty
	// when its claim index serves scoped Stats: it is then neither created
	// nor reported missing.
	Indexes [5]string
	// DropIndex, if set, drops the index IndexName (quoted, qualified by
	// the table's schema), with Online as for Indexes: MissingIndexes puts
	// it before the CREATE INDEX of an index IndexExists found invalid
	// (PostgreSQL: left by a failed CREATE INDEX CONCURRENTLY), which the
	// CREATE INDEX ... IF NOT EXISTS would skip.
	DropIndex string
	// AckClaim, if set, is the ack of Ack (rendered with Pipelined: its
	// token is "ack_token"; Target and ParkAt as for Ack) and the claim of
	// Claim in one statement (see pipeline.go). Engines without it run the
	// two in one transaction.
	AckClaim string
	// Archive copies the {{keys}} rows that are done with no token
	// (acked by this transaction, which holds their locks) to the archive
	// table (Names.Archive), whose columns are the table's in the same
	// order, and returns nothing; affected rows are the rows copied. An
	// engine may also delete them in the same statement (PostgreSQL: a
	// data-modifying CTE) and leave Purge empty.
	Archive string
	// Purge, if set, deletes the rows Archive copied (same condition).
	Purge string
	// Held are the held-transaction claim's statements (empty: none).
	Held HeldSQL
	// Common is prepended to every template: {{define}} blocks the others
	// share.
	Common string
}

// coreDefines are template fragments every engine's claim statements may
// use: "cleartime" is ", claimed_at = NULL" for a row going back to pending
// when the table asks for it (ClaimTable.ClearClaimedAt).
//
// "ackmark" is what an ack sets besides the status and token: with an Error
// column, a failure stores "error" and a done clears it (a requeue leaves
// it); with a RunAt column, a retry sets it to {{template "delayed" .}},
// which every engine defines as its clock's now plus "delay", and a
// parking retry sets it to NULL on the rows it parks (where attempts
// reached {{template "maxatt" .}}, which every engine defines too).
const coreDefines = `{{define "cleartime"}}{{if .ClearClaimedAt}}, {{.ClaimedAt}} = NULL{{end}}{{end}}
{{- define "ackmark"}}
  {{- if and .Error (not .Undo)}}, {{.Error}} = {{if eq .Target .Done}}NULL{{else}}{{arg "error"}}{{end}}{{end}}
  {{- if and .RunAt (not .Undo) (eq .Target .Pending)}}, {{.RunAt}} = {{template "delayed" .}}{{end}}
  {{- if and .RunAt .Failed (eq .Target .Failed)}}, {{.RunAt}} = NULL{{end}}
  {{- if and .RunAt .ParkAt}}, {{.RunAt}} = CASE WHEN COALESCE({{.Attempts}}, 0) >= {{template "maxatt" .}} THEN NULL ELSE {{template "delayed" .}} END{{end}}
{{- end}}`

// ClaimFunc runs one claim with params the store validated already.
type ClaimFunc func(ctx context.Context, p *ClaimParams, scan func(Scanner) error) (int, error)

// Claimer prepares the claim of one store, for engines whose claim is not
// one statement with RETURNING (MySQL); it may keep per-store state.
type Claimer func(s *Claims) (ClaimFunc, error)

// Claims is the engine-neutral [ClaimStore].
type Claims struct {
	E     *Engine
	Spec  dialect.ClaimTable
	Names Names
	// rendered are the statements rendered for the store, in order.
	rendered []Rendered

	claim, claimSkip, readBack, readKeys Stmt
	keyed                                [2]keyStmts // [Names.KeyHint]: see key()
	ackPark                              Stmt
	archive, purge                       Stmt // ClaimTable.Archive: see move
	held                                 heldStmts
	heartbeat, heartbeatHeld             Stmt
	release                              Stmt
	reap, reapLock                       [3][2]Stmt // [reapAll, reapPark, reapBelow][scoped]; reapLock optional
	reapKeys                             [2][2]Stmt // [park][scoped], optional
	stats                                [2]Stmt    // [scoped]
	snooze                               Stmt
	unpark, retryNow                     [2][2][2]Stmt // [reset][scoped][byKeys] (retryNow: reset 0)
	list                                 [3][2]Stmt    // [set][scoped]
	columns, indexExists                 Stmt
	indexes, dropIndexes                 [2][5]Stmt // [online][kind position]
	override                             ClaimFunc
	pipe                                 pipeStmts
	// ClaimInTx, set by a [Claimer] override, runs the override's claim
	// inside a transaction the store opened (ack+claim).
	ClaimInTx TxClaimFunc
	// Ext is the engine's own per-store state, set by its [Claimer].
	Ext any
	// slack is added to the reap timeout: see [Slack].
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
	// primary key on an [Engine.KeyHint] engine: the key-list statements
	// then name it.
	keyHint atomic.Bool
	// errorWidth is the Error column's width in characters, learnt by
	// VerifySchema (0: not learnt yet; -1: unbounded).
	errorWidth atomic.Int64
}

// The reap statements of a sweep: the return of every stale row (no
// MaxAttempts), the park of the stale rows whose attempts reached
// MaxAttempts, and the return of the others (fewer attempts than "below").
// A sweep without MaxAttempts binds no attempts bound at all, so that
// nothing larger than the Attempts column's type is ever passed.
const (
	reapAll = iota
	reapPark
	reapBelow
)

// keyStmts are the statements that find rows by a list of keys, rendered
// without and (on a [Engine.KeyHint] engine) with Names.KeyHint.
type keyStmts struct {
	ackTo                            map[string]Stmt // by target literal
	ackRequeue, ackLock, releaseKeys Stmt
}

// key returns the key-list statements to use: those naming the primary
// key once VerifySchema found the key column to be the primary key.
func (s *Claims) key() *keyStmts {
	if s.keyHint.Load() {
		return &s.keyed[1]
	}
	return &s.keyed[0]
}

// keysOf returns the index in Claims.reapKeys of the update that follows
// the reap lock of mode: the park's, or the return's.
func keysOf(mode int) int {
	if mode == reapPark {
		return 1
	}
	return 0
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
		if err := types.scope[i].checkValue(fmt.Sprintf("scope value %d (%s)", i, s.Spec.Scope[i]), v); err != nil {
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

// NewClaims validates spec and renders the engine's statements for it.
// override, if not nil, runs claims instead of the Claim template.
func NewClaims(e *Engine, sqls ClaimSQL, spec dialect.ClaimTable, override Claimer) (*Claims, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.TextTimes && !e.TextTimes {
		return nil, fmt.Errorf("%w: TextTimes: only SQLite keeps times as text; %s has time types", dialect.ErrInvalidConfig, e.Name)
	}
	s := &Claims{E: e, Spec: spec, Names: e.claimNames(spec)}
	r := &renderer{e: e, n: s.Names, out: &s.rendered}
	t := func(src string) string {
		if src == "" {
			return ""
		}
		return coreDefines + sqls.Common + src
	}
	s.claim = r.stmt("claim", t(sqls.Claim), nil)
	if e.Caps.SkipLocked {
		s.claimSkip = s.claim
	}
	s.readBack = r.stmt("read back", t(sqls.ReadBack), nil)
	s.readKeys = r.stmt("read back keys", t(sqls.ReadBack), func(n *Names) { n.ByKeys = true })
	for hint := range 2 {
		if hint == 1 && !e.KeyHint {
			break
		}
		k := &s.keyed[hint]
		k.ackTo = map[string]Stmt{}
		hinted := func(vary func(*Names)) func(*Names) {
			return func(n *Names) {
				vary(n)
				n.KeyHint = hint == 1
			}
		}
		for _, target := range []string{s.Names.Done, s.Names.Pending, s.Names.Failed} {
			if target != "" {
				del := target == s.Names.Done && spec.DeleteDone && spec.Archive == ""
				k.ackTo[target] = r.stmt("ack", t(sqls.Ack), hinted(func(n *Names) { n.Target, n.Delete = target, del }))
			}
		}
		k.ackRequeue = r.stmt("ack requeue", t(sqls.Ack), hinted(func(n *Names) { n.Target, n.Undo = n.Pending, true }))
		k.ackLock = r.stmt("ack lock", t(sqls.AckLock), hinted(func(*Names) {}))
		k.releaseKeys = r.stmt("release keys", t(sqls.Release), hinted(func(n *Names) { n.ByKeys = true }))
	}
	if e.Returning && s.Names.Attempts != "" && s.Names.Failed != "" {
		s.ackPark = r.stmt("ack park", t(sqls.Ack), func(n *Names) { n.ParkAt = true })
	}
	if spec.Archive != "" {
		if sqls.Archive == "" {
			return nil, fmt.Errorf("%w: Archive: %s has no archive statement", dialect.ErrNotSupported, e.Name)
		}
		s.archive = r.stmt("archive", t(sqls.Archive), func(n *Names) { n.ByKeys = true })
		s.purge = r.stmt("purge", t(sqls.Purge), func(n *Names) { n.ByKeys = true })
	}
	s.heartbeat = r.stmt("heartbeat", t(sqls.Heartbeat), nil)
	s.heartbeatHeld = r.stmt("heartbeat held", t(sqls.HeartbeatHeld), nil)
	if !e.Returning && sqls.HeartbeatHeld == "" {
		return nil, fmt.Errorf("%w: %s: a heartbeat needs a statement listing the held keys (no UPDATE ... RETURNING)", dialect.ErrNotSupported, e.Name)
	}
	s.release = r.stmt("release", t(sqls.Release), nil)
	for mode := range 3 {
		for scoped := range 2 {
			if mode != reapAll && s.Names.Attempts == "" || mode == reapPark && s.Names.Failed == "" {
				continue
			}
			vary := func(n *Names) { n.Park, n.Below, n.Scoped = mode == reapPark, mode == reapBelow, scoped == 1 }
			s.reap[mode][scoped] = r.stmt("reap", t(sqls.Reap), vary)
			if e.Caps.SkipLocked {
				s.reapLock[mode][scoped] = r.stmt("reap lock", t(sqls.ReapLock), vary)
				if mode != reapBelow {
					s.reapKeys[keysOf(mode)][scoped] = r.stmt("reap keys", t(sqls.ReapKeys), vary)
				}
			}
		}
	}
	if spec.RunAt != "" {
		s.snooze = r.stmt("snooze", t(sqls.Release), func(n *Names) { n.ByKeys, n.Snooze = true, true })
	}
	for reset := range 2 {
		for scoped := range 2 {
			for byKeys := range 2 {
				vary := func(n *Names) { n.Reset, n.Scoped, n.ByKeys = reset == 1, scoped == 1, byKeys == 1 }
				if s.Names.Failed != "" {
					s.unpark[reset][scoped][byKeys] = r.stmt("unpark", t(sqls.Unpark), vary)
				}
				if s.Names.RunAt != "" && reset == 0 {
					s.retryNow[0][scoped][byKeys] = r.stmt("retry now", t(sqls.RetryNow), vary)
				}
			}
		}
	}
	for set := range 3 {
		if set == int(SetFailed) && s.Names.Failed == "" || set == int(SetScheduled) && s.Names.RunAt == "" {
			continue
		}
		for scoped := range 2 {
			s.list[set][scoped] = r.stmt([]string{"list failed", "list processing", "list scheduled"}[set], t(sqls.List), func(n *Names) { n.Set, n.Scoped = set, scoped == 1 })
		}
	}
	s.stats[0] = r.stmt("stats", t(sqls.Stats), nil)
	s.stats[1] = r.stmt("stats", t(sqls.Stats), func(n *Names) { n.Scoped = true })
	s.columns = r.stmt("columns", t(sqls.Columns), nil)
	s.indexExists = r.stmt("index exists", t(sqls.IndexExists), nil)
	for i, ix := range Indexes(spec) {
		cols := make([]string, len(ix.Columns))
		for j, c := range ix.Columns {
			cols[j] = e.Quote(c)
		}
		kind := indexKind(spec, ix.Name)
		if kind < 0 {
			return nil, fmt.Errorf("%s: no template for the recommended index %s", e.Name, ix.Name)
		}
		schema, _ := SplitName(spec.Table)
		name := e.Quote(ix.Name)
		if schema != "" {
			name = e.Quote(schema) + "." + name
		}
		for online := range 2 {
			s.indexes[online][i] = r.stmt("index "+ix.Name, t(sqls.Indexes[kind]), func(n *Names) {
				n.IndexCols, n.Online = joinCols(cols), online == 1
			})
			s.dropIndexes[online][i] = r.stmt("drop index "+ix.Name, t(sqls.DropIndex), func(n *Names) {
				n.IndexName, n.Online = name, online == 1
			})
		}
	}
	s.renderPipeline(r, t(sqls.AckClaim))
	s.renderHeld(r, sqls.Held, t)
	if r.err != nil {
		return nil, r.err
	}
	s.slack.Store(int64(Slack))
	if override != nil {
		var err error
		if s.override, err = override(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// indexKind is the position in [ClaimSQL.Indexes] of the recommended
// index named name, or -1 for an unknown one.
func indexKind(spec dialect.ClaimTable, name string) int {
	for i, suffix := range []string{"claim", "token", "reap", "scope", "sched"} {
		if IndexName(spec.Table, suffix) == name {
			return i
		}
	}
	return -1
}

func joinCols(cols []string) string {
	out := ""
	for i, c := range cols {
		if i > 0 {
			out += ", "
		}
		out += c
	}
	return out
}

var (
	_ ClaimStore = (*Claims)(nil)
	_ IndexDDLer = (*Claims)(nil)
)

// Claim implements [ClaimStore].
func (s *Claims) Claim(ctx context.Context, p *ClaimParams, scan func(Scanner) error) (int, error) {
	if err := checkClaim(s.Spec, p); err != nil {
		return 0, err
	}
	if err := s.checkScopeValues(p.ScopeValues); err != nil {
		return 0, err
	}
	st, err := s.claimStmt(p)
	if err != nil {
		return 0, err
	}
	if s.override != nil {
		n, err := s.override(ctx, p, scan)
		return n, err
	}
	cur := s.cursors.get(p.ScopeValues)
	a := &Args{Token: p.Token, Limit: p.Limit, Scope: p.ScopeValues, After: cur.after(s.Spec.IDKind)}
	var n int
	var keys []any
	err = s.E.Do(ctx, "claim", false, func() error {
		n, keys = 0, keys[:0]
		return Query(ctx, s.E.DB, s.E.Dialect, st, a, counting(&n, s.recordKeys(scan, &keys), nil))
	})
	if err == nil {
		cur.advance(a.After, keys)
	}
	return n, err
}

// claimStmt returns the claim statement of p's strategy, or an error for a
// strategy the server lacks or an unresolved one.
func (s *Claims) claimStmt(p *ClaimParams) (Stmt, error) {
	switch p.Strategy {
	case dialect.StrategyTokenUpdate:
		return s.claim, nil
	case dialect.StrategySkipLocked:
		if !s.E.Caps.SkipLocked {
			_, err := s.E.Caps.Resolve(p.Strategy)
			return Stmt{}, err
		}
		return s.claimSkip, nil
	}
	return Stmt{}, fmt.Errorf("%w: strategy %v (resolve auto first)", dialect.ErrInvalidConfig, p.Strategy)
}

// Read implements [ClaimStore].
func (s *Claims) Read(ctx context.Context, token string, ids []any, scan func(Scanner) error) (int, error) {
	if token == "" {
		return 0, fmt.Errorf("%w: empty token", dialect.ErrInvalidConfig)
	}
	a := &Args{Token: token}
	st := s.readBack
	if ids != nil {
		if len(ids) == 0 {
			return 0, nil
		}
		keys, err := normalizeKeys(s.Spec.IDKind, ids)
		if err != nil {
			return 0, err
		}
		a.Keys, st = keys, s.readKeys
	}
	n, err := s.read(ctx, st, a, scan, nil)
	return n, err
}

// ReadBack runs the read-back of the rows token holds, passing each to scan
// (for a [Claimer] override), and returns how many it read. wrapScan, if
// not nil, wraps the result set's scanner.
func (s *Claims) ReadBack(ctx context.Context, token string, scan func(Scanner) error, wrapScan func(Scanner) Scanner) (int, error) {
	return s.read(ctx, s.readBack, &Args{Token: token}, scan, wrapScan)
}

func (s *Claims) read(ctx context.Context, st Stmt, a *Args, scan func(Scanner) error, wrapScan func(Scanner) Scanner) (int, error) {
	n := 0
	err := s.E.Do(ctx, "read back", true, func() error {
		n = 0
		return Query(ctx, s.E.DB, s.E.Dialect, st, a, counting(&n, scan, wrapScan))
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
	a := &Args{Token: token}
	var held []any
	err := s.E.Do(ctx, "heartbeat", true, func() error {
		held = held[:0]
		list := s.heartbeat
		if s.heartbeatHeld.SQL != "" {
			if _, err := Exec(ctx, s.E.DB, s.E.Dialect, s.heartbeat, a); err != nil {
				return err
			}
			list = s.heartbeatHeld
		}
		return Query(ctx, s.E.DB, s.E.Dialect, list, a, func(r Rows) error {
			k, err := scanKey(r, s.Spec.IDKind)
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
	if token == "" {
		return 0, fmt.Errorf("%w: empty token", dialect.ErrInvalidConfig)
	}
	a := &Args{Token: token}
	st := s.release
	if ids != nil {
		if len(ids) == 0 {
			return 0, nil
		}
		keys, err := normalizeKeys(s.Spec.IDKind, ids)
		if err != nil {
			return 0, err
		}
		a.Keys, st = keys, s.key().releaseKeys
	}
	var n int64
	err := s.E.Do(ctx, "release", false, func() error {
		var err error
		n, err = Exec(ctx, s.E.DB, s.E.Dialect, st, a)
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
	if err := checkReap(s.Spec, p); err != nil {
		return res, err
	}
	if err := s.checkMaxAttempts(p.MaxAttempts); err != nil {
		return res, err
	}
	if err := s.checkScopeValues(p.ScopeValues); err != nil {
		return res, err
	}
	scoped := 0
	if p.ScopeValues != nil {
		scoped = 1
	}
	// A row is stale when its claimed-at time is older than the timeout plus
	// the column's resolution, so a time stored rounded down never makes a
	// row look stale early.
	timeout := p.Timeout + time.Duration(s.slack.Load())
	a := &Args{Timeout: timeout, Limit: p.Limit, MaxAttempts: p.MaxAttempts, Scope: p.ScopeValues, Below: int64(p.MaxAttempts)}
	step := func(mode int) (int64, error) {
		st := s.reap[mode][scoped]
		var n int64
		err := s.E.Do(ctx, "reap", false, func() error {
			if lock := s.reapLock[mode][scoped]; lock.SQL != "" {
				return s.E.InTx(ctx, func(tx Querier) error {
					var err error
					n, err = s.reapSkipping(ctx, tx, lock, s.reapKeys[keysOf(mode)][scoped], a)
					return err
				})
			}
			if !s.E.IsolateWrites {
				var err error
				n, err = Exec(ctx, s.E.DB, s.E.Dialect, st, a)
				return err
			}
			return s.E.InTx(ctx, func(tx Querier) error {
				var err error
				n, err = Exec(ctx, tx, s.E.Dialect, st, a)
				return err
			})
		})
		return n, err
	}
	var err error
	ret := reapAll
	if p.MaxAttempts > 0 {
		if res.Parked, err = step(reapPark); err != nil {
			return res, err
		}
		ret = reapBelow
	}
	res.Returned, err = step(ret)
	s.pending(ctx, p.ScopeValues, res.Returned)
	return res, err
}

// reapSkipping locks the keys of stale rows that are not locked now and
// updates them, in the caller's transaction.
func (s *Claims) reapSkipping(ctx context.Context, tx Querier, lock, update Stmt, a *Args) (int64, error) {
	var keys []any
	err := Query(ctx, tx, s.E.Dialect, lock, a, func(r Rows) error {
		var id any
		if err := r.Scan(&id); err != nil {
			return err
		}
		k, err := NormalizeKey(s.Spec.IDKind, id)
		keys = append(keys, k)
		return err
	})
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	b := *a
	b.Keys = keys
	return Exec(ctx, tx, s.E.Dialect, update, &b)
}

// Stats implements [ClaimStore] with one statement; ages are
// computed on the database clock.
func (s *Claims) Stats(ctx context.Context, scopeValues []any) (Stats, error) {
	var st Stats
	stmt := s.stats[0]
	if scopeValues != nil {
		if err := checkScope(s.Spec, len(scopeValues)); err != nil {
			return st, err
		}
		if err := s.checkScopeValues(scopeValues); err != nil {
			return st, err
		}
		stmt = s.stats[1]
	}
	var total int64
	var oldProc, oldPend sql.NullInt64
	err := s.E.Do(ctx, "stats", true, func() error {
		_, err := QueryRow(ctx, s.E.DB, s.E.Dialect, stmt, &Args{Scope: scopeValues},
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

// Statements returns every rendered statement of the store by name, with
// the engine's placeholders: for tests and EXPLAIN checks.
func (s *Claims) Statements() map[string]string {
	m := map[string]string{}
	for k, st := range s.named() {
		m[k] = st.SQL
	}
	return m
}

// Render renders one of the engine's own templates for the store, with vary
// adjusting the variant flags: for the statements of a [Claimer] override.
// The statement is listed by [Claims.Rendered].
func (s *Claims) Render(name, src string, vary func(*Names)) (Stmt, error) {
	r := &renderer{e: s.E, n: s.Names, out: &s.rendered}
	return r.render(name, src, vary)
}

// Rendered returns every statement rendered for the store, in the order
// they were rendered: for the golden files.
func (s *Claims) Rendered() []Rendered { return s.rendered }

// Bind returns the statement Statements calls name, with its arguments
// taken from a in the order of its placeholders: for EXPLAIN checks. ok is
// false when the store has no such statement.
func (s *Claims) Bind(name string, a *Args) (query string, args []any, ok bool) {
	st, ok := s.named()[name]
	if !ok {
		return "", nil, false
	}
	query, args = st.Bind(s.E.Dialect, a)
	return query, args, true
}

// named maps the names of Statements to the rendered statements the store
// has (the engine's catalog queries, index DDL and the held claim's session
// settings excluded).
func (s *Claims) named() map[string]Stmt {
	m := map[string]Stmt{
		"claim": s.claim, "claim skip locked": s.claimSkip, "read back": s.readBack,
		"read back keys": s.readKeys, "ack requeue": s.keyed[0].ackRequeue, "ack park": s.ackPark,
		"ack lock": s.keyed[0].ackLock, "heartbeat": s.heartbeat, "heartbeat held": s.heartbeatHeld,
		"release": s.release, "release keys": s.keyed[0].releaseKeys,
		"reap": s.reap[reapAll][0], "reap scoped": s.reap[reapAll][1], "reap park": s.reap[reapPark][0], "reap park scoped": s.reap[reapPark][1],
		"reap below": s.reap[reapBelow][0], "reap below scoped": s.reap[reapBelow][1],
		"reap lock": s.reapLock[reapAll][0], "reap lock scoped": s.reapLock[reapAll][1], "reap lock park": s.reapLock[reapPark][0], "reap lock park scoped": s.reapLock[reapPark][1],
		"reap lock below": s.reapLock[reapBelow][0], "reap lock below scoped": s.reapLock[reapBelow][1],
		"reap keys": s.reapKeys[0][0], "reap keys scoped": s.reapKeys[0][1], "reap keys park": s.reapKeys[1][0], "reap keys park scoped": s.reapKeys[1][1],
		"stats": s.stats[0], "stats scoped": s.stats[1], "snooze": s.snooze, "archive": s.archive, "purge": s.purge,
		"held claim": s.held.claim, "held claim from": s.held.claimFrom, "held attempts": s.held.attempts,
		"held ack done": s.held.ackTo[s.Names.Done], "held ack pending": s.held.ackTo[s.Names.Pending], "held ack failed": s.held.ackTo[s.Names.Failed],
		"unpark": s.unpark[0][0][0], "unpark scoped": s.unpark[0][1][0], "unpark keys": s.unpark[0][0][1], "unpark reset scoped": s.unpark[1][1][0],
		"retry now": s.retryNow[0][0][0], "retry now scoped": s.retryNow[0][1][0], "retry now keys": s.retryNow[0][0][1],
		"list failed": s.list[0][0], "list failed scoped": s.list[0][1], "list processing": s.list[1][0],
		"list processing scoped": s.list[1][1], "list scheduled": s.list[2][0], "list scheduled scoped": s.list[2][1],
		"ack done": s.keyed[0].ackTo[s.Names.Done], "ack pending": s.keyed[0].ackTo[s.Names.Pending], "ack failed": s.keyed[0].ackTo[s.Names.Failed],
	}
	if h := s.keyed[1]; h.ackLock.SQL != "" {
		m["ack done by key"], m["ack pending by key"], m["ack failed by key"] = h.ackTo[s.Names.Done], h.ackTo[s.Names.Pending], h.ackTo[s.Names.Failed]
		m["ack requeue by key"], m["ack lock by key"], m["release keys by key"] = h.ackRequeue, h.ackLock, h.releaseKeys
	}
	s.pipe.name(m)
	for k, v := range m {
		if v.SQL == "" {
			delete(m, k)
		}
	}
	return m
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

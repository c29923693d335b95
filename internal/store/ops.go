package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store/render"
)

// opBatch bounds the rows one operator statement (unpark, retry now)
// changes: a scope-wide action over many rows runs as several short
// statements rather than one long transaction.
const opBatch = 1000

// maxErrorText bounds the text stored in an Error column whose width the
// catalog does not bound (TEXT), in bytes.
const maxErrorText = 8 << 10

// Snooze implements [ClaimStore].
func (s *Claims) Snooze(ctx context.Context, token string, ids []any, delay time.Duration) (int64, error) {
	switch {
	case token == "":
		return 0, fmt.Errorf("%w: empty token", dialect.ErrInvalidConfig)
	case !s.stmts.has(claimKey{t: tRelease, v: ClaimVariant{ByKeys: true, Snooze: true}}):
		return 0, fmt.Errorf("%w: the table has no RunAt column", dialect.ErrInvalidConfig)
	case delay < 0:
		return 0, fmt.Errorf("%w: negative delay %v", dialect.ErrInvalidConfig, delay)
	case len(ids) == 0:
		return 0, nil
	}
	keys, err := normalizeKeys(s.spec.IDKind, ids)
	if err == nil {
		err = s.timeLimits().fits("RunAt", "snooze", delay)
	}
	if err != nil {
		return 0, err
	}
	a := &render.Args{Token: token, Keys: keys, Delay: s.delay(delay)}
	var n int64
	err = s.b.Do(ctx, "snooze", false, func() error {
		var err error
		n, err = s.b.exec(ctx, s.b.db, s.st(claimKey{t: tRelease, v: ClaimVariant{ByKeys: true, Snooze: true}}), a)
		return err
	})
	return n, err
}

// filterArgs validates a row filter and returns its args and the variant
// of its statements (Scoped, ByKeys).
func (s *Claims) filterArgs(f RowFilter) (*render.Args, ClaimVariant, error) {
	a := &render.Args{}
	var v ClaimVariant
	if f.ScopeValues != nil {
		if err := checkScope(s.spec, len(f.ScopeValues)); err != nil {
			return nil, v, err
		}
		if err := s.checkScopeValues(f.ScopeValues); err != nil {
			return nil, v, err
		}
		a.Scope, v.Scoped = f.ScopeValues, true
	}
	if f.IDs != nil {
		if len(f.IDs) > MaxFilterIDs {
			return nil, v, fmt.Errorf("%w: %d keys; at most %d per call", dialect.ErrInvalidConfig, len(f.IDs), MaxFilterIDs)
		}
		keys, err := normalizeKeys(s.spec.IDKind, f.IDs)
		if err != nil {
			return nil, v, err
		}
		a.Keys, v.ByKeys = keys, true
	}
	return a, v, nil
}

// Unpark implements [ClaimStore].
func (s *Claims) Unpark(ctx context.Context, p *UnparkParams) (int64, error) {
	if s.names.Failed == "" {
		return 0, fmt.Errorf("%w: the table has no Failed status", dialect.ErrInvalidConfig)
	}
	if p.ResetAttempts && s.names.Attempts == "" {
		return 0, fmt.Errorf("%w: ResetAttempts needs an Attempts column", dialect.ErrInvalidConfig)
	}
	a, v, err := s.filterArgs(p.RowFilter)
	if err != nil {
		return 0, err
	}
	if p.IDs != nil && len(p.IDs) == 0 {
		return 0, nil
	}
	v.Reset = p.ResetAttempts
	n, err := s.chunked(ctx, "unpark", s.st(claimKey{t: tUnpark, v: v}), a)
	s.pending(ctx, p.ScopeValues, n)
	return n, err
}

// RetryNow implements [ClaimStore].
func (s *Claims) RetryNow(ctx context.Context, f RowFilter) (int64, error) {
	if s.names.RunAt == "" {
		return 0, fmt.Errorf("%w: the table has no RunAt column", dialect.ErrInvalidConfig)
	}
	a, v, err := s.filterArgs(f)
	if err != nil {
		return 0, err
	}
	if f.IDs != nil && len(f.IDs) == 0 {
		return 0, nil
	}
	n, err := s.chunked(ctx, "retry now", s.st(claimKey{t: tRetryNow, v: v}), a)
	s.pending(ctx, f.ScopeValues, n)
	return n, err
}

// chunked runs an operator statement of at most opBatch rows until one
// changes fewer, and returns the total.
func (s *Claims) chunked(ctx context.Context, op string, st render.Stmt, a *render.Args) (int64, error) {
	a.Limit = opBatch
	var total int64
	for {
		var n int64
		err := s.b.Do(ctx, op, false, func() error {
			var err error
			n, err = s.b.exec(ctx, s.b.db, st, a)
			return err
		})
		total += n
		if err != nil || n < opBatch {
			return total, err
		}
	}
}

// List implements [ClaimStore].
func (s *Claims) List(ctx context.Context, p *ListParams) ([]RowInfo, error) {
	switch {
	case p.Set < SetFailed || p.Set > SetScheduled:
		return nil, fmt.Errorf("%w: unknown set %d", dialect.ErrInvalidConfig, p.Set)
	case p.Limit <= 0 || p.Limit > MaxListLimit:
		return nil, fmt.Errorf("%w: limit %d is outside 1..%d", dialect.ErrInvalidConfig, p.Limit, MaxListLimit)
	case p.OlderThan < 0:
		return nil, fmt.Errorf("%w: negative OlderThan", dialect.ErrInvalidConfig)
	case p.Set == SetFailed && s.names.Failed == "":
		return nil, fmt.Errorf("%w: the table has no Failed status", dialect.ErrInvalidConfig)
	case p.Set == SetScheduled && s.names.RunAt == "":
		return nil, fmt.Errorf("%w: the table has no RunAt column", dialect.ErrInvalidConfig)
	}
	a, v, err := s.filterArgs(RowFilter{ScopeValues: p.ScopeValues})
	if err != nil {
		return nil, err
	}
	// A claim time column coarser than the clock may hold a time up to its
	// resolution late (PostgreSQL and MySQL round): the listing errs
	// towards showing a row, by that resolution.
	a.Limit, a.Timeout = p.Limit, p.OlderThan-time.Duration(s.slack.Load())
	var out []RowInfo
	err = s.b.Do(ctx, "list", true, func() error {
		out = out[:0]
		return s.b.query(ctx, s.b.db, s.st(claimKey{t: tList, v: ClaimVariant{Set: p.Set, Scoped: v.Scoped}}), a, func(r Rows) error {
			var id any
			var ri RowInfo
			var tok, msg, worker sql.NullString
			var age, runIn int64
			dest := []any{&id, &tok, &ri.Attempts, &age, &runIn, &msg}
			if s.names.Worker != "" {
				dest = append(dest, &worker)
			}
			if err := r.Scan(dest...); err != nil {
				return err
			}
			k, err := NormalizeKey(s.spec.IDKind, id)
			if err != nil {
				return err
			}
			ri.ID, ri.Token, ri.Error, ri.Worker = k, tok.String, msg.String, worker.String
			ri.ClaimedAge = -1
			if age >= 0 {
				ri.ClaimedAge = time.Duration(age) * time.Microsecond
			}
			ri.RunIn = time.Duration(runIn) * time.Microsecond
			out = append(out, ri)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// errorText prepares a failure's text for the Error column: valid UTF-8
// without NUL bytes (which PostgreSQL's text refuses), cut to the column's
// width in whole characters (or to maxErrorText bytes when the column is
// not bounded).
func (s *Claims) errorText(msg string) string {
	if msg == "" || s.names.Error == "" {
		return ""
	}
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = strings.ReplaceAll(msg, "\x00", "\uFFFD")
	if w := s.errorWidth.Load(); w > 0 && int64(utf8.RuneCountInString(msg)) > w {
		msg = cutRunes(msg, int(w))
	}
	if len(msg) > maxErrorText {
		msg = strings.ToValidUTF8(msg[:maxErrorText], "")
	}
	return msg
}

// cutRunes returns the first n characters of msg, the last three of them
// "..." to say that the text was cut (ASCII, which every character set of
// a text column holds).
func cutRunes(msg string, n int) string {
	const mark = "..."
	if n <= len(mark) {
		return mark[:max(n, 0)]
	}
	count := 0
	for i := range msg {
		if count == n-len(mark) {
			return msg[:i] + mark
		}
		count++
	}
	return msg
}

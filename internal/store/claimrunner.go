package store

import (
	"context"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store/render"
)

// ClaimOverride is the optional interface of a [Driver] whose claim is not
// one statement with RETURNING (MySQL: it marks rows, then reads them back
// by token): the store runs the claims of each of its tables through the
// [ClaimRunner] it returns for them, after validating their params.
type ClaimOverride interface {
	// ClaimRunner returns the runner of one table's claims. It is called
	// once, when the table's store is built.
	ClaimRunner(t ClaimSteps) (ClaimRunner, error)
}

// ClaimRunner runs the claims of one table for a [ClaimOverride] engine.
type ClaimRunner interface {
	// Claim runs one claim, with params the store validated, under the
	// store's retries ([Backend.Do]): it marks up to p.Limit rows under
	// p.Token and hands each to scan, as [ClaimStore.Claim] documents.
	Claim(ctx context.Context, p *ClaimParams, scan func(Scanner) error) (int, error)
	// ClaimTx runs the same claim on q, a transaction the store opened for
	// an ack+claim: no retries, no commit.
	ClaimTx(ctx context.Context, q Querier, p *ClaimParams, scan func(Scanner) error) (int, error)
}

// ClaimSteps are what a [ClaimRunner] gets of its table's store: the
// statements the claim table renders for it (Mark, SkipLockedPick,
// SkipLockedMark of [ClaimSQL]), the rotating key cursor (cursor.go) and
// the read-back by token.
type ClaimSteps interface {
	// IDKind is the table's key kind.
	IDKind() dialect.IDKind
	// Mark is the marking statement, naming the claim index (hint) or
	// not, above the cursor (from) or from the lowest key.
	Mark(hint, from bool) render.Stmt
	// SkipLockedPick is the SKIP LOCKED select of the keys to mark, as
	// Mark; SkipLockedMark marks the keys it locked.
	SkipLockedPick(hint, from bool) render.Stmt
	SkipLockedMark() render.Stmt
	// CursorAfter returns the key the next claim in scope starts above;
	// set is false while the cursor is at the lowest key, where a claim from
	// the lowest key is the same claim.
	CursorAfter(scope []any) (after any, set bool)
	// CursorAdvance moves the cursor of scope after a claim that started
	// above from and took keys (normalised).
	CursorAdvance(scope []any, from any, keys []any)
	// KeyRecorder wraps a Scanner of claimed rows so that the key of each
	// row it scans (the first column) is appended to *keys, normalised:
	// the read-back then tells CursorAdvance which keys the claim took.
	KeyRecorder(rows Scanner, keys *[]any) Scanner
	// ReadBack reads back the rows token holds on q, passing each to scan
	// (through wrapScan, if not nil), and returns how many it read. With q
	// nil it reads on the pool, under the store's retries; otherwise in the
	// transaction q, without retries of its own.
	ReadBack(ctx context.Context, q Querier, token string, scan func(Scanner) error, wrapScan func(Scanner) Scanner) (int, error)
}

// Steps returns the [ClaimSteps] the store gives a [ClaimRunner]: for the
// tests of an engine that runs its claims itself.
func (s *Claims) Steps() ClaimSteps { return claimSteps{s} }

// claimSteps are a claim store's [ClaimSteps].
type claimSteps struct{ s *Claims }

func (c claimSteps) IDKind() dialect.IDKind { return c.s.spec.IDKind }

func (c claimSteps) Mark(hint, from bool) render.Stmt {
	return c.s.st(claimKey{t: tMark, v: ClaimVariant{Hint: hint, From: from}})
}

func (c claimSteps) SkipLockedPick(hint, from bool) render.Stmt {
	return c.s.st(claimKey{t: tSkipLockedPick, v: ClaimVariant{Hint: hint, From: from}})
}

func (c claimSteps) SkipLockedMark() render.Stmt { return c.s.st(claimKey{t: tSkipLockedMark}) }

func (c claimSteps) CursorAfter(scope []any) (any, bool) {
	after := c.s.cursors.get(scope).after(c.s.spec.IDKind)
	return after, after != lowest(c.s.spec.IDKind)
}

func (c claimSteps) CursorAdvance(scope []any, from any, keys []any) {
	c.s.cursors.get(scope).advance(from, keys)
}

func (c claimSteps) KeyRecorder(rows Scanner, keys *[]any) Scanner {
	return keyRecorder{rows: rows, kind: c.s.spec.IDKind, keys: keys}
}

func (c claimSteps) ReadBack(ctx context.Context, q Querier, token string, scan func(Scanner) error, wrapScan func(Scanner) Scanner) (int, error) {
	st, a := c.s.st(claimKey{t: tReadBack}), &render.Args{Token: token}
	if q == nil {
		return c.s.read(ctx, st, a, scan, wrapScan)
	}
	n := 0
	err := c.s.b.query(ctx, q, st, a, counting(&n, scan, wrapScan))
	return n, err
}

package mysql

import (
	"context"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// claimTx is the claim of [claimer.claim] inside the transaction q that
// the store opened for an ack+claim: the same marking statements (key
// cursor, FORCE INDEX with its fallback, SKIP LOCKED select and update),
// then the read-back by token, all on q, without retries of their own (the
// store re-runs the whole transaction) and without a commit.
func (c *claimer) claimTx(ctx context.Context, q store.Querier, p *store.ClaimParams, scan func(store.Scanner) error) (int, error) {
	after, set := c.s.CursorAfter(p.ScopeValues)
	var marked int64
	var err error
	if p.Strategy == dialect.StrategySkipLocked {
		marked, err = c.pickAndMark(ctx, q, p, after, set)
	} else {
		marked, err = c.markTokenUpdate(ctx, p, after, set, false, func(hinted, plain store.Stmt, a *store.Args) (int64, error) {
			return c.updateOn(ctx, q, hinted, plain, a)
		})
	}
	return c.readBack(p, after, marked, err, scan, func(scan func(store.Scanner) error, wrapScan func(store.Scanner) store.Scanner) (int, error) {
		return c.s.ReadBackTx(ctx, q, p.Token, scan, wrapScan)
	})
}

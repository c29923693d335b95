package store

import (
	"context"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/detach"
)

// notifyTimeout bounds one notification sent after rows went back to
// pending.
const notifyTimeout = 5 * time.Second

// NotifyFunc tells the claimers of other processes that rows of spec's
// table became pending: those of the scope scopeValues, or of any scope
// when scopeValues is nil. Engines with notifications (PostgreSQL) set
// [Engine.Notify] to one.
type NotifyFunc func(ctx context.Context, spec dialect.ClaimTable, scopeValues []any) error

// Ack implements [ClaimStore] (see ack): when the ack returned rows
// to pending (a retried fail, a versioned ack whose row moved), the
// engine's notification is sent after it committed.
func (s *Claims) Ack(ctx context.Context, p *AckParams) (AckResult, error) {
	res, err := s.ack(ctx, p)
	if err == nil {
		n := len(res.Requeued)
		if p.Outcome == OutcomeRetry && p.Delay <= 0 {
			n += len(p.IDs) - len(res.Lost) - len(res.Parked)
		}
		s.pending(ctx, nil, int64(n))
	}
	return res, err
}

// pending sends the engine's notification, if it has one, after n rows
// (of the scope scopeValues; nil: any scope) went back to pending in a
// committed statement. A notification that cannot be sent is logged, never
// returned: the rows are pending already, and idle claimers find them by
// polling.
//
// The notification runs on its own deadline (notifyTimeout), not ctx's, so
// a caller whose context ends right after the commit still wakes the other
// processes; the caller waits for it only while ctx lasts, so a stalled
// server never holds the operation past ctx's deadline.
func (s *Claims) pending(ctx context.Context, scopeValues []any, n int64) {
	if n <= 0 || s.E.Notify == nil {
		return
	}
	detach.Run(ctx, notifyTimeout, func(ctx context.Context) {
		if err := s.E.Notify(ctx, s.Spec, scopeValues); err != nil {
			s.E.Logger.Warn("claimlock: could not notify other processes of pending rows; they will find them by polling",
				"table", s.Spec.Table, "err", err)
		}
	})
}

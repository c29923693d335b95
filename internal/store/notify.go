package store

import (
	"context"
	"time"

	"github.com/claimlock/claimlock/internal/detach"
)

// NotifyTimeout bounds one notification sent after rows went back to
// pending, on a deadline of its own rather than the caller's.
const NotifyTimeout = 5 * time.Second

// Ack implements [ClaimStore] (see ack): when the ack returned rows
// to pending (a retried fail, a versioned ack whose row moved), the
// engine's notification is sent after it committed.
func (s *Claims) Ack(ctx context.Context, p *AckParams) (AckResult, error) {
	res, err := s.ack(ctx, p)
	if err == nil {
		s.pendingAfterAck(ctx, p, res)
	}
	return res, err
}

// pendingAfterAck sends the engine's notification after the committed ack
// p returned rows to pending: the requeued ones, and those a retry without
// delay neither lost nor parked.
func (s *Claims) pendingAfterAck(ctx context.Context, p *AckParams, res AckResult) {
	n := len(res.Requeued)
	if p.Outcome == OutcomeRetry && p.Delay <= 0 {
		n += len(p.IDs) - len(res.Lost) - len(res.Parked)
	}
	s.pending(ctx, nil, int64(n))
}

// pending sends the engine's notification, if it has one, after n rows
// (of the scope scopeValues; nil: any scope) went back to pending in a
// committed statement. A notification that cannot be sent is logged, never
// returned: the rows are pending already, and idle claimers find them by
// polling.
//
// The notification runs on its own deadline (NotifyTimeout), not ctx's, so
// a caller whose context ends right after the commit still wakes the other
// processes; the caller waits for it only while ctx lasts, so a stalled
// server never holds the operation past ctx's deadline.
func (s *Claims) pending(ctx context.Context, scopeValues []any, n int64) {
	pn, ok := s.b.drv.(PendingNotifier)
	if n <= 0 || !ok {
		return
	}
	detach.Run(ctx, NotifyTimeout, func(ctx context.Context) {
		if err := pn.NotifyPending(ctx, s.spec, scopeValues); err != nil {
			s.b.logger.Warn("claimlock: could not notify other processes of pending rows; they will find them by polling",
				"table", s.spec.Table, "err", err)
		}
	})
}

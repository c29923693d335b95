package claim

import (
	"context"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/detach"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/observe"
)

// The operations a claimer reports to its Config.Observer, as
// [observe.Event.Op] with [observe.Event.Source] [observe.SourceClaim].
// The event's ctx is the context the operation ran with: the caller's for
// [Claimer.Claim] and the [Batch] methods (so a span started from it nests
// under the caller's trace), a background context for the background
// write of deferred acks and for [Batch.KeepAlive] heartbeats
// (Event.Background is set). Every event of a claimer carries Table, Scope,
// ScopeValues, Token, Start, Duration and Err.
const (
	// OpClaim is a claim ([Claimer.Claim], also inside [Claimer.Run]):
	// Event.Claimed rows, zero when nothing was pending. Duration includes
	// any wait for a claim slot (Config.ClaimConcurrency).
	OpClaim observe.Op = "claim.claim"
	// OpAck is an ack statement ([Batch.Ack], [Batch.AckAll], the write of
	// deferred acks): Event.Acked rows set to done, Event.Requeued sent back
	// to pending by a version check, Event.Lost no longer held (their keys
	// in Event.LostIDs); Event.Tx for [Batch.AckTx].
	OpAck observe.Op = "claim.ack"
	// OpFail is a fail statement ([Batch.Fail], [Batch.FailTx], a
	// handler error, an unreadable row): Event.Failed rows failed, of which
	// Event.Parked were parked (the others wait Event.RetryIn), and
	// Event.Lost no longer held (their keys in Event.LostIDs).
	OpFail observe.Op = "claim.fail"
	// OpSnooze is a snooze ([Batch.Fail] with a [SnoozeFor] error, or
	// such a handler error):
	// Event.Rows rows went back to pending, Event.Lost were no longer held.
	OpSnooze observe.Op = "claim.snooze"
	// OpHeartbeat is a heartbeat ([Batch.Heartbeat], [Batch.KeepAlive]):
	// Event.Rows is how many rows the token still holds. Rows it found
	// lost follow in an OpLost event.
	OpHeartbeat observe.Op = "claim.heartbeat"
	// OpRelease is a release ([Batch.Release], the shutdown of
	// [Claimer.Run], the clean-up of a failed claim): Event.Rows rows went
	// back to pending.
	OpRelease observe.Op = "claim.release"
	// OpCommit is the commit of a held batch ([Held.Commit], also inside
	// [Holder.Run]): its Event.Rows rows' acks and fails, and the caller's
	// statements, took effect together (unless Event.Err is set).
	OpCommit observe.Op = "claim.commit"
	// OpRollback is the rollback of a held batch ([Held.Rollback], also
	// inside [Holder.Run]): its Event.Rows rows are pending as they were
	// before the claim, the caller's statements undone.
	OpRollback observe.Op = "claim.rollback"
	// OpLost is a loss found outside an ack or fail statement.
	//
	// For a batch of [Claimer.Claim] (Event.Held false), it follows an
	// OpHeartbeat that found rows of the batch no longer held under its
	// token (reaped, released, reset or deleted by an operator, changed by
	// another writer): Event.Lost rows, their keys in Event.LostIDs. Only
	// they are lost ([Batch.Lost], [Batch.RowContext]); Event.Err is nil,
	// as for the lost rows an ack reports.
	//
	// For a held batch (Event.Held), it is the loss of the batch, reported
	// once when it is found ([Held.Context] is then cancelled with
	// Event.Err as its cause): a ping or a statement failed and the
	// transaction is rolled back, or the local deadline passed (a rollback
	// follows). Its Event.Rows rows are pending again once the server has
	// ended the transaction.
	OpLost observe.Op = "claim.lost"
	// OpPaused is a claim ([Claimer.Claim], [Holder.Hold], also inside
	// the Run loops) that claimed nothing because its table or scope is
	// paused (Config.PauseTable; the claim returned an error matching
	// [ErrPaused]). Event.Err is nil; Event.Held is set for a hold.
	OpPaused observe.Op = "claim.paused"
)

// observeClaim reports a claim to the observer, if any.
func (k *core) observeClaim(ctx context.Context, start time.Time, token string, n int, err error) {
	if k.obs == nil {
		return
	}
	e := k.event(OpClaim, token, start, err)
	e.Claimed = n
	k.obs.Observe(ctx, e)
}

func (k *core) event(op observe.Op, token string, start time.Time, err error) observe.Event {
	return observe.Event{
		Source: observe.SourceClaim, Op: op, Table: k.spec.Table, Scope: k.spec.Scope, ScopeValues: k.scope,
		Token: token, Start: start, Duration: time.Since(start), Err: err,
	}
}

// observedStore reports the statements a claimer makes through its store to
// the observer: every write of a batch goes through it, so the batch's code
// needs no hook calls of its own. Methods it does not override pass
// through.
type observedStore struct {
	store.ClaimStore
	k *core
}

// observed wraps cs when the claimer has an observer.
func observed(cs store.ClaimStore, k *core) store.ClaimStore {
	if k.obs == nil {
		return cs
	}
	o := &observedStore{ClaimStore: cs, k: k}
	if ac, ok := cs.(store.AckClaimer); ok {
		return &observedPipeStore{observedStore: o, ac: ac}
	}
	return o
}

// observedPipeStore is an observed store whose store also acks and claims
// in one round trip ([store.AckClaimer]): the wrapper keeps that visible.
type observedPipeStore struct {
	*observedStore
	ac store.AckClaimer
}

// AckAndClaim reports the ack part of an ack+claim (the claim part is
// reported by the claimer, as every claim is).
func (s *observedPipeStore) AckAndClaim(ctx context.Context, p *store.AckClaimParams, scan func(store.Scanner) error) (store.AckResult, int, error) {
	start := time.Now()
	res, n, err := s.ac.AckAndClaim(ctx, p, scan)
	if len(p.Ack.IDs) > 0 {
		s.report(ctx, s.ackEvent(&p.Ack, res, start, err))
	}
	return res, n, err
}

func (s *observedStore) report(ctx context.Context, e observe.Event) {
	e.Background = detach.IsBackground(ctx)
	s.k.obs.Observe(ctx, e)
}

func (s *observedStore) ackEvent(p *store.AckParams, res store.AckResult, start time.Time, err error) observe.Event {
	return s.k.ackEvent(p.Token, p, res, start, err)
}

// observeHeld reports an event of a held batch to the observer, if any.
func (k *core) observeHeld(ctx context.Context, e observe.Event) {
	if k.obs == nil {
		return
	}
	e.Held = true
	if !e.Background {
		e.Background = detach.IsBackground(ctx)
	}
	k.obs.Observe(ctx, e)
}

// event returns an event of the held batch b.
func (b *Held[T]) event(op observe.Op, start time.Time, err error) observe.Event {
	return b.core.event(op, b.token, start, err)
}

// ackEvent returns the event of a held ack or fail.
func (b *Held[T]) ackEvent(p *store.AckParams, res store.AckResult, start time.Time, err error) observe.Event {
	return b.core.ackEvent(b.token, p, res, start, err)
}

// ackEvent returns the event of an ack or fail of the batch token.
func (k *core) ackEvent(token string, p *store.AckParams, res store.AckResult, start time.Time, err error) observe.Event {
	if p.Outcome == store.OutcomeDone {
		e := k.event(OpAck, token, start, err)
		if err == nil {
			e.Lost, e.Requeued = len(res.Lost), len(res.Requeued)
			e.Acked = len(p.IDs) - e.Lost - e.Requeued
			e.LostIDs = lostIDs(p, res)
		}
		return e
	}
	e := k.event(OpFail, token, start, err)
	if err == nil {
		e.Lost = len(res.Lost)
		e.LostIDs = lostIDs(p, res)
		e.Failed = len(p.IDs) - e.Lost
		e.Parked = len(res.Parked)
		if p.Outcome == store.OutcomeFailed {
			e.Parked = e.Failed
		}
		if e.Parked < e.Failed {
			e.RetryIn = p.Delay
		}
	}
	return e
}

// Ack reports an ack or fail.
func (s *observedStore) Ack(ctx context.Context, p *store.AckParams) (store.AckResult, error) {
	start := time.Now()
	res, err := s.ClaimStore.Ack(ctx, p)
	s.report(ctx, s.ackEvent(p, res, start, err))
	return res, err
}

// AckTx reports an ack or fail in the caller's transaction.
func (s *observedStore) AckTx(ctx context.Context, tx dialect.Tx, p *store.AckParams) (store.AckResult, error) {
	start := time.Now()
	res, err := s.ClaimStore.AckTx(ctx, tx, p)
	e := s.ackEvent(p, res, start, err)
	e.Tx = true
	s.report(ctx, e)
	return res, err
}

// Heartbeat reports a heartbeat.
func (s *observedStore) Heartbeat(ctx context.Context, token string) ([]any, error) {
	start := time.Now()
	held, err := s.ClaimStore.Heartbeat(ctx, token)
	e := s.k.event(OpHeartbeat, token, start, err)
	e.Rows = len(held)
	s.report(ctx, e)
	return held, err
}

// Release reports a release.
func (s *observedStore) Release(ctx context.Context, token string, ids []any) (int64, error) {
	start := time.Now()
	n, err := s.ClaimStore.Release(ctx, token, ids)
	e := s.k.event(OpRelease, token, start, err)
	e.Rows = int(n)
	s.report(ctx, e)
	return n, err
}

// Snooze reports a snooze.
func (s *observedStore) Snooze(ctx context.Context, token string, ids []any, delay time.Duration) (int64, error) {
	start := time.Now()
	n, err := s.ClaimStore.Snooze(ctx, token, ids, delay)
	e := s.k.event(OpSnooze, token, start, err)
	e.Rows = int(n)
	if err == nil {
		e.Lost = len(ids) - int(n)
	}
	s.report(ctx, e)
	return n, err
}

// lostIDs returns the keys of the rows ack p found lost, nil for none.
func lostIDs(p *store.AckParams, res store.AckResult) []any {
	if len(res.Lost) == 0 {
		return nil
	}
	ids := make([]any, len(res.Lost))
	for j, i := range res.Lost {
		ids[j] = p.IDs[i]
	}
	return ids
}

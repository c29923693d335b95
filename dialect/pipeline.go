package dialect

import "context"

// AckClaimParams are the inputs of [AckClaimer.AckAndClaim]: the ack of one
// batch and the claim of the next, run together.
type AckClaimParams struct {
	// Ack completes rows of the previous batch exactly as [ClaimStore.Ack]
	// would (token condition, versions, outcome, MaxAttempts, Error,
	// Delay). An empty Ack.IDs acks nothing.
	Ack AckParams
	// Claim claims the next batch exactly as [ClaimStore.Claim] would. Its
	// token must differ from Ack.Token.
	Claim ClaimParams
}

// AckClaimer is the optional interface of a [ClaimStore] that completes one
// batch and claims the next in one round trip where the engine allows it
// (PostgreSQL: one statement with data-modifying CTEs) and otherwise in one
// transaction (MySQL/MariaDB: READ COMMITTED; SQLite: BEGIN IMMEDIATE),
// so that a worker loop pays one commit per batch instead of two. Every
// store of this module's dialects implements it;
// [Capabilities.PipelineAckClaim] says whether claim loops use it by
// default.
type AckClaimer interface {
	// AckAndClaim applies p.Ack and claims as p.Claim says, atomically: both
	// commit or neither does. The ack's result has the meaning of
	// [ClaimStore.Ack]'s (lost rows are reported, not an error, and do not
	// stop the claim); scan is called for each claimed row as by
	// [ClaimStore.Claim], and the count of claimed rows is returned.
	//
	// Retryable conflicts re-run the whole operation (scan is then called
	// again for the new attempt's rows: keep the last n). When it returns
	// another error, nothing was committed, unless the error wraps
	// [ErrOutcomeUnknown]: then both parts may have committed, and the
	// caller releases the claim token's rows (Release with nil ids) and
	// treats the acked rows as an ack of unknown outcome.
	//
	// An error of scan does not abort: the operation runs to its end and
	// commits, scan is not called again, and AckAndClaim returns the ack's
	// result and the count of claimed rows with an error wrapping scan's.
	// The caller reads the claimed rows again ([ClaimStore.Read]).
	AckAndClaim(ctx context.Context, p *AckClaimParams, scan func(Scanner) error) (AckResult, int, error)
}

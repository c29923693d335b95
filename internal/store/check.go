package store

import (
	"fmt"

	"github.com/claimlock/claimlock/dialect"
)

// The checks below validate a call's params against the table before any
// statement runs. Every engine calls them, so bad params are refused the
// same way everywhere; errors wrap [dialect.ErrInvalidConfig].

// checkAck validates the params of an ack: [Claims.Ack], the ack of
// [Claims.AckAndClaim] and [Claims.AckTx], and, with held set, [Held.Ack],
// whose token and versions are not checked (the held transaction's locks
// make both moot).
func checkAck(s dialect.ClaimTable, p *AckParams, held bool) error {
	switch {
	case p.Token == "" && !held:
		return fmt.Errorf("%w: empty token", dialect.ErrInvalidConfig)
	case p.Outcome < OutcomeDone || p.Outcome > OutcomeRetry:
		return fmt.Errorf("%w: unknown outcome %d", dialect.ErrInvalidConfig, p.Outcome)
	case p.MaxAttempts < 0:
		return checkMaxAttempts(s, p.MaxAttempts)
	case p.Versions != nil && !held && (len(p.Versions) != len(p.IDs) || s.Version == ""):
		return fmt.Errorf("%w: versions need a Version column and one version per id", dialect.ErrInvalidConfig)
	case p.Delay < 0:
		return fmt.Errorf("%w: negative retry delay %v", dialect.ErrInvalidConfig, p.Delay)
	case p.Delay > 0 && (s.RunAt == "" || p.Outcome != OutcomeRetry):
		return fmt.Errorf("%w: a retry delay needs a RunAt column and the retry outcome", dialect.ErrInvalidConfig)
	case p.Outcome == OutcomeFailed && !s.Failed.IsSet():
		return fmt.Errorf("%w: failing rows needs a Failed status", dialect.ErrInvalidConfig)
	case p.Outcome == OutcomeRetry:
		// Only a retry parks: MaxAttempts means nothing to other outcomes.
		return checkMaxAttempts(s, p.MaxAttempts)
	}
	return nil
}

// checkReap validates the params of [ClaimStore.Reap].
func checkReap(s dialect.ClaimTable, p *ReapParams) error {
	switch {
	case p.Timeout <= 0 || p.Limit <= 0:
		return fmt.Errorf("%w: timeout and limit must be positive", dialect.ErrInvalidConfig)
	case checkMaxAttempts(s, p.MaxAttempts) != nil:
		return checkMaxAttempts(s, p.MaxAttempts)
	case p.ScopeValues != nil:
		return checkScope(s, len(p.ScopeValues))
	}
	return nil
}

// checkMaxAttempts checks a store operation's bound on attempts: zero never
// parks; a positive bound needs the Attempts column. (Claimers and reapers
// resolve their default with [dialect.ClaimTable.MaxAttempts] first.)
func checkMaxAttempts(s dialect.ClaimTable, n int) error {
	switch {
	case n < 0:
		return fmt.Errorf("%w: MaxAttempts: %d is negative", dialect.ErrInvalidConfig, n)
	case n > 0 && s.Attempts == "":
		return fmt.Errorf("%w: MaxAttempts: parking rows after a number of attempts needs an Attempts column", dialect.ErrInvalidConfig)
	}
	return nil
}

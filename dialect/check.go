package dialect

import "fmt"

// The checks below validate a call's params against the table before any
// statement runs. Every engine calls them, so bad params are refused the
// same way everywhere; errors wrap [ErrInvalidConfig].

// CheckScope reports whether n scope values fit the table's Scope columns.
func (s ClaimTable) CheckScope(n int) error {
	if n != len(s.Scope) {
		return fmt.Errorf("%w: %d scope values for %d scope columns", ErrInvalidConfig, n, len(s.Scope))
	}
	return nil
}

// CheckClaim validates the params of [ClaimStore.Claim]. The strategy is
// the engine's to check.
func (s ClaimTable) CheckClaim(p *ClaimParams) error {
	if p.Token == "" {
		return fmt.Errorf("%w: empty claim token", ErrInvalidConfig)
	}
	if p.Limit <= 0 {
		return fmt.Errorf("%w: claim limit must be positive, got %d", ErrInvalidConfig, p.Limit)
	}
	return s.CheckScope(len(p.ScopeValues))
}

// CheckAck validates the params of [ClaimStore.Ack].
func (s ClaimTable) CheckAck(p *AckParams) error {
	switch {
	case p.Token == "":
		return fmt.Errorf("%w: empty token", ErrInvalidConfig)
	case p.Outcome < OutcomeDone || p.Outcome > OutcomeRetry:
		return fmt.Errorf("%w: unknown outcome %d", ErrInvalidConfig, p.Outcome)
	case p.MaxAttempts < 0:
		return fmt.Errorf("%w: negative MaxAttempts %d", ErrInvalidConfig, p.MaxAttempts)
	case p.Versions != nil && (len(p.Versions) != len(p.IDs) || s.Version == ""):
		return fmt.Errorf("%w: versions need a Version column and one version per id", ErrInvalidConfig)
	case (p.Outcome == OutcomeFailed || p.Outcome == OutcomeRetry && p.MaxAttempts > 0) && !s.Failed.IsSet():
		return fmt.Errorf("%w: failing rows needs a Failed status", ErrInvalidConfig)
	case p.Outcome == OutcomeRetry && p.MaxAttempts > 0 && s.Attempts == "":
		return fmt.Errorf("%w: MaxAttempts needs an Attempts column", ErrInvalidConfig)
	}
	return nil
}

// CheckReap validates the params of [ClaimStore.Reap].
func (s ClaimTable) CheckReap(p *ReapParams) error {
	switch {
	case p.Timeout <= 0 || p.Limit <= 0:
		return fmt.Errorf("%w: timeout and limit must be positive", ErrInvalidConfig)
	case p.MaxAttempts < 0:
		return fmt.Errorf("%w: negative MaxAttempts %d", ErrInvalidConfig, p.MaxAttempts)
	case p.MaxAttempts > 0 && (s.Attempts == "" || !s.Failed.IsSet()):
		return fmt.Errorf("%w: MaxAttempts needs Attempts and Failed", ErrInvalidConfig)
	case p.ScopeValues != nil:
		return s.CheckScope(len(p.ScopeValues))
	}
	return nil
}

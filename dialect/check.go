package dialect

import (
	"fmt"
	"slices"
)

// The checks below validate a call's params against the table before any
// statement runs. Every engine calls them, so bad params are refused the
// same way everywhere; errors wrap [ErrInvalidConfig].

// CheckMaxAttempts checks the rule for parking rows after n attempts, the
// same for claimers ([ClaimStore.Ack] with [OutcomeRetry]) and reapers
// ([ClaimStore.Reap]): n must not be negative, and a positive n needs the
// Attempts column (to count claims) and a Failed status (to park with). Zero
// never parks and needs neither.
func (s ClaimTable) CheckMaxAttempts(n int) error {
	if why := s.maxAttemptsProblem(n); why != "" {
		return fmt.Errorf("%w: MaxAttempts: %s", ErrInvalidConfig, why)
	}
	return nil
}

func (s ClaimTable) maxAttemptsProblem(n int) string {
	switch {
	case n < 0:
		return fmt.Sprintf("%d is negative (0 never parks)", n)
	case n > 0 && s.Attempts == "":
		return "parking rows after a number of attempts needs an Attempts column"
	case n > 0 && !s.Failed.IsSet():
		return "parking rows after a number of attempts needs a Failed status value"
	}
	return ""
}

// checkStatuses reports a required status value that is not set and any
// status refused by [StatusString].
func (s ClaimTable) checkStatuses() error {
	st := []struct {
		f string
		v Status
	}{{"Pending", s.Pending}, {"Processing", s.Processing}, {"Done", s.Done}, {"Failed", s.Failed}}
	for _, x := range st {
		switch {
		case x.v.bad != "" || x.v.set:
			if err := x.v.check(x.f); err != nil {
				return err
			}
		case x.f == "Failed":
			// Optional: without it rows cannot be parked or failed.
		case s.numericStatuses():
			return fmt.Errorf("%w: %s: status value is not set (integer status values have no default)", ErrInvalidConfig, x.f)
		default:
			return x.v.check(x.f)
		}
	}
	return nil
}

// checkRoles reports a column named for two roles (the key and the token,
// say) or a scope column named twice. Extra Columns may repeat role columns:
// they are only read.
func (s ClaimTable) checkRoles() error {
	seen := map[string]string{}
	roles := []struct{ field, name string }{
		{"ID", s.ID}, {"Status", s.Status}, {"Token", s.Token}, {"ClaimedAt", s.ClaimedAt},
		{"Attempts", s.Attempts}, {"Version", s.Version}, {"CreatedAt", s.CreatedAt},
	}
	for _, r := range roles {
		if r.name == "" {
			continue
		}
		if prev, ok := seen[r.name]; ok {
			return fmt.Errorf("%w: %s: column %q is also %s", ErrInvalidConfig, r.field, r.name, prev)
		}
		seen[r.name] = r.field
	}
	for i, c := range s.Scope {
		if slices.Contains(s.Scope[:i], c) {
			return fmt.Errorf("%w: Scope[%d]: column %q appears twice", ErrInvalidConfig, i, c)
		}
	}
	return nil
}

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
		return fmt.Errorf("%w: ack: empty token", ErrInvalidConfig)
	case p.Outcome < OutcomeDone || p.Outcome > OutcomeRetry:
		return fmt.Errorf("%w: ack: unknown outcome %d", ErrInvalidConfig, p.Outcome)
	case p.MaxAttempts < 0:
		return fmt.Errorf("%w: ack: MaxAttempts: %s", ErrInvalidConfig, s.maxAttemptsProblem(p.MaxAttempts))
	case p.Versions != nil && (len(p.Versions) != len(p.IDs) || s.Version == ""):
		return fmt.Errorf("%w: ack: versions need a Version column and one version per id", ErrInvalidConfig)
	case p.Outcome == OutcomeFailed && !s.Failed.IsSet():
		return fmt.Errorf("%w: ack: failing rows needs a Failed status", ErrInvalidConfig)
	case p.Outcome == OutcomeRetry && s.maxAttemptsProblem(p.MaxAttempts) != "":
		// Only a retry parks: MaxAttempts means nothing to other outcomes.
		return fmt.Errorf("%w: ack: MaxAttempts: %s", ErrInvalidConfig, s.maxAttemptsProblem(p.MaxAttempts))
	}
	return nil
}

// CheckReap validates the params of [ClaimStore.Reap].
func (s ClaimTable) CheckReap(p *ReapParams) error {
	switch {
	case p.Timeout <= 0 || p.Limit <= 0:
		return fmt.Errorf("%w: reap: timeout and limit must be positive", ErrInvalidConfig)
	case s.maxAttemptsProblem(p.MaxAttempts) != "":
		return fmt.Errorf("%w: reap: MaxAttempts: %s", ErrInvalidConfig, s.maxAttemptsProblem(p.MaxAttempts))
	case p.ScopeValues != nil:
		return s.CheckScope(len(p.ScopeValues))
	}
	return nil
}

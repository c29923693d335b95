package dialect

import (
	"fmt"
	"slices"
)

// The rules below are checked once for every package that describes a
// claim table; errors wrap [ErrInvalidConfig] and name the field.

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
		{"RunAt", s.RunAt}, {"Error", s.Error},
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

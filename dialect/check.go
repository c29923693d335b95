package dialect

import (
	"fmt"
	"slices"
)

// The rules below are checked once for every package that describes a
// claim table; errors wrap [ErrInvalidConfig] and name the field.

// DefaultMaxAttempts is how many claims a row of a table with an Attempts
// column may take before a failure or a reap parks it, when MaxAttempts is
// zero.
const DefaultMaxAttempts = 25

// MaxAttempts resolves the rule for parking rows after n claims, the same
// for claimers (a failed row) and reapers (a row whose worker died), so
// that a row that keeps failing (or keeps killing
// its worker) is parked, never retried forever:
//
//   - with an Attempts column, zero means [DefaultMaxAttempts] and a
//     positive n is taken as it is;
//   - without one, claims cannot be counted: n must be zero, and 0 is
//     returned (a failure then parks its row at once, and a reaper returns
//     stale rows without parking them).
//
// A negative n, or a positive one without an Attempts column, is an error
// wrapping [ErrInvalidConfig].
func (s ClaimTable) MaxAttempts(n int) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("%w: MaxAttempts: %d is negative (0 means the default, %d, with an Attempts column)", ErrInvalidConfig, n, DefaultMaxAttempts)
	case n > 0 && s.Attempts == "":
		return 0, fmt.Errorf("%w: MaxAttempts: parking rows after a number of attempts needs an Attempts column", ErrInvalidConfig)
	case n == 0 && s.Attempts != "":
		return DefaultMaxAttempts, nil
	}
	return n, nil
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
			if err := x.v.Check(x.f); err != nil {
				return err
			}
		case x.f == "Failed" && s.numericStatuses():
			return fmt.Errorf("%w: Failed: status value is not set (integer status values have no default; a row that keeps failing is parked with it)", ErrInvalidConfig)
		case s.numericStatuses():
			return fmt.Errorf("%w: %s: status value is not set (integer status values have no default)", ErrInvalidConfig, x.f)
		default:
			return x.v.Check(x.f)
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
		{"RunAt", s.RunAt}, {"Error", s.Error}, {"Worker", s.Worker},
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
		if c == s.Worker {
			return fmt.Errorf("%w: Worker: column %q is also Scope[%d] (a claim would move the row out of its scope)", ErrInvalidConfig, c, i)
		}
	}
	return nil
}

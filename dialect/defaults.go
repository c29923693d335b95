package dialect

import "slices"

// The default column names and string status values of a [ClaimTable],
// filled in by [ClaimTable.WithDefaults].
const (
	defaultID         = "id"
	defaultStatus     = "status"
	defaultToken      = "token"
	defaultClaimedAt  = "claimed_at"
	defaultPending    = "PENDING"
	defaultProcessing = "PROCESSING"
	defaultDone       = "DONE"
	defaultFailed     = "FAILED"
)

// WithDefaults returns t with every unset required field given its default,
// the one place these defaults are decided:
//
//   - ID, Status, Token and ClaimedAt default to "id", "status", "token"
//     and "claimed_at";
//   - when no status value is an integer, unset Pending, Processing, Done
//     and Failed default to "PENDING", "PROCESSING", "DONE" and "FAILED";
//   - when one is an integer, none is defaulted: all four are then
//     required.
//
// Table, IDKind, the optional columns, Columns and Scope have no default.
// A status refused by [StatusString] is kept as it is, for
// [ClaimTable.Validate] to report. The Columns and Scope slices are copied,
// so the result shares no memory with t. WithDefaults does not validate: call
// Validate on the result.
func (t ClaimTable) WithDefaults() ClaimTable {
	t.Columns = slices.Clone(t.Columns)
	t.Scope = slices.Clone(t.Scope)
	orName := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	orName(&t.ID, defaultID)
	orName(&t.Status, defaultStatus)
	orName(&t.Token, defaultToken)
	orName(&t.ClaimedAt, defaultClaimedAt)
	if t.numericStatuses() {
		return t
	}
	orStatus := func(v *Status, def string) {
		if !v.set && v.bad == "" {
			*v = StatusString(def)
		}
	}
	orStatus(&t.Pending, defaultPending)
	orStatus(&t.Processing, defaultProcessing)
	orStatus(&t.Done, defaultDone)
	orStatus(&t.Failed, defaultFailed)
	return t
}

// numericStatuses reports whether any status value of t is an integer.
func (t ClaimTable) numericStatuses() bool {
	return t.Pending.isNum || t.Processing.isNum || t.Done.isNum || t.Failed.isNum
}

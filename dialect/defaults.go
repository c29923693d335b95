package dialect

import "slices"

// Default column names and string status values of a [ClaimTable], filled in
// by [ClaimTable.WithDefaults].
const (
	DefaultID         = "id"
	DefaultStatus     = "status"
	DefaultToken      = "token"
	DefaultClaimedAt  = "claimed_at"
	DefaultPending    = "PENDING"
	DefaultProcessing = "PROCESSING"
	DefaultDone       = "DONE"
	DefaultFailed     = "FAILED"
)

// WithDefaults returns t with every unset required field given its default,
// the one place these defaults are decided:
//
//   - ID, Status, Token and ClaimedAt default to [DefaultID],
//     [DefaultStatus], [DefaultToken] and [DefaultClaimedAt];
//   - when no status value is an integer, unset Pending, Processing, Done
//     and Failed default to [DefaultPending], [DefaultProcessing],
//     [DefaultDone] and [DefaultFailed];
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
	orName(&t.ID, DefaultID)
	orName(&t.Status, DefaultStatus)
	orName(&t.Token, DefaultToken)
	orName(&t.ClaimedAt, DefaultClaimedAt)
	if t.numericStatuses() {
		return t
	}
	orStatus := func(v *Status, def string) {
		if !v.set && v.bad == "" {
			*v = StatusString(def)
		}
	}
	orStatus(&t.Pending, DefaultPending)
	orStatus(&t.Processing, DefaultProcessing)
	orStatus(&t.Done, DefaultDone)
	orStatus(&t.Failed, DefaultFailed)
	return t
}

// numericStatuses reports whether any status value of t is an integer.
func (t ClaimTable) numericStatuses() bool {
	return t.Pending.isNum || t.Processing.isNum || t.Done.isNum || t.Failed.isNum
}

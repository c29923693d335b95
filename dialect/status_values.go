package dialect

// StatusString returns the string status value v, for the status fields of
// [ClaimTable]. A string outside [A-Za-z0-9_.:-], empty or longer than 64
// bytes gives a Status that holds no value and that [ClaimTable.Validate]
// (and so every constructor taking the table) reports as an error wrapping
// [ErrInvalidConfig], naming the field. It never panics, so it can be used
// in composite literals:
//
//	dialect.ClaimTable{Table: "jobs", Done: dialect.StatusString("SENT")}
func StatusString(v string) Status {
	if why := statusStringProblem(v); why != "" {
		return Status{bad: why}
	}
	return Status{str: v, set: true}
}

// StatusInt returns the integer status value v, for the status fields of
// [ClaimTable] whose status column is an integer.
func StatusInt(v int64) Status {
	return Status{num: v, isNum: true, set: true}
}

package store

// ClaimSQL are an engine's claim-table statements as text/template sources
// over [ClaimNames] and [ClaimVariant]. Values are placeholders:
// {{arg "token"}}, {{arg "limit"}}, {{arg "timeout"}} (a duration in the
// engine's time unit), {{arg "max_attempts"}} (through
// {{template "maxatt" .}}, which every engine defines: its placeholder,
// typed where the engine would otherwise take the Attempts column's type
// for it), {{scope .Scope}} for " AND col = ?" per scope column, and
// {{keys}} for the condition on a list of keys. Which statements a store
// renders, for which variants, is the table in claimstmts.go.
type ClaimSQL struct {
	// Claim marks up to "limit" pending rows in scope under "token" (and,
	// with a Worker column, "worker": every statement that marks rows
	// claimed writes it) and returns ClaimNames.Returned. It takes the
	// rows in rotating key order (cursor.go): the pending rows whose key
	// is above "after" in key order, then, to fill the limit, those from
	// the lowest key up to "after". It serves both strategies: a
	// Returning engine's claim never waits for row locks (PostgreSQL:
	// SKIP LOCKED; SQLite: one writer).
	// Engines without RETURNING leave it empty, write Mark, SkipLockedPick
	// and SkipLockedMark instead and implement [ClaimOverride].
	Claim string
	// Mark, on an engine without RETURNING, marks up to "limit" pending
	// rows in scope under "token", in key order (with From, only those
	// whose key is above "after"; with Hint, naming the claim index); they
	// are read back by token (ReadBack).
	Mark string
	// SkipLockedPick selects and locks the keys of up to "limit" pending
	// rows in scope, skipping rows locked now, in key order (From and Hint
	// as for Mark); SkipLockedMark marks those {{keys}} rows under "token"
	// in the same transaction.
	SkipLockedPick, SkipLockedMark string
	// ReadBack returns ClaimNames.Returned of the rows "token" holds (with
	// ByKeys, only the {{keys}} rows), in key order.
	ReadBack string
	// Ack sets Target (or, with ParkAt, the failed status where attempts
	// reached "max_attempts" and pending elsewhere), clears the token and,
	// with Undo, undoes the attempts increment, for the {{keys}} rows
	// "token" holds. On a Returning engine it returns the key and a boolean
	// "parked" for each row it changed.
	Ack string
	// AckLock locks and returns key, version (0 without) and attempts (0
	// without) of the {{keys}} rows "token" holds, for acks decided row by
	// row inside a transaction.
	AckLock string
	// Heartbeat moves the claimed-at time of the rows "token" holds
	// strictly forward to the database clock. On a Returning engine it
	// returns the key of each row it moved.
	Heartbeat string
	// HeartbeatHeld lists the keys of the rows "token" holds after a
	// heartbeat, on engines without UPDATE ... RETURNING (required there).
	HeartbeatHeld string
	// Release returns the processing rows "token" holds (with ByKeys, only
	// the {{keys}} rows) to pending, clearing the token and undoing the
	// attempts increment; with Snooze it also sets RunAt to
	// {{template "delayed" .}}.
	Release string
	// Reap parks (Park: attempts at "max_attempts") or returns to pending
	// (token cleared) at most "limit" rows processing for longer than
	// "timeout" on the database clock (Scoped: in scope). With an Attempts
	// column the return takes only rows with fewer than "below" attempts
	// (Below): a row that went stale between the park and the return
	// statement of one sweep is parked by the next sweep, never returned to
	// be claimed beyond MaxAttempts (the model in model/ found that gap).
	Reap string
	// ReapLock and ReapKeys, if set, replace Reap where the server has
	// SKIP LOCKED (engines whose Reap is an UPDATE ... LIMIT that would wait
	// for locked rows: MySQL). In one transaction ReapLock selects and locks
	// the keys of at most "limit" stale rows, skipping rows locked now, and
	// ReapKeys updates those {{keys}} rows as Reap would: they are locked,
	// so they are still stale.
	ReapLock, ReapKeys string
	// Unpark returns at most "limit" failed rows (Scoped: in scope;
	// ByKeys: of the {{keys}}) to pending, clearing token, Error and RunAt
	// and, with Reset, the attempts. Empty without a failed status.
	Unpark string
	// RetryNow sets RunAt to NULL for at most "limit" pending rows (Scoped,
	// ByKeys as Unpark) whose RunAt is in the future.
	RetryNow string
	// List returns at most "limit" rows of the set Set ([SetFailed], oldest
	// claim first; [SetProcessing] for "older" or longer, oldest first;
	// [SetScheduled], pending with a future RunAt, soonest first), Scoped as
	// Unpark: key, token (''), attempts (0), age of ClaimedAt in
	// microseconds (-1 when NULL), microseconds until RunAt (0 when NULL or
	// past), error ('') and, with a Worker column only, the worker ('').
	List string
	// Stats returns one row: pending, processing, done, failed and total
	// counts, then the ages in microseconds on the database clock of the
	// oldest processing row (by claimed-at) and of the oldest pending row
	// (by created-at), NULL when there is none (Scoped: in scope).
	Stats string
	// Columns lists the table's columns of "schema" (NULL: the current
	// one) and "table", one row each: name, character length (0 when not
	// bounded), data type, fractional-second precision (-1 when not a time
	// column), collation ("" when unknown), whether it is nullable, the
	// full declared type ([ColumnInfo.ColumnType]; "" when the data type
	// says it all) and whether it is the table's primary key by itself.
	Columns string
	// IndexExists counts the indexes named "index" of "schema"."table" in
	// one row: those queries can use, then all of them (an engine whose
	// indexes are never invalid counts the same ones twice).
	IndexExists string
	// Indexes are the recommended indexes' DDL.
	Indexes IndexSQL
	// DropIndex, if set, drops the index IndexName (quoted, qualified by
	// the table's schema), with Online as for Indexes: MissingIndexes puts
	// it before the CREATE INDEX of an index IndexExists found invalid
	// (PostgreSQL: left by a failed CREATE INDEX CONCURRENTLY), which the
	// CREATE INDEX ... IF NOT EXISTS would skip.
	DropIndex string
	// AckClaim, if set, is the ack of Ack (rendered with Pipelined: its
	// token is "ack_token"; Target and ParkAt as for Ack) and the claim of
	// Claim in one statement (see pipeline.go). Engines without it run the
	// two in one transaction.
	AckClaim string
	// Archive copies the {{keys}} rows that are done with no token
	// (acked by this transaction, which holds their locks) to the archive
	// table (ClaimNames.Archive), whose columns are the table's in the same
	// order, and returns nothing; affected rows are the rows copied. An
	// engine may also delete them in the same statement (PostgreSQL: a
	// data-modifying CTE) and leave Purge empty.
	Archive string
	// Purge, if set, deletes the rows Archive copied (same condition).
	Purge string
	// Held are the held-transaction claim's statements (empty: none).
	Held HeldSQL
	// Common is prepended to every template: {{define}} blocks the others
	// share.
	Common string
}

// IndexSQL are the DDL of the recommended indexes of a claim table
// ([recommendedIndexes]), each rendered with ClaimVariant.IndexCols set to the
// portable definition's quoted columns, and with Online for the form of
// [IndexOptions.Online]. An engine leaves Scope empty when its claim index
// serves scoped Stats: the scope index is then neither created nor
// reported missing.
type IndexSQL struct {
	// Claim is the claim index (ClaimNames.ClaimIndex), Token the token
	// index, Reap the reaper's, Scope the scope index (scoped tables only)
	// and Sched the scheduled rows' (tables with RunAt only).
	Claim, Token, Reap, Scope, Sched string
}

// HeldSQL are an engine's statements of the held-transaction claim, as
// text/template sources like [ClaimSQL]'s. An engine without them
// (SQLite: one writer at a time, so a transaction held through a handler
// would stop every other claim and ack) leaves them empty and the store
// refuses held claims.
//
// A held claim writes nothing: in a transaction on one connection it
// selects and locks up to "limit" pending rows, skipping rows locked now,
// and keeps the transaction open while the rows are handled. The acks
// write in that transaction and COMMIT releases the locks; a crash, a
// dropped connection or the server's hold limit rolls it back, and the rows
// are pending as they were, for the next claim.
type HeldSQL struct {
	// Limit sets the server's hold limit, "hold_ms" or "hold_s", for the
	// transaction (or its session): the server ends a transaction that
	// stays idle that long, and bounds each statement and lock wait in it.
	Limit string
	// Unlimit, if set, restores the session's own limits before COMMIT
	// (engines whose Limit sets session variables that outlive the
	// transaction).
	Unlimit string
	// Claim selects and locks, skipping locked rows, up to "limit" pending
	// rows in scope, in key order, returning ClaimNames.Returned; with From
	// (integer keys), only rows whose key is above "from".
	Claim string
	// Look, if set, returns the key of the first row, in key order, that
	// Claim from the lowest key would consider (pending, in scope,
	// runnable), reading without locks. A held claim that starts from the
	// lowest key runs it first: no key, and the claim holds nothing
	// without a locking scan; a key, and (integer keys) the claim starts
	// there. On InnoDB a locking scan locks and unlocks each delete-marked
	// entry of the claim index it passes (the entries of rows acked since
	// purge last ran), where a plain read passes them without locks: after
	// a drain, every claim from the lowest key walked all of them.
	Look string
	// Turns, if set, makes the held claims of one holder take turns: one
	// claim statement at a time, each starting above the highest key the
	// one before it took ([HoldCursor]). Claims that started together from
	// one cursor race along the same keys, each skipping the rows the
	// others are locking: on InnoDB that cost a fifth and more of the held
	// throughput at 16 workers; on PostgreSQL turns showed no gain, and a
	// longer claim p99.
	Turns bool
	// Attempts returns the key and attempts (0 without) of the {{keys}}
	// rows.
	Attempts string
	// Read returns ClaimNames.Returned of the {{keys}} rows, in key order
	// (the held claim reads rows one by one when one cannot be scanned).
	Read string
	// Ack, if set, replaces the store's held ack (heldAck), which every
	// engine with held claims writes the same way.
	Ack string
}

// heldAck is the held claim's ack: it sets the {{keys}} rows that are
// still pending to Target (with Delete, deletes them), and for a failure
// (Target pending or failed) increments the attempts and sets what every
// ack sets besides the status ("ackmark": the error, RunAt). A held claim
// does not count attempts: a failure does.
const heldAck = `
{{- if .Delete}}
DELETE FROM {{.Table}} WHERE {{.ID}} {{keys}} AND {{.Status}} = {{.Pending}}
{{- else}}
UPDATE {{.Table}}
SET {{.Status}} = {{.Target}}
    {{- if and .Attempts (ne .Target .Done)}}, {{.Attempts}} = COALESCE({{.Attempts}}, 0) + 1{{end}}
    {{- template "ackmark" .}}
WHERE {{.ID}} {{keys}} AND {{.Status}} = {{.Pending}}
{{- end}}`

// coreDefines are template fragments every engine's claim statements may
// use: "cleartime" is ", claimed_at = NULL" for a row going back to pending
// when the table asks for it (ClaimTable.ClearClaimedAt).
//
// "ackmark" is what an ack sets besides the status and token: with an Error
// column, a failure stores "error" and a done clears it (a requeue leaves
// it); with a RunAt column, a retry sets it to {{template "delayed" .}},
// which every engine defines as its clock's now plus "delay", and a
// parking retry sets it to NULL on the rows it parks (where attempts
// reached {{template "maxatt" .}}, which every engine defines too).
const coreDefines = `{{define "cleartime"}}{{if .ClearClaimedAt}}, {{.ClaimedAt}} = NULL{{end}}{{end}}
{{- define "ackmark"}}
  {{- if and .Error (not .Undo)}}, {{.Error}} = {{if eq .Target .Done}}NULL{{else}}{{arg "error"}}{{end}}{{end}}
  {{- if and .RunAt (not .Undo) (eq .Target .Pending)}}, {{.RunAt}} = {{template "delayed" .}}{{end}}
  {{- if and .RunAt .Failed (eq .Target .Failed)}}, {{.RunAt}} = NULL{{end}}
  {{- if and .RunAt .ParkAt}}, {{.RunAt}} = CASE WHEN COALESCE({{.Attempts}}, 0) >= {{template "maxatt" .}} THEN NULL ELSE {{template "delayed" .}} END{{end}}
{{- end}}`

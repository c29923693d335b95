package dialect

import (
	"fmt"
)

// IDKind is the type of a key column. It matters for ordering expressions
// (PostgreSQL's plan-stable ORDER BY id + 0 needs an integer) and for DDL.
type IDKind int

const (
	// IDInt is an integer key (the default).
	IDInt IDKind = iota
	// IDText is a string key, including UUIDs stored as text.
	IDText
)

// ClaimTable describes a table whose rows are claimed. Column fields name the
// user's existing columns; the optional ones enable features.
type ClaimTable struct {
	// Table is the table name, optionally schema-qualified.
	Table string
	// ID is the primary key column (required). Claims order by it.
	ID string
	// IDKind is the key's type; zero means integer.
	IDKind IDKind
	// Status is the status column (required).
	Status string
	// Token is the claim token column, at least VARCHAR(40) (required).
	Token string
	// ClaimedAt is the claim time column (required); heartbeats move it and
	// the reaper compares it with the database clock.
	ClaimedAt string
	// ClaimedAtFormat says how ClaimedAt holds a time: its own date-time
	// type (the zero value), or integer unix time ([UnixSeconds],
	// [UnixMillis]), as in the cron story's send_at INT. Verification
	// refuses a format that does not match the column's type.
	ClaimedAtFormat TimeFormat
	// Attempts, if set, is incremented by every claim; it lets the reaper
	// and Fail park rows that keep failing.
	Attempts string
	// Version, if set, is an integer that writers increment when the row
	// changes. A claim returns it and a version-conditioned ack puts a row
	// whose version moved back to pending instead of done.
	Version string
	// CreatedAt, if set, is used by Stats for the age of the oldest pending
	// row.
	CreatedAt string
	// CreatedAtFormat says how CreatedAt holds a time, as ClaimedAtFormat.
	CreatedAtFormat TimeFormat
	// RunAt, if set, is a nullable time column saying when a pending row
	// may be claimed, on the database clock: claims take only rows whose
	// RunAt is NULL or not in the future. A retried fail with a delay and a
	// snooze set it to the database's now plus the delay; unparking and
	// retrying now clear it. Same type conventions as ClaimedAt.
	RunAt string
	// RunAtFormat says how RunAt holds a time, as ClaimedAtFormat.
	RunAtFormat TimeFormat
	// Error, if set, is a nullable text column where failing a row stores
	// the error's text, cut to the column's declared width (learnt from the
	// catalog by VerifySchema, whole characters only); an ack to done
	// clears it, so a parked row says why it was parked.
	Error string
	// Worker, if set, is a text column where every claim writes the name
	// of the worker that claimed the row (claim.Config.Worker, by default
	// host:pid), cut to the column's declared width, so that an operator
	// can tell who holds a row stuck in processing (claimctl stuck). Only
	// claims write it: a row keeps its last claimer's name after it is
	// acked, failed, released or reaped. Held claims mark no row and write
	// no name.
	Worker string
	// ClearClaimedAt sets ClaimedAt to NULL whenever a row goes back to
	// pending (a release, a reap, a retried fail, a requeued versioned
	// ack), as the cron story's own release does, so that existing code
	// reading the column sees only times of rows in flight. The column must
	// be nullable (verification checks it). Rows that end done or failed
	// keep their last claim time.
	ClearClaimedAt bool
	// TextTimes (SQLite only) stores and compares ClaimedAt and CreatedAt
	// as text in SQLite's own format, 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, as
	// datetime('now') and CURRENT_TIMESTAMP write them, for tables whose
	// code already keeps dates there as text. Without it claimlock writes
	// integer milliseconds; verification refuses a column declared as a
	// date or text type unless TextTimes is set, and one declared INTEGER if
	// it is, so the two conventions never mix in one column.
	TextTimes bool
	// DeleteDone makes an ack to done delete the row instead of keeping it
	// with the Done status, under the same conditions as the update it
	// replaces: only rows the ack's token still holds are deleted, a row
	// whose version moved goes back to pending instead, and the keys the
	// token no longer holds are reported lost. Failed and retried rows are
	// kept as without it. The table then holds only live rows (pending,
	// processing, failed), so it neither grows with done rows nor needs a
	// purge, and an ack writes no new row version.
	DeleteDone bool
	// Archive, if set, names a table that receives every row acked done
	// before the row is deleted from Table, in the ack's transaction. It
	// needs DeleteDone. The archive must have Table's columns in the same
	// order (CREATE TABLE archive (LIKE t) on PostgreSQL, CREATE TABLE
	// archive LIKE t on MySQL); a row arrives as an ack without DeleteDone
	// would have left it (status Done, token NULL). An archiving ack locks
	// the rows, updates them, copies them and deletes them: it costs more
	// than a plain DeleteDone ack, and AckAndClaim runs it in a
	// transaction rather than as one statement.
	Archive string
	// Columns are extra columns returned by a claim, in this order, after
	// the key (and the version, if set).
	Columns []string
	// Scope are the columns of the equality conditions every claim, reap and
	// stats call is restricted to (task_id = ?); values come per call.
	Scope []string
	// Status values, all required (string values default to PENDING,
	// PROCESSING, DONE and FAILED). Failed is the status of parked rows: a
	// row that keeps failing is parked, never retried forever.
	Pending, Processing, Done, Failed Status
}

// Validate checks every identifier and status value, returning an error
// wrapping [ErrInvalidConfig] that names the first bad field.
func (s ClaimTable) Validate() error {
	if err := validateIdent("Table", s.Table); err != nil {
		return err
	}
	req := []struct{ f, v string }{{"ID", s.ID}, {"Status", s.Status}, {"Token", s.Token}, {"ClaimedAt", s.ClaimedAt}}
	for _, c := range req {
		if err := validateColumn(c.f, c.v); err != nil {
			return err
		}
	}
	opt := []struct{ f, v string }{{"Attempts", s.Attempts}, {"Version", s.Version}, {"CreatedAt", s.CreatedAt}, {"RunAt", s.RunAt}, {"Error", s.Error}, {"Worker", s.Worker}}
	for _, c := range opt {
		if c.v == "" {
			continue
		}
		if err := validateColumn(c.f, c.v); err != nil {
			return err
		}
	}
	if s.Archive != "" {
		if err := validateIdent("Archive", s.Archive); err != nil {
			return err
		}
		if !s.DeleteDone {
			return fmt.Errorf("%w: Archive: an archive table needs DeleteDone (done rows are moved there)", ErrInvalidConfig)
		}
		if s.Archive == s.Table {
			return fmt.Errorf("%w: Archive: the archive table is the claim table %s", ErrInvalidConfig, s.Table)
		}
	}
	for i, c := range s.Columns {
		if err := validateColumn(fmt.Sprintf("Columns[%d]", i), c); err != nil {
			return err
		}
	}
	for i, c := range s.Scope {
		if err := validateColumn(fmt.Sprintf("Scope[%d]", i), c); err != nil {
			return err
		}
	}
	if s.IDKind != IDInt && s.IDKind != IDText {
		return fmt.Errorf("%w: IDKind: unknown kind %d", ErrInvalidConfig, s.IDKind)
	}
	for _, tf := range []struct {
		field, column string
		f             TimeFormat
	}{{"ClaimedAt", s.ClaimedAt, s.ClaimedAtFormat}, {"CreatedAt", s.CreatedAt, s.CreatedAtFormat}, {"RunAt", s.RunAt, s.RunAtFormat}} {
		if err := validateTimeFormat(tf.field, tf.column, tf.f, s.TextTimes); err != nil {
			return err
		}
	}
	if err := s.checkStatuses(); err != nil {
		return err
	}
	if err := s.checkRoles(); err != nil {
		return err
	}
	all := []Status{s.Pending, s.Processing, s.Done, s.Failed}
	for i := range all {
		if all[i].IsNumeric() != all[0].IsNumeric() {
			return fmt.Errorf("%w: status values mix strings and integers", ErrInvalidConfig)
		}
		for j := i + 1; j < len(all); j++ {
			if all[i] == all[j] {
				return fmt.Errorf("%w: status value %s is used twice", ErrInvalidConfig, all[i])
			}
		}
	}
	return nil
}

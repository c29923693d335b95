package dialect

import (
	"fmt"
)

// LeaseTable describes the table leases live in: the user's own task table
// (Keyed false: rows exist already, keyed by their id) or a library-managed
// key table (Keyed true: acquire inserts a missing key first).
type LeaseTable struct {
	// Table is the table name, optionally schema-qualified.
	Table string
	// Key is the key column (a task id, or a string key).
	Key string
	// KeyKind is the key's type; zero means integer.
	KeyKind IDKind
	// KeyMaxLen is the length of a text key column; longer keys are
	// rejected before any statement runs. Zero means 255.
	KeyMaxLen int
	// Owner is the owner token column, at least VARCHAR(40). Leave it
	// empty for a task table that has only a lock time (the cron story's
	// xxx_task(id, status, lock_at)): the lease is then identified by the
	// LockedAt value its acquisition or last renewal wrote, read back from
	// the database as an integer on its own clock, and renewals, releases
	// and Finish are conditioned on that value (tasklock.Lease.Owner).
	// Two holders can never share it: a new acquisition writes LockedAt at
	// least a TTL plus the column's resolution after the old value. That
	// mode needs a non-keyed table without ExpiresAt.
	Owner string
	// Status, if set, is the task's status column, which
	// tasklock.Lease.Finish sets when it releases a lease it still holds.
	Status string
	// LockedAt is the acquisition/renewal time column (the cron story's
	// lock_at). Required.
	LockedAt string
	// LockedAtFormat says how LockedAt holds a time: its own date-time
	// type (the zero value), or integer unix time ([UnixSeconds],
	// [UnixMillis]), as in a task table's lock_at INT. Verification refuses
	// a format that does not match the column's type.
	LockedAtFormat TimeFormat
	// ExpiresAt, if set, holds the expiry; without it a lease expires at
	// LockedAt + TTL, which is only safe when every holder of a key uses the
	// same TTL.
	ExpiresAt string
	// ExpiresAtFormat says how ExpiresAt holds a time, as LockedAtFormat.
	ExpiresAtFormat TimeFormat
	// Fence, if set, is an integer incremented by every acquisition: the
	// fencing token. Without it leases report fence 0.
	Fence string
	// Keyed makes acquire insert a row for a missing key first.
	Keyed bool
	// TextTimes (SQLite only) stores and compares LockedAt and ExpiresAt
	// as text in SQLite's own format, 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, as
	// [ClaimTable.TextTimes] does for claim tables: for task tables whose
	// code already keeps its lock time there as text (the cron story's
	// xxx_task.lock_at DATETIME). Without it claimlock writes integer
	// milliseconds; verification refuses a column declared as a date or
	// text type unless TextTimes is set, and one declared INTEGER if it is.
	// The application's own text dates (datetime('now'),
	// CURRENT_TIMESTAMP) hold whole seconds, so every expiry test on text
	// dates allows a whole second more: a lease is never taken before its
	// expiry, and may be taken up to a second after it.
	TextTimes bool
}

// Validate checks identifiers and lengths, returning an error wrapping
// [ErrInvalidConfig] that names the first bad field.
func (s LeaseTable) Validate() error {
	if err := validateIdent("Table", s.Table); err != nil {
		return err
	}
	for _, c := range []struct{ f, v string }{{"Key", s.Key}, {"LockedAt", s.LockedAt}} {
		if err := validateColumn(c.f, c.v); err != nil {
			return err
		}
	}
	if s.Owner == "" && (s.Keyed || s.ExpiresAt != "") {
		return fmt.Errorf("%w: Owner: a lease without an owner column needs a non-keyed table without ExpiresAt", ErrInvalidConfig)
	}
	for _, c := range []struct{ f, v string }{{"Owner", s.Owner}, {"Status", s.Status}, {"ExpiresAt", s.ExpiresAt}, {"Fence", s.Fence}} {
		if c.v == "" {
			continue
		}
		if err := validateColumn(c.f, c.v); err != nil {
			return err
		}
	}
	if s.KeyKind != IDInt && s.KeyKind != IDText {
		return fmt.Errorf("%w: KeyKind: unknown kind %d", ErrInvalidConfig, s.KeyKind)
	}
	for _, tf := range []struct {
		field, column string
		f             TimeFormat
	}{{"LockedAt", s.LockedAt, s.LockedAtFormat}, {"ExpiresAt", s.ExpiresAt, s.ExpiresAtFormat}} {
		if err := validateTimeFormat(tf.field, tf.column, tf.f, s.TextTimes); err != nil {
			return err
		}
	}
	if s.KeyMaxLen < 0 {
		return fmt.Errorf("%w: KeyMaxLen: negative", ErrInvalidConfig)
	}
	return nil
}

// MaxKeyLen returns KeyMaxLen or its default, 255.
func (s LeaseTable) MaxKeyLen() int {
	if s.KeyMaxLen == 0 {
		return 255
	}
	return s.KeyMaxLen
}

// CheckKey validates a key value against the table: an integer type for
// integer keys, a non-empty string of at most MaxKeyLen bytes for text keys.
func (s LeaseTable) CheckKey(key any) error {
	switch s.KeyKind {
	case IDText:
		k, ok := key.(string)
		if !ok {
			return fmt.Errorf("%w: key %v has type %T; want string", ErrInvalidConfig, key, key)
		}
		if k == "" {
			return fmt.Errorf("%w: key is empty", ErrInvalidConfig)
		}
		if len(k) > s.MaxKeyLen() {
			return fmt.Errorf("%w: key is %d bytes; the column holds %d", ErrInvalidConfig, len(k), s.MaxKeyLen())
		}
	default:
		switch key.(type) {
		case int, int8, int16, int32, int64, uint8, uint16, uint32:
		default:
			return fmt.Errorf("%w: key %v has type %T; want an integer", ErrInvalidConfig, key, key)
		}
	}
	return nil
}

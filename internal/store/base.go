package store

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/seal"
)

// Base is one engine's implementation of the store: its runtime, its
// statements and its overrides. An engine package builds it and hides it in
// its Dialect through a [Handle]; the orchestration packages reach it with
// [Of].
type Base struct {
	E      *Engine
	Claims ClaimSQL
	Leases LeaseSQL
	// Schedules are the statements on the schedule tables.
	Schedules ScheduleSQL
	// Override, if not nil, runs claims instead of ClaimSQL.Claim.
	Override Claimer
	// Notifier, if not nil, wakes the claimers of this process when another
	// process makes rows pending (PostgreSQL's LISTEN/NOTIFY).
	Notifier Notifier
}

// Handle carries an engine's [Base] inside the engine package's Dialect,
// which embeds it through an unexported alias (type handle = store.Handle),
// so that the field is unexported there and users cannot reach the Base.
type Handle struct{ b *Base }

// NewHandle returns the handle of b.
func NewHandle(b *Base) Handle { return Handle{b: b} }

// Capabilities implements [dialect.Dialect].
func (h Handle) Capabilities() dialect.Capabilities { return h.b.E.Caps }

// base is the method that only a Handle (and so only a Dialect of this
// module's engine packages) has.
func (h Handle) base() *Base { return h.b }

// handled is a value that embeds a Handle.
type handled interface{ base() *Base }

// Of returns the Base of d, or an error wrapping [dialect.ErrInvalidConfig]
// when d is not a Dialect of this module's engine packages. A test's
// dialect that wraps another (it has an Inner method) resolves to the
// inner one's Base.
func Of(d dialect.Dialect) (*Base, error) {
	for d != nil {
		if h, ok := d.(handled); ok && h.base() != nil {
			return h.base(), nil
		}
		w, ok := d.(inner)
		if !ok {
			break
		}
		d = w.Inner()
	}
	return nil, fmt.Errorf("%w: Dialect: %T is not a dialect of claimlock's engine packages (make one with mysql.New, postgres.New or sqlite.New)", dialect.ErrInvalidConfig, d)
}

// inner is a test's dialect that wraps another one to inject faults or to
// watch the statements: its stores are the inner dialect's, passed through
// its WrapClaims and WrapLeases methods where it has them. Only code of
// this module can write those methods (they name this package's types).
type inner interface{ Inner() dialect.Dialect }

// wrappers returns the wrapping dialects around d's Base, innermost first.
func wrappers(d dialect.Dialect) []dialect.Dialect {
	var out []dialect.Dialect
	for {
		w, ok := d.(inner)
		if !ok {
			return out
		}
		out = append([]dialect.Dialect{d}, out...)
		d = w.Inner()
	}
}

// OpenClaims validates spec and returns the claim store of d for it.
// Errors wrap [dialect.ErrInvalidConfig].
func OpenClaims(d dialect.Dialect, spec dialect.ClaimTable) (ClaimStore, error) {
	b, err := Of(d)
	if err != nil {
		return nil, err
	}
	s, err := NewClaims(b.E, b.Claims, spec, b.Override)
	if err != nil {
		return nil, err
	}
	var cs ClaimStore = s
	for _, w := range wrappers(d) {
		if cw, ok := w.(interface{ WrapClaims(ClaimStore) ClaimStore }); ok {
			cs = cw.WrapClaims(cs)
		}
	}
	return cs, nil
}

// OpenLeases validates spec and returns the lease store of d for it.
// Errors wrap [dialect.ErrInvalidConfig].
func OpenLeases(d dialect.Dialect, spec dialect.LeaseTable) (LeaseStore, error) {
	b, err := Of(d)
	if err != nil {
		return nil, err
	}
	s, err := NewLeases(b.E, b.Leases, spec)
	if err != nil {
		return nil, err
	}
	var ls LeaseStore = s
	for _, w := range wrappers(d) {
		if lw, ok := w.(interface{ WrapLeases(LeaseStore) LeaseStore }); ok {
			ls = lw.WrapLeases(ls)
		}
	}
	return ls, nil
}

// QuoteIdent validates name with [ValidateIdent] and quotes it for d's
// engine (each part of schema.table separately).
func QuoteIdent(d dialect.Dialect, field, name string) (string, error) {
	b, err := Of(d)
	if err != nil {
		return "", err
	}
	if err := ValidateIdent(field, name); err != nil {
		return "", err
	}
	return b.E.QuoteName(name), nil
}

// CreateTableDDL renders CREATE TABLE IF NOT EXISTS (plus its indexes) for
// def in d's engine's syntax: how tests, examples and the schema helpers
// create tables without holding SQL of their own.
func CreateTableDDL(d dialect.Dialect, def TableDef) ([]string, error) {
	b, err := Of(d)
	if err != nil {
		return nil, err
	}
	return b.E.CreateTableDDL(def)
}

// ExecDDL runs statements made by the DDL functions on d, in order.
func ExecDDL(ctx context.Context, d dialect.Dialect, stmts []string) error {
	b, err := Of(d)
	if err != nil {
		return err
	}
	return b.E.ExecDDL(ctx, stmts)
}

// Retries returns how many times d re-ran a statement or transaction after
// a deadlock or serialization failure (0 for a value that is not a
// Dialect of this module).
func Retries(d dialect.Dialect) int64 {
	b, err := Of(d)
	if err != nil {
		return 0
	}
	return b.E.Retry.Retries()
}

// NotifierOf returns d's notifier, or nil where the engine has none.
func NotifierOf(d dialect.Dialect) Notifier {
	b, err := Of(d)
	if err != nil {
		return nil
	}
	return b.Notifier
}

// TxOf returns the transaction a [dialect.Tx] holds (a *sql.Tx, or an
// engine driver's own transaction), or an error wrapping
// [dialect.ErrInvalidConfig] for the zero Tx.
func TxOf(tx dialect.Tx) (any, error) {
	t := seal.TxOf(tx)
	if t == nil {
		return nil, fmt.Errorf("%w: Tx: the zero Tx holds no transaction (use dialect.SQLTx or postgres.PgxTx)", dialect.ErrInvalidConfig)
	}
	return t, nil
}

// StatusOf converts a status value of a test or a command line: a string,
// or any Go integer type. Other types and refused strings are errors
// wrapping [dialect.ErrInvalidConfig], naming field.
func StatusOf(field string, v any) (dialect.Status, error) {
	var s dialect.Status
	switch x := v.(type) {
	case string:
		s = dialect.StatusString(x)
	case int:
		s = dialect.StatusInt(int64(x))
	case int8:
		s = dialect.StatusInt(int64(x))
	case int16:
		s = dialect.StatusInt(int64(x))
	case int32:
		s = dialect.StatusInt(int64(x))
	case int64:
		s = dialect.StatusInt(x)
	case uint8:
		s = dialect.StatusInt(int64(x))
	case uint16:
		s = dialect.StatusInt(int64(x))
	case uint32:
		s = dialect.StatusInt(int64(x))
	case dialect.Status:
		s = x
	default:
		return s, fmt.Errorf("%w: %s: status value %v has type %T; want a string or an integer", dialect.ErrInvalidConfig, field, v, v)
	}
	return s, s.Check(field)
}

// CheckOptions validates the options an engine package's constructor
// takes and returns the logger they name (slog.Default() when nil).
func CheckOptions(engine string, opts dialect.Options) (*slog.Logger, error) {
	if err := opts.Retry.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", engine, err)
	}
	if opts.Logger == nil {
		return slog.Default(), nil
	}
	return opts.Logger, nil
}

package store

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/seal"
	"github.com/claimlock/claimlock/internal/store/render"
)

// Backend is one engine's store: its [Driver], with the retrier that every
// operation runs under and the logger that receives warnings. An engine
// package builds it when its Dialect is built, and keeps it in the Dialect
// through a [BackendRef]; the orchestration packages reach it with [Of].
type Backend struct {
	drv       Driver
	db        DB
	style     render.Style
	caps      dialect.Capabilities
	claims    ClaimSQL
	leases    LeaseSQL
	schedules ScheduleSQL
	retry     *retrier
	logger    *slog.Logger
}

// NewBackend returns the backend of drv, reading its statements and
// settings once. Its operations retry under opts.Retry (validated by
// [CheckOptions]) and warn through logger, which must not be nil.
func NewBackend(drv Driver, opts dialect.Options, logger *slog.Logger) *Backend {
	return &Backend{
		drv: drv, db: drv.DB(), style: drv.Style(), caps: drv.Capabilities(),
		claims: drv.ClaimSQL(), leases: drv.LeaseSQL(), schedules: drv.ScheduleSQL(), retry: newRetrier(opts.Retry), logger: logger,
	}
}

// Ref returns the reference an engine package's Dialect embeds.
func (b *Backend) Ref() BackendRef { return BackendRef{b: b} }

// Logger returns the logger warnings go to.
func (b *Backend) Logger() *slog.Logger { return b.logger }

// Style returns the engine's placeholder style.
func (b *Backend) Style() render.Style { return b.style }

// BackendRef carries a [Backend] inside an engine package's Dialect, which
// embeds it through an unexported alias (type backendRef =
// store.BackendRef), so that the field is unexported there and users
// cannot reach the Backend. It gives the Dialect its Capabilities method.
type BackendRef struct{ b *Backend }

// Capabilities implements [dialect.Dialect].
func (r BackendRef) Capabilities() dialect.Capabilities { return r.b.caps }

// backend is the method that only a BackendRef (and so only a Dialect of
// this module's engine packages) has.
func (r BackendRef) backend() *Backend { return r.b }

// referrer is a value that embeds a BackendRef.
type referrer interface{ backend() *Backend }

// Of returns the Backend of d, or an error wrapping
// [dialect.ErrInvalidConfig] when d is not a Dialect of this module's
// engine packages. A test's dialect that wraps another (it has an Inner
// method) resolves to the inner one's Backend.
func Of(d dialect.Dialect) (*Backend, error) {
	for d != nil {
		if r, ok := d.(referrer); ok && r.backend() != nil {
			return r.backend(), nil
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

// wrappers returns the wrapping dialects around d's Backend, innermost
// first.
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
	s, err := newClaims(b, spec)
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
	s, err := newLeases(b, spec)
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
	return b.quoteName(name), nil
}

// CreateTableDDL renders CREATE TABLE IF NOT EXISTS (plus its indexes) for
// def in d's engine's syntax: how tests, examples and the schema helpers
// create tables without holding SQL of their own.
func CreateTableDDL(d dialect.Dialect, def TableDef) ([]string, error) {
	b, err := Of(d)
	if err != nil {
		return nil, err
	}
	return b.createTableDDL(def)
}

// ExecDDL runs statements made by the DDL functions on d, in order.
func ExecDDL(ctx context.Context, d dialect.Dialect, stmts []string) error {
	b, err := Of(d)
	if err != nil {
		return err
	}
	return b.execDDL(ctx, stmts)
}

// Retries returns how many times d re-ran a statement or transaction after
// a deadlock or serialization failure (0 for a value that is not a
// Dialect of this module).
func Retries(d dialect.Dialect) int64 {
	b, err := Of(d)
	if err != nil {
		return 0
	}
	return b.retry.Retries()
}

// NotifierOf returns d's notifier, or nil where the engine has none.
func NotifierOf(d dialect.Dialect) Notifier {
	b, err := Of(d)
	if err != nil {
		return nil
	}
	n, _ := b.drv.(PendingNotifier)
	return n
}

// txOf returns the transaction a [dialect.Tx] holds (a *sql.Tx, or an
// engine driver's own transaction), or an error wrapping
// [dialect.ErrInvalidConfig] for the zero Tx.
func txOf(tx dialect.Tx) (any, error) {
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

// QuoteName quotes a validated, possibly schema-qualified name as the
// engine writes it.
func (b *Backend) QuoteName(name string) string { return b.quoteName(name) }

// quoteName quotes a validated, possibly schema-qualified name.
func (b *Backend) quoteName(name string) string {
	schema, table := SplitName(name)
	if schema == "" {
		return b.drv.Quote(table)
	}
	return b.drv.Quote(schema) + "." + b.drv.Quote(table)
}

// quoteOpt quotes an optional column name ("" stays "").
func (b *Backend) quoteOpt(c string) string {
	if c == "" {
		return ""
	}
	return b.drv.Quote(c)
}

// SplitName splits schema.table; schema is "" for a one-part name.
func SplitName(name string) (schema, table string) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i], name[i+1:]
		}
	}
	return "", name
}

// poolSize returns the most connections the engine's pool opens, or 0 when
// it is not bounded or not known: a [ConnDB]'s MaxOpenConns, or the
// MaxConns of a pool that reports it.
func (b *Backend) poolSize() int {
	switch db := b.db.(type) {
	case ConnDB:
		return db.DB.Stats().MaxOpenConnections
	case interface{ MaxConns() int }:
		return db.MaxConns()
	}
	return 0
}

package claim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// DefaultPauseTable is the pause table's name when none is given.
const DefaultPauseTable = "claimlock_pauses"

// DefaultPauseRefresh is how long a claimer trusts the pauses it read
// when Config.PauseRefresh is zero.
const DefaultPauseRefresh = time.Second

// ErrPaused reports a claim of a paused table or scope: nothing was
// claimed. [Claimer.Claim] and [Holder.Hold] return errors matching it;
// [Claimer.Run] and [Holder.Run] wait for the pause to end (see
// [WorkerConfig.Drain] for a drain).
var ErrPaused = errors.New("claim: paused")

// Pauses records which claim tables and scopes are paused, in a table of
// its own (one row per pause, so pauses survive restarts and every process
// sees them). A claimer configured with the same table (Config.PauseTable)
// claims nothing from a paused table or scope. Rows already claimed are
// not affected: their batches finish as usual.
//
// A pause names the claim table as the claimers' Config.Table spells it,
// and optionally scope values, one per Scope column of those claimers in
// their order. No values pause the whole table, every scope of it. Values
// are matched by their text (see [PauseScope]): 42 and "42" name the same
// scope, 42 and "042" do not.
type Pauses struct {
	st *store.Pauses
}

// NewPauses returns the pauses kept in table (default
// [DefaultPauseTable]) of d's database. It does not touch the database;
// create the table with [CreatePauseTable]. Errors wrap
// [dialect.ErrInvalidConfig].
func NewPauses(d dialect.Dialect, table string) (*Pauses, error) {
	if d == nil {
		return nil, invalid("Dialect", "is nil")
	}
	if table == "" {
		table = DefaultPauseTable
	}
	st, err := store.OpenPauses(d, table)
	if err != nil {
		return nil, fmt.Errorf("claim: pauses: %w", err)
	}
	return &Pauses{st: st}, nil
}

// PauseTableDDL returns the statements that create the pause table named
// table (default [DefaultPauseTable]) if it does not exist, in d's
// syntax: columns claim_table and scope (the primary key), reason,
// paused_by and paused_us (microseconds since the Unix epoch on the
// database clock).
func PauseTableDDL(d dialect.Dialect, table string) ([]string, error) {
	if d == nil {
		return nil, invalid("Dialect", "is nil")
	}
	if table == "" {
		table = DefaultPauseTable
	}
	if err := store.ValidateIdent("PauseTable", table); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	ddl, err := store.CreateTableDDL(d, store.PauseTableDef(table))
	if err != nil {
		return nil, fmt.Errorf("claim: pause table: %w", err)
	}
	return ddl, nil
}

// CreatePauseTable creates the pause table if it does not exist (see
// [PauseTableDDL]).
func CreatePauseTable(ctx context.Context, d dialect.Dialect, table string) error {
	ddl, err := PauseTableDDL(d, table)
	if err != nil {
		return err
	}
	if err := store.ExecDDL(ctx, d, ddl); err != nil {
		return fmt.Errorf("claim: create pause table: %w", err)
	}
	return nil
}

// Table returns the pause table's name.
func (p *Pauses) Table() string { return p.st.Table() }

// Verify checks that the pause table exists with its columns. Errors wrap
// [dialect.ErrInvalidConfig].
func (p *Pauses) Verify(ctx context.Context) error {
	if err := p.st.VerifySchema(ctx); err != nil {
		return fmt.Errorf("claim: pauses: %w", err)
	}
	return nil
}

// PauseNote says why a pause was made and by whom; both are optional.
// Reason keeps at most 1000 characters, By 255.
type PauseNote struct {
	Reason, By string
}

// Pause pauses the scope of table given by scope (one value per Scope
// column; none for the whole table) across every process: claims that
// start after claimers saw it take no rows of it. It reports false when
// that pause existed already (its note is left as it was). Errors wrap
// [dialect.ErrInvalidConfig] for a bad table name or scope value.
func (p *Pauses) Pause(ctx context.Context, table string, scope []any, note PauseNote) (bool, error) {
	text, err := PauseScope(scope...)
	if err != nil {
		return false, err
	}
	ok, err := p.st.Pause(ctx, table, text, note.Reason, note.By)
	if err != nil {
		return false, fmt.Errorf("claim: pause %s: %w", describePause(table, text), err)
	}
	return ok, nil
}

// Resume ends the pause of table's scope (none: the table-wide pause). It
// reports false when there was none. A table-wide pause and a pause of a
// scope are separate: resuming one leaves the other.
func (p *Pauses) Resume(ctx context.Context, table string, scope []any) (bool, error) {
	text, err := PauseScope(scope...)
	if err != nil {
		return false, err
	}
	ok, err := p.st.Resume(ctx, table, text)
	if err != nil {
		return false, fmt.Errorf("claim: resume %s: %w", describePause(table, text), err)
	}
	return ok, nil
}

// Pause is one pause as [Pauses.List] reads it.
type Pause struct {
	// Table is the paused claim table.
	Table string
	// Scope is the paused scope's values as text, in the Scope columns'
	// order; empty when the whole table is paused.
	Scope []string
	// ScopeText is the scope as the pause table keeps it ([PauseScope]).
	ScopeText string
	// Reason and By are the pause's note.
	Reason, By string
	// PausedAt is when it was made and Age how long ago, on the database
	// clock.
	PausedAt time.Time
	Age      time.Duration
}

// List returns the pauses, by table and scope, at most limit (1 to
// [MaxListLimit]).
func (p *Pauses) List(ctx context.Context, limit int) ([]Pause, error) {
	rows, err := p.st.List(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("claim: pauses: %w", err)
	}
	out := make([]Pause, len(rows))
	for i, r := range rows {
		out[i] = Pause{
			Table: r.Table, Scope: store.SplitPauseScope(r.Scope), ScopeText: r.Scope, Reason: r.Reason, By: r.By,
			PausedAt: time.UnixMicro(r.PausedAt).UTC(), Age: time.Duration(r.Now-r.PausedAt) * time.Microsecond,
		}
	}
	return out, nil
}

// PauseScope returns the text a pause keeps of scope values: each value as
// text (integers in decimal, times in RFC 3339 UTC), joined by commas, a
// comma or backslash inside a value escaped by a backslash; "" for none.
// Errors wrap [dialect.ErrInvalidConfig].
func PauseScope(values ...any) (string, error) {
	text, err := store.PauseScopeText(values)
	if err != nil {
		return "", fmt.Errorf("claim: %w", err)
	}
	return text, nil
}

// describePause names a pause in messages.
func describePause(table, scope string) string {
	if scope == "" {
		return table
	}
	return fmt.Sprintf("%s scope %s", table, scope)
}

// pauseCheck is the pause state one claimer (and its scope views) reads
// before each claim: the scopes of its table paused, as last read.
type pauseCheck struct {
	st      *store.Pauses
	table   string
	refresh time.Duration // how long a read is trusted; negative: not at all
	mu      sync.Mutex
	read    time.Time       // local start of the last successful read; zero: none
	paused  map[string]bool // scope texts paused ("": the whole table)
}

// newPauseCheck returns the pause check of cfg's claimer, or nil when cfg
// has no PauseTable.
func newPauseCheck(d dialect.Dialect, cfg Config, table string) (*pauseCheck, error) {
	if cfg.PauseTable == "" {
		return nil, nil
	}
	st, err := store.OpenPauses(d, cfg.PauseTable)
	if err != nil {
		return nil, fmt.Errorf("claim: PauseTable: %w", err)
	}
	refresh := cfg.PauseRefresh
	if refresh == 0 {
		refresh = DefaultPauseRefresh
	}
	return &pauseCheck{st: st, table: table, refresh: refresh}, nil
}

// check returns an error matching [ErrPaused] when the table or scope (a
// [PauseScope] text) is paused, reading the pause table when its last read
// is older than the refresh. A failed read fails the claim: a claimer
// never claims without knowing.
func (p *pauseCheck) check(ctx context.Context, scope string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.read.IsZero() || p.refresh < 0 || time.Since(p.read) >= p.refresh {
		start := time.Now()
		scopes, err := p.st.Of(ctx, p.table)
		if err != nil {
			return fmt.Errorf("claim: read pauses: %w", err)
		}
		p.paused = make(map[string]bool, len(scopes))
		for _, s := range scopes {
			p.paused[s] = true
		}
		p.read = start
	}
	switch {
	case p.paused[""]:
		return fmt.Errorf("%w: table %s", ErrPaused, p.table)
	case scope != "" && p.paused[scope]:
		return fmt.Errorf("%w: table %s scope %s", ErrPaused, p.table, scope)
	}
	return nil
}

// checkPaused returns an error matching [ErrPaused] when k's table or
// scope is paused (nil without a PauseTable).
func (k *core) checkPaused(ctx context.Context) error {
	if k.pauses == nil {
		return nil
	}
	return k.pauses.check(ctx, k.pauseScope)
}

// pauseScopeOf returns the pause text of scope values, for a claimer with
// a pause table ("" without one).
func pauseScopeOf(p *pauseCheck, values []any) (string, error) {
	if p == nil || len(values) == 0 {
		return "", nil
	}
	text, err := store.PauseScopeText(values)
	if err != nil {
		return "", invalid("ScopeValues", "%s", strings.TrimPrefix(err.Error(), dialect.ErrInvalidConfig.Error()+": "))
	}
	return text, nil
}

// observePaused reports a claim skipped for a pause to the observer, if
// any.
func (k *core) observePaused(ctx context.Context, start time.Time, held bool) {
	if k.obs == nil {
		return
	}
	e := k.event(OpPaused, "", start, nil)
	e.Held = held
	k.obs.Observe(ctx, e)
}

package coalesce

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/detach"
	"github.com/claimlock/claimlock/internal/group"
)

// Change is one change of a key's state, as a client reports it.
type Change struct {
	// Key names the state the change is for (a user, an account); at
	// most [MaxKeyLen] bytes, not empty.
	Key string
	// EventID identifies the change for ever: a change whose EventID was
	// accepted before is not accepted again (its first [Receipt] is
	// returned). At most [MaxEventIDLen] bytes, not empty.
	EventID string
	// Source, if set, is who produced the change (a device, a client
	// session), and Seq its position in that source's changes of Key:
	// a change is refused with a [*StaleError] unless Seq is above the
	// last one accepted from Source for Key. Without a Source, Seq is
	// stored but not checked. At most [MaxSourceLen] bytes.
	Source string
	Seq    int64
	// Payload is the change itself, stored as bytes and handed to the
	// fold as it was given.
	Payload []byte
}

// Receipt is what [Coalescer.Accept] returns for a change that is durably
// recorded: its own, or, for a change whose event id was accepted before
// (Duplicate), the first one's.
type Receipt struct {
	// Key, EventID, Source and Seq are those of the recorded change.
	Key, EventID, Source string
	Seq                  int64
	// ID is the change's row id in the changes table ([Record.ID]).
	ID int64
	// Duplicate is set when the event id had been accepted before: nothing
	// new was recorded.
	Duplicate bool
}

// Coalescer records changes of keys' states and marks their keys dirty for
// the flushers ([Coalescer.Flusher]). It is safe for concurrent use.
type Coalescer struct {
	d   dialect.Dialect
	db  *sql.DB
	e   engine
	cfg Config
	sq  statements
	bq  batchSQL

	// group records concurrent Accepts together (Config.Group); nil
	// without grouping.
	group *group.Group[Change, Receipt]

	// wake tells this process's idle flushers that a key became dirty.
	wake chan struct{}
	// notifier sends Config.Notify's notifications (a claimer of the keys
	// table); nil without Notify. Claimer.NotifyPending is the public way
	// to the dialect's notifier: it names the channel as the flushers'
	// claimers do and sends on a deadline of its own, and the claimer is
	// built once, without touching the database. postgres.Notify would
	// make every build of this package link pgx.
	notifier *claim.Claimer[struct{}]

	pmu      sync.Mutex
	pAt      time.Time // when the pressure below was measured
	pBacklog int64
	pOldest  time.Duration

	// markRead, for tests only, runs in markDirty between its first read
	// of the key's row and its write, where the tests race a flusher.
	markRead func(key string)
	// beforeInsert, for tests only, runs in recordBatch with the batch's
	// context before the insert of its changes, after its sources' rows
	// are written, where the tests end a grouped run mid-transaction.
	beforeInsert func(ctx context.Context)
}

// New returns a coalescer of cfg's tables on db, the database/sql handle
// of the database d was made on (for PostgreSQL through pgx, the pool's
// stdlib.OpenDBFromPool or the handle given to postgres.NewStdlib). It
// does not touch the database; create the tables with [CreateTables].
// Errors wrap [dialect.ErrInvalidConfig] naming the field, or
// [dialect.ErrNotSupported] for an engine it does not know.
func New(d dialect.Dialect, db *sql.DB, cfg Config) (*Coalescer, error) {
	e, cfg, err := prepare(d, cfg)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, invalid("db", "is nil")
	}
	c := &Coalescer{d: d, db: db, e: e, cfg: cfg, sq: newStatements(e, cfg), bq: newBatchSQL(e, cfg), wake: make(chan struct{}, 1)}
	if cfg.Group > 0 {
		c.group = &group.Group[Change, Receipt]{Run: c.acceptGroup, Max: cfg.Group, InFlight: cfg.GroupInFlight}
	}
	if cfg.Notify {
		if e != engPostgres {
			return nil, invalid("Notify", "only PostgreSQL has notifications; other processes' flushers find dirty keys by polling")
		}
		if c.notifier, err = claim.New[struct{}](d, claimConfig(cfg), nil); err != nil {
			return nil, fmt.Errorf("coalesce: %w", err)
		}
	}
	return c, nil
}

// check refuses a change the tables cannot hold.
func check(ch Change) error {
	switch {
	case ch.Key == "" || len(ch.Key) > MaxKeyLen:
		return invalid("Change.Key", "must be 1 to %d bytes, got %d", MaxKeyLen, len(ch.Key))
	case ch.EventID == "" || len(ch.EventID) > MaxEventIDLen:
		return invalid("Change.EventID", "must be 1 to %d bytes, got %d", MaxEventIDLen, len(ch.EventID))
	case len(ch.Source) > MaxSourceLen:
		return invalid("Change.Source", "must be at most %d bytes, got %d", MaxSourceLen, len(ch.Source))
	}
	return nil
}

// Accept records ch durably and marks its key dirty, so that a flush
// folds it: when Accept returns a receipt, the change is committed and
// will be folded exactly once, whatever crashes follow. It returns
//
//   - for an event id accepted before, that change's receipt with
//     Duplicate set (and marks its key dirty again, in case the first
//     call died between its commit and its mark);
//   - a [*StaleError] (matching [ErrStale]) when ch.Source is set and
//     ch.Seq is not above the last sequence accepted from it for ch.Key;
//   - an [*OverloadError] (matching [ErrOverloaded]) when a limit of the
//     Config is exceeded;
//   - an error wrapping [dialect.ErrInvalidConfig] for a change the
//     tables cannot hold.
//
// The change is committed in a short transaction of its own (with
// Config.Group, one it may share with concurrent Accepts: see there) that
// does not write the key's row; the dirty mark follows as a compare-and-set that
// writes the key's row only when no flush already pending or in progress
// is sure to fold the change, so a hot key's writers do not queue on its
// row. Deadlocks and serialization failures are retried
// ([Config.Retry]).
func (c *Coalescer) Accept(ctx context.Context, ch Change) (r Receipt, err error) {
	start := time.Now()
	defer func() { c.observeAccept(ctx, start, ch.Key, r, false, err) }()
	return c.accept(ctx, ch)
}

func (c *Coalescer) accept(ctx context.Context, ch Change) (Receipt, error) {
	if err := check(ch); err != nil {
		return Receipt{}, err
	}
	if err := c.pressure(ctx); err != nil {
		return Receipt{}, err
	}
	if c.group != nil && groupable(ch) {
		return c.group.Do(ctx, ch)
	}
	var r Receipt
	err := dialect.Retry(ctx, c.cfg.Retry, "coalesce accept", func() error {
		tx, err := c.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		var undo bool
		r, undo, err = c.record(ctx, tx, ch)
		if err != nil || undo {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return Receipt{}, c.wrap("accept", err)
	}
	if err := c.markCommitted(ctx, func(ctx context.Context) error { return c.markDirty(ctx, r.Key) }); err != nil {
		return Receipt{}, c.wrap("accept: mark dirty", err)
	}
	return r, nil
}

// markTimeout bounds the dirty marks of committed changes (markCommitted).
const markTimeout = 10 * time.Second

// markCommitted runs mark, the dirty mark of changes just committed, with
// retries, on a deadline of its own (markTimeout), not ctx's: a caller
// that stops waiting once its changes are recorded (or a grouped run whose
// callers have all gone) still gets its keys marked, where otherwise they
// would wait for the flushers' stranded sweep (FlusherConfig.StrandAfter).
// The caller waits while ctx lasts: once ctx has ended, markCommitted
// returns its cause, whether the mark is done or goes on in the
// background.
func (c *Coalescer) markCommitted(ctx context.Context, mark func(context.Context) error) error {
	errc := make(chan error, 1)
	detach.Run(ctx, markTimeout, func(ctx context.Context) {
		errc <- dialect.Retry(ctx, c.cfg.Retry, "coalesce mark dirty", func() error { return mark(ctx) })
	})
	if ctx.Err() != nil {
		return context.Cause(ctx) // whether the mark is done or goes on
	}
	return <-errc
}

// AcceptTx records ch in the caller's transaction tx, opened on the
// coalescer's database, so that it is accepted only if tx commits: with
// the caller's own writes or not at all. It returns what [Coalescer.Accept]
// returns, but neither retries nor commits: an error (a deadlock
// included) aborts tx, which the caller rolls back and may run again.
//
// Unlike Accept it writes the key's row in tx (bumping its version), and
// that row stays locked until tx ends: a change that is not committed yet
// cannot be seen by a flush, so the mark must commit with it. Prefer
// Accept for hot keys. Backpressure applies as in Accept.
func (c *Coalescer) AcceptTx(ctx context.Context, tx *sql.Tx, ch Change) (r Receipt, err error) {
	start := time.Now()
	defer func() { c.observeAccept(ctx, start, ch.Key, r, true, err) }()
	return c.acceptTx(ctx, tx, ch)
}

func (c *Coalescer) acceptTx(ctx context.Context, tx *sql.Tx, ch Change) (Receipt, error) {
	if tx == nil {
		return Receipt{}, invalid("tx", "is nil")
	}
	if err := check(ch); err != nil {
		return Receipt{}, err
	}
	if err := c.pressure(ctx); err != nil {
		return Receipt{}, err
	}
	r, _, err := c.record(ctx, tx, ch)
	if err != nil {
		return Receipt{}, c.wrap("accept", err)
	}
	if r.Duplicate {
		return r, nil // the first acceptance marked the key in its transaction
	}
	for range 100 {
		n, err := execN(ctx, tx, c.sq.bumpInTx, ch.Key)
		if err != nil || n == 1 {
			if err == nil {
				c.Wake()
			}
			return r, c.wrap("accept: mark dirty", err)
		}
		if n, err = execN(ctx, tx, c.sq.insertKey, ch.Key); err != nil || n == 1 {
			if err == nil {
				c.Wake()
			}
			return r, c.wrap("accept: mark dirty", err)
		}
	}
	return Receipt{}, fmt.Errorf("coalesce: accept: key %q: its row kept appearing and disappearing", ch.Key)
}

// record writes ch in tx: the event id's receipt if it exists (undo: the
// caller should roll back whatever tx did), else the source's sequence
// check and the change's row.
//
// A change without a Source is inserted at once: the insert itself finds
// a recorded event id (it writes nothing then, and the receipt is read),
// so a new change costs one statement, not a lookup first. A change with
// a Source is looked up first, so that a resend is answered with its
// receipt rather than judged stale by the sequence it moved.
func (c *Coalescer) record(ctx context.Context, tx *sql.Tx, ch Change) (r Receipt, undo bool, err error) {
	if ch.Source != "" {
		if r, ok, err := c.findEvent(ctx, tx, ch.EventID); err != nil || ok {
			return r, true, err
		}
		if r, ok, err := c.checkSource(ctx, tx, ch); err != nil || ok {
			return r, true, err
		}
	}
	r = Receipt{Key: ch.Key, EventID: ch.EventID, Source: ch.Source, Seq: ch.Seq}
	args := []any{ch.Key, ch.EventID, ch.Source, ch.Seq, ch.Payload}
	var inserted bool
	if c.e == engPostgres {
		err = tx.QueryRowContext(ctx, c.sq.insertChange+" RETURNING id", args...).Scan(&r.ID)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil
		} else {
			inserted = err == nil
		}
	} else {
		var res sql.Result
		if res, err = tx.ExecContext(ctx, c.sq.insertChange, args...); err == nil {
			var n int64
			if n, err = res.RowsAffected(); err == nil && n == 1 {
				inserted = true
				r.ID, err = res.LastInsertId()
			}
		}
	}
	if err != nil || inserted {
		return r, false, err
	}
	// A change with this event id was recorded (since our first look, if
	// there was one).
	r, ok, err := c.findEvent(ctx, tx, ch.EventID)
	if err == nil && !ok {
		err = fmt.Errorf("event %q: neither inserted nor found", ch.EventID)
	}
	return r, true, err
}

// findEvent returns the receipt of the change with event id, if any.
func (c *Coalescer) findEvent(ctx context.Context, tx *sql.Tx, id string) (Receipt, bool, error) {
	r := Receipt{EventID: id, Duplicate: true}
	err := tx.QueryRowContext(ctx, c.sq.findEvent, id).Scan(&r.ID, &r.Key, &r.Source, &r.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return Receipt{}, false, nil
	}
	return r, err == nil, err
}

// checkSource moves the source's last sequence to ch.Seq if it is below,
// in tx (the source's row stays locked until tx ends, so one source's
// changes of a key are accepted one at a time, in sequence order). It
// returns a duplicate's receipt (ok) or a *StaleError.
func (c *Coalescer) checkSource(ctx context.Context, tx *sql.Tx, ch Change) (Receipt, bool, error) {
	for range 100 {
		n, err := execN(ctx, tx, c.sq.bumpSource, ch.Seq, ch.Key, ch.Source, ch.Seq)
		if err != nil || n == 1 {
			return Receipt{}, false, err
		}
		if n, err = execN(ctx, tx, c.sq.insertSource, ch.Key, ch.Source, ch.Seq); err != nil || n == 1 {
			return Receipt{}, false, err
		}
		// The row exists with a sequence at or above ours: a resent change
		// that committed meanwhile, or a stale one.
		if r, ok, err := c.findEvent(ctx, tx, ch.EventID); err != nil || ok {
			return r, ok, err
		}
		var cur int64
		err = tx.QueryRowContext(ctx, c.sq.readSource, ch.Key, ch.Source).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			continue // deleted meanwhile: try again
		}
		if err != nil {
			return Receipt{}, false, err
		}
		if cur >= ch.Seq {
			return Receipt{}, false, &StaleError{Key: ch.Key, Source: ch.Source, Seq: ch.Seq, Current: cur}
		}
	}
	return Receipt{}, false, fmt.Errorf("key %q source %q: the source's row kept changing", ch.Key, ch.Source)
}

// markDirty makes sure that a flush starting after this call returns folds
// every change of key committed before the call began, without writing the
// key's row when a flush is sure to come anyway. It reads the row without
// locking and writes with a compare-and-set on what it read:
//
//   - missing: insert it pending.
//   - PENDING: nothing to write. The row is claimed later, and the claim
//     commits before the flush reads changes, so the flush sees ours (it
//     committed before this read).
//   - DONE: set PENDING and bump the version.
//   - PROCESSING, version > flush_version: nothing to write. The flusher
//     set flush_version to the row's version, and committed that, before
//     reading any change. If we read after that commit, a writer bumped the
//     version since the claim, so the flush's version-conditioned ack puts
//     the row back to pending, and that ack comes after our read. If we
//     read before it (a flush_version left by an earlier flush), the
//     flusher reads changes after our read, so it folds ours.
//   - PROCESSING otherwise: bump the version only (the row stays with its
//     flusher), so that its ack requeues the row.
//   - FAILED (parked): nothing to write; the change waits for an operator
//     to unpark the key (the Unpark of [Flusher.Claimer]).
//
// If the compare-and-set matches no row, the row changed after our read:
// if its version moved, another writer bumped it after our change
// committed, which forces a later flush just the same; otherwise a claim
// or an ack moved the status: decide again.
func (c *Coalescer) markDirty(ctx context.Context, key string) error {
	var (
		st           string
		ver, flushed int64
	)
	read := func() (bool, error) {
		err := c.db.QueryRowContext(ctx, c.sq.readKey, key).Scan(&st, &ver, &flushed)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	found, err := read()
	if err != nil {
		return err
	}
	if c.markRead != nil {
		c.markRead(key)
	}
	for range 1000 {
		var q string
		args := []any{key, ver}
		switch {
		case !found:
			q, args = c.sq.insertKey, []any{key}
		case st == statusPending, st == statusFailed:
			return nil
		case st == statusDone:
			q = c.sq.bumpDone
		case st == statusProcessing && ver > flushed:
			return nil
		case st == statusProcessing:
			q = c.sq.bumpProcessing
		default:
			return fmt.Errorf("key %q: unexpected status %q", key, st)
		}
		n, err := execN(ctx, c.db, q, args...)
		if err != nil {
			return err
		}
		if n == 1 {
			if q != c.sq.bumpProcessing {
				c.Wake()
				c.notify(ctx)
			}
			return nil
		}
		wasFound, old := found, ver
		if found, err = read(); err != nil {
			return err
		}
		if wasFound && found && ver != old {
			return nil
		}
	}
	return fmt.Errorf("key %q: its row kept changing", key)
}

// notify sends Config.Notify's notification, after a mark that made a key
// dirty committed. One that fails is logged, not returned: the key is
// dirty already, and the other processes' flushers find it by polling.
func (c *Coalescer) notify(ctx context.Context) {
	if c.notifier == nil {
		return
	}
	if err := c.notifier.NotifyPending(ctx); err != nil && ctx.Err() == nil {
		c.cfg.Logger.Warn("coalesce: could not notify other processes of a dirty key; their flushers will find it by polling", "err", err)
	}
}

// Wake tells this process's idle flushers that a key may be dirty. Accept
// calls it; call it after making keys dirty by other means.
func (c *Coalescer) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Versions returns key's accepted version (the highest sequence accepted
// for it, from any source) and its persisted version (the highest sequence
// folded into its state), both zero for a key never seen. When one source
// writes a key, its changes are accepted in sequence order and a flush
// folds every change committed before it, so persisted >= s means that
// every change of sequence s or below is in the state (read-your-writes).
// Changes without a Source do not count.
func (c *Coalescer) Versions(ctx context.Context, key string) (accepted, persisted int64, err error) {
	err = c.db.QueryRowContext(ctx, c.sq.versions, key, key).Scan(&accepted, &persisted)
	return accepted, persisted, c.wrap("versions", err)
}

// Backlog returns the number of dirty keys (pending or being flushed) and
// the age of the oldest unfolded change on the database clock, leaving out
// the changes of parked keys (they wait for an operator; the keys table's
// claimer lists them: [Flusher.Claimer]).
func (c *Coalescer) Backlog(ctx context.Context) (dirty int64, oldest time.Duration, err error) {
	if err := c.db.QueryRowContext(ctx, c.sq.backlog).Scan(&dirty); err != nil {
		return 0, 0, c.wrap("backlog", err)
	}
	var ms int64
	if err := c.db.QueryRowContext(ctx, c.sq.oldest).Scan(&ms); err != nil {
		return 0, 0, c.wrap("backlog", err)
	}
	return dirty, time.Duration(max(ms, 0)) * time.Millisecond, nil
}

// pressure refuses when a configured limit is exceeded, measuring at most
// once per PressureInterval.
func (c *Coalescer) pressure(ctx context.Context) error {
	if c.cfg.MaxBacklog == 0 && c.cfg.MaxAge == 0 {
		return nil
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.pAt.IsZero() || time.Since(c.pAt) >= c.cfg.PressureInterval {
		dirty, oldest, err := c.Backlog(ctx)
		if err != nil {
			return err
		}
		c.pAt, c.pBacklog, c.pOldest = time.Now(), dirty, oldest
	}
	if c.cfg.MaxBacklog > 0 && c.pBacklog > c.cfg.MaxBacklog || c.cfg.MaxAge > 0 && c.pOldest > c.cfg.MaxAge {
		e := &OverloadError{RetryAfter: c.cfg.RetryAfter}
		if c.cfg.MaxBacklog > 0 {
			e.Backlog = c.pBacklog
		}
		if c.cfg.MaxAge > 0 {
			e.OldestAge = c.pOldest
		}
		return e
	}
	return nil
}

// wrap prefixes err with the package and operation, leaving the typed
// errors of this package as they are.
func (c *Coalescer) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var stale *StaleError
	var over *OverloadError
	if errors.As(err, &stale) || errors.As(err, &over) {
		return err
	}
	return fmt.Errorf("coalesce: %s: %w", op, err)
}

// execer is a *sql.DB or *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// execN runs q and returns its affected rows.
func execN(ctx context.Context, db execer, q string, args ...any) (int64, error) {
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

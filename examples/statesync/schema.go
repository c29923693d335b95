package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/examples/internal/exdb"
	"github.com/claimlock/claimlock/observe"
)

// The program's tables.
//
//	ss_events(event_id PK, user_id, seq, delta, flush)   the intake: one row per accepted event
//	ss_dirty(user_id PK, status, token, claimed_at, version, flush_version)  the claim table: one row per user
//	ss_state(user_id PK, total, last_seq, writes)        the state the story is about
//
// flush is NULL until a state write has folded the event; it then holds the
// token of that write (the whole flush is one transaction, so an event is
// folded exactly once). writes counts the state row's writes. flush_version
// is the version a flush started from (see app.markDirty).
const (
	eventsTable = "ss_events"
	dirtyTable  = "ss_dirty"
	stateTable  = "ss_state"

	statusPending    = "PENDING"
	statusProcessing = "PROCESSING"
	statusClean      = "CLEAN"

	// directFlush marks events that naive mode applied in the same
	// transaction that recorded them.
	directFlush = "direct"
)

type app struct {
	o       options
	db      *exdb.DB
	sq      statements
	claims  claim.Config
	claimer *claim.Claimer[struct{}]

	requeues, emptyFlushes, retries atomic.Int64
	dirtyWrites, dirtyConflicts     atomic.Int64

	// Persistence latency, set up by simulate: start is the run's start,
	// sent[id] the time (since start, plus 1 ns) event id was first sent,
	// persisted the time from that until its delta was in the state row
	// (committed).
	start       time.Time
	sent        []atomic.Int64
	persistedMu sync.Mutex
	persisted   []time.Duration
}

// markSent records that event id is being sent (its first send only).
func (a *app) markSent(id int64) {
	if a.sent != nil {
		a.sent[id].CompareAndSwap(0, int64(time.Since(a.start))+1)
	}
}

// markPersisted records that the events ids are in the state rows now.
func (a *app) markPersisted(ids []int64) {
	if a.sent == nil {
		return
	}
	now := time.Since(a.start)
	lat := make([]time.Duration, 0, len(ids))
	for _, id := range ids {
		if t := a.sent[id].Load(); t > 0 {
			lat = append(lat, now-time.Duration(t-1))
		}
	}
	a.persistedMu.Lock()
	a.persisted = append(a.persisted, lat...)
	a.persistedMu.Unlock()
}

func open(ctx context.Context, o options) (*app, error) {
	db, err := exdb.Open(ctx, o.driver, o.dsn, o.keepData)
	if err != nil {
		return nil, err
	}
	a := &app{o: o, db: db}
	a.sq = newStatements(db)
	a.claims = claim.Config{
		ClaimTable: dialect.ClaimTable{
			Table: dirtyTable, ID: "user_id", Status: "status", Token: "token",
			ClaimedAt: "claimed_at", Version: "version",
			Pending:    dialect.StatusString(statusPending),
			Processing: dialect.StatusString(statusProcessing),
			Done:       dialect.StatusString(statusClean),
		},
		BatchSize: o.batch,
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Observer:  observe.Func(func(_ context.Context, e observe.Event) { a.requeues.Add(int64(e.Requeued)) }),
	}
	if o.ack == "blind" {
		// Without a version column the ack marks a row clean whatever
		// happened during the flush: the bug -ack blind demonstrates.
		a.claims.Version = ""
	}
	a.claimer, err = claim.New[struct{}](db.Dialect, a.claims, nil)
	if err != nil {
		db.Close()
		return nil, err
	}
	return a, nil
}

func (a *app) close() { a.db.Close() }

// tableDefs are the program's tables, as its own migration would create
// them with plain SQL (exdb renders the types per driver).
func tableDefs() []exdb.Table {
	return []exdb.Table{
		{Name: eventsTable, PrimaryKey: []string{"event_id"}, Columns: []exdb.Column{
			{Name: "event_id", Kind: exdb.Int, NotNull: true},
			{Name: "user_id", Kind: exdb.Int, NotNull: true},
			{Name: "seq", Kind: exdb.Int, NotNull: true},
			{Name: "delta", Kind: exdb.Int, NotNull: true},
			{Name: "flush", Kind: exdb.Text, Len: tokenLen},
		}, Indexes: [][]string{
			// The flusher marks a user's unapplied events (user_id, flush IS
			// NULL), then reads them back by flush token.
			{"ss_events_user_flush", "user_id", "flush"},
			{"ss_events_flush", "flush"},
		}},
		// The claim table: its key is the user id, not a serial.
		{Name: dirtyTable, PrimaryKey: []string{"user_id"}, Columns: []exdb.Column{
			{Name: "user_id", Kind: exdb.Int, NotNull: true},
			{Name: "status", Kind: exdb.Text, Len: 32, NotNull: true, Default: "'" + statusClean + "'"},
			{Name: "token", Kind: exdb.Text, Len: tokenLen},
			{Name: "claimed_at", Kind: exdb.Time},
			{Name: "version", Kind: exdb.Int, NotNull: true, Default: "0"},
			{Name: "flush_version", Kind: exdb.Int, NotNull: true, Default: "0"},
		}},
		{Name: stateTable, PrimaryKey: []string{"user_id"}, Columns: []exdb.Column{
			{Name: "user_id", Kind: exdb.Int, NotNull: true},
			{Name: "total", Kind: exdb.Int, NotNull: true, Default: "0"},
			{Name: "last_seq", Kind: exdb.Int, NotNull: true, Default: "0"},
			{Name: "writes", Kind: exdb.Int, NotNull: true, Default: "0"},
		}},
	}
}

// tokenLen is the width of the token columns: claimlock's tokens and the
// flush tokens of newToken fit.
const tokenLen = 40

// newToken returns a fresh flush token: 32 random hex digits.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// backoff is the jittered, capped, doubling pause before attempt+1:
// uniformly in [d/2, d] for d = base·2^attempt, at most max.
func backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return d/2 + time.Duration(mrand.Int64N(int64(d/2)+1))
}

// setup creates the tables and the claim table's recommended indexes, empties
// them (they belong to this program) and seeds one clean dirty row and one
// zero state row per user.
func (a *app) setup(ctx context.Context) error {
	for _, def := range tableDefs() {
		if err := a.db.CreateTable(ctx, def); err != nil {
			return err
		}
	}
	missing, err := a.claimer.MissingIndexes(ctx)
	if err != nil {
		return err
	}
	for _, q := range missing {
		if _, err := a.db.SQL.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	tx, err := a.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range a.sq.empty {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	for u := 1; u <= a.o.users; u++ {
		if _, err := tx.ExecContext(ctx, a.sq.seedDirty, u, statusClean); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, a.sq.seedState, u); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// statements are the program's own SQL, built once from quoted identifiers
// and the driver's placeholders. Values always travel as arguments.
type statements struct {
	empty                []string
	seedDirty, seedState string

	// insertEvent records an event unless its id exists (0 rows affected).
	insertEvent string
	// addToState is naive mode's per-event state write.
	addToState string

	// readDirty, bumpClean and bumpProcessing mark a user dirty.
	readDirty, bumpClean, bumpProcessing string

	// startFlush, foldEvents and writeState are one flush (with
	// app.markEvents, whose list of users varies).
	startFlush, foldEvents, writeState string

	// verification
	eventsPerUser, statePerUser, unapplied string
}

func newStatements(db *exdb.DB) statements {
	q, p := db.Q, db.Ph
	ev, dirty, state := q(eventsTable), q(dirtyTable), q(stateTable)
	uid, flush, version, st := q("user_id"), q("flush"), q("version"), q("status")
	var s statements
	s.empty = []string{"DELETE FROM " + ev, "DELETE FROM " + dirty, "DELETE FROM " + state}
	s.seedDirty = fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s, %s, 0)", dirty, uid, st, version, p(1), p(2))
	s.seedState = fmt.Sprintf("INSERT INTO %s (%s, %s, %s, %s) VALUES (%s, 0, 0, 0)", state, uid, q("total"), q("last_seq"), q("writes"), p(1))

	// Insert-or-ignore, keyed by the event id. MySQL's INSERT IGNORE reports
	// 0 affected rows for a duplicate whatever clientFoundRows says (ON
	// DUPLICATE KEY UPDATE would report 1 with it).
	cols := fmt.Sprintf("%s (%s, %s, %s, %s, %s) VALUES (%s, %s, %s, %s, %s)",
		ev, q("event_id"), uid, q("seq"), q("delta"), flush, p(1), p(2), p(3), p(4), p(5))
	greatest := "GREATEST"
	switch db.Driver {
	case "mysql":
		s.insertEvent = "INSERT IGNORE INTO " + cols
	default: // sqlite and postgres
		s.insertEvent = "INSERT INTO " + cols + " ON CONFLICT DO NOTHING"
	}
	if db.Driver == "sqlite" {
		greatest = "MAX" // SQLite's two-argument MAX is a scalar
	}
	// Add a fold to the state row. last_seq only moves forward: events of
	// one user are accepted concurrently, so they commit out of seq order.
	s.writeState = fmt.Sprintf("UPDATE %[1]s SET %[2]s = %[2]s + %[5]s, %[3]s = %[6]s(%[3]s, %[7]s), %[4]s = %[4]s + 1 WHERE %[8]s = %[9]s",
		state, q("total"), q("last_seq"), q("writes"), p(1), greatest, p(2), uid, p(3))
	s.addToState = s.writeState

	s.readDirty = fmt.Sprintf("SELECT %s, %s, %s FROM %s WHERE %s = %s", st, version, q("flush_version"), dirty, uid, p(1))
	s.bumpClean = fmt.Sprintf("UPDATE %[1]s SET %[2]s = %[4]s, %[3]s = %[3]s + 1 WHERE %[5]s = %[6]s AND %[2]s = %[7]s AND %[3]s = %[8]s",
		dirty, st, version, p(1), uid, p(2), p(3), p(4))
	s.bumpProcessing = fmt.Sprintf("UPDATE %[1]s SET %[3]s = %[3]s + 1 WHERE %[4]s = %[5]s AND %[2]s = %[6]s AND %[3]s = %[7]s",
		dirty, st, version, uid, p(1), p(2), p(3))

	s.startFlush = fmt.Sprintf("UPDATE %[1]s SET %[2]s = %[3]s WHERE %[4]s = %[5]s", dirty, q("flush_version"), version, q("token"), p(1))
	s.foldEvents = fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s WHERE %s = %s ORDER BY %s",
		uid, q("event_id"), q("delta"), q("seq"), ev, flush, p(1), uid)

	s.eventsPerUser = fmt.Sprintf("SELECT %[1]s, COUNT(*), COALESCE(SUM(%[2]s), 0), COALESCE(MAX(%[3]s), 0) FROM %[4]s GROUP BY %[1]s",
		uid, q("delta"), q("seq"), ev)
	s.statePerUser = fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s", uid, q("total"), q("last_seq"), q("writes"), state)
	s.unapplied = fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s IS NULL", ev, flush)
	return s
}

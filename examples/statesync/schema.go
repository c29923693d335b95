package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/examples/internal/exdb"
	"github.com/claimlock/claimlock/internal/store"
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
		Observer:  claim.ObserverFunc(func(_ context.Context, e claim.Event) { a.requeues.Add(int64(e.Requeued)) }),
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

func status(v any) *dialect.Status {
	s, err := store.StatusOf("default", v)
	if err != nil {
		panic(err)
	}
	return &s
}

func tableDefs() []store.TableDef {
	return []store.TableDef{
		{Table: eventsTable, PrimaryKey: []string{"event_id"}, Columns: []store.ColumnDef{
			{Name: "event_id", Type: store.TypeInt, NotNull: true},
			{Name: "user_id", Type: store.TypeInt, NotNull: true},
			{Name: "seq", Type: store.TypeInt, NotNull: true},
			{Name: "delta", Type: store.TypeInt, NotNull: true},
			{Name: "flush", Type: store.TypeText, Len: store.MaxTokenLen},
		}, Indexes: []store.IndexDef{
			// The flusher marks a user's unapplied events (user_id, flush IS
			// NULL), then reads them back by flush token.
			{Name: "ss_events_user_flush", Columns: []string{"user_id", "flush"}},
			{Name: "ss_events_flush", Columns: []string{"flush"}},
		}},
		// The claim table, written by hand rather than with
		// store.ClaimTableDef because its key is the user id, not a serial.
		{Table: dirtyTable, PrimaryKey: []string{"user_id"}, Columns: []store.ColumnDef{
			{Name: "user_id", Type: store.TypeInt, NotNull: true},
			{Name: "status", Type: store.TypeText, Len: 32, NotNull: true, Default: status(statusClean)},
			{Name: "token", Type: store.TypeText, Len: store.MaxTokenLen},
			{Name: "claimed_at", Type: store.TypeTime},
			{Name: "version", Type: store.TypeInt, NotNull: true, Default: status(0)},
			{Name: "flush_version", Type: store.TypeInt, NotNull: true, Default: status(0)},
		}},
		{Table: stateTable, PrimaryKey: []string{"user_id"}, Columns: []store.ColumnDef{
			{Name: "user_id", Type: store.TypeInt, NotNull: true},
			{Name: "total", Type: store.TypeInt, NotNull: true, Default: status(0)},
			{Name: "last_seq", Type: store.TypeInt, NotNull: true, Default: status(0)},
			{Name: "writes", Type: store.TypeInt, NotNull: true, Default: status(0)},
		}},
	}
}

// setup creates the tables and the claim table's recommended indexes, empties
// them (they belong to this program) and seeds one clean dirty row and one
// zero state row per user.
func (a *app) setup(ctx context.Context) error {
	d := a.db.Dialect
	for _, def := range tableDefs() {
		ddl, err := store.CreateTableDDL(d, def)
		if err != nil {
			return err
		}
		if err := store.ExecDDL(ctx, d, ddl); err != nil {
			return err
		}
	}
	missing, err := a.claimer.MissingIndexes(ctx)
	if err != nil {
		return err
	}
	if err := store.ExecDDL(ctx, d, missing); err != nil {
		return err
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

	// startFlush, markEvents, foldEvents and writeState are one flush.
	startFlush, markEvents, foldEvents, writeState string

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
	s.markEvents = fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s = %s AND %s IS NULL", ev, flush, p(1), uid, p(2), flush)
	s.foldEvents = fmt.Sprintf("SELECT COUNT(*), COALESCE(SUM(%[1]s), 0), COALESCE(MAX(%[2]s), 0) FROM %[3]s WHERE %[4]s = %[5]s",
		q("delta"), q("seq"), ev, flush, p(1))

	s.eventsPerUser = fmt.Sprintf("SELECT %[1]s, COUNT(*), COALESCE(SUM(%[2]s), 0), COALESCE(MAX(%[3]s), 0) FROM %[4]s GROUP BY %[1]s",
		uid, q("delta"), q("seq"), ev)
	s.statePerUser = fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s", uid, q("total"), q("last_seq"), q("writes"), state)
	s.unapplied = fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s IS NULL", ev, flush)
	return s
}

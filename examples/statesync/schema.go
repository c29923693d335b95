package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/examples/internal/exdb"
	"github.com/claimlock/claimlock/observe"
)

// The program's tables.
//
//	ss_state(state_key PK, total, writes)           the state the story is about
//	ss_events(event_id PK, state_key, seq, delta)   naive mode's record of the events it applied
//	ss_changes, ss_keys, ss_sources                 package coalesce's tables (coalesce and queued modes, -http)
//
// writes counts the state row's writes.
const (
	stateTable   = "ss_state"
	eventsTable  = "ss_events"
	changesTable = "ss_changes"
	keysTable    = "ss_keys"
	sourcesTable = "ss_sources"
)

// keyLen is the width of the key and event id columns: what package
// coalesce accepts.
const keyLen = coalesce.MaxKeyLen

type app struct {
	o       options
	db      *exdb.DB
	sq      statements
	co      *coalesce.Coalescer
	flusher *coalesce.Flusher

	requeues, retries atomic.Int64
	// log receives the HTTP handlers' server errors (nil: discarded).
	log io.Writer

	// Persistence latency, set up by simulate: start is the run's start,
	// sent[id] the time (since start, plus 1 ns) event id was first sent,
	// persisted the time from that until its delta was in the state row
	// (committed). folding holds the events of each key's fold until the
	// fold's event (coalesce.OpFold) reports it committed.
	start       time.Time
	sent        []atomic.Int64
	persistedMu sync.Mutex
	persisted   []time.Duration
	folding     map[string][]int64
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
		if id > 0 && id < int64(len(a.sent)) {
			if t := a.sent[id].Load(); t > 0 {
				lat = append(lat, now-time.Duration(t-1))
			}
		}
	}
	a.persistedMu.Lock()
	a.persisted = append(a.persisted, lat...)
	a.persistedMu.Unlock()
}

// observe counts the requeued keys and, when a fold committed, the
// persistence latency of its events.
func (a *app) observe(_ context.Context, e observe.Event) {
	if e.Op != coalesce.OpFold {
		return
	}
	a.requeues.Add(int64(e.Requeued))
	key, _ := e.Key.(string)
	a.persistedMu.Lock()
	ids := a.folding[key]
	delete(a.folding, key)
	a.persistedMu.Unlock()
	if e.Err == nil {
		a.markPersisted(ids)
	}
}

func open(ctx context.Context, o options) (*app, error) {
	db, err := exdb.Open(ctx, o.driver, o.dsn, o.keepData)
	if err != nil {
		return nil, err
	}
	a := &app{o: o, db: db, sq: newStatements(db), folding: map[string][]int64{}}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a.co, err = coalesce.New(db.Dialect, db.SQL, coalesce.Config{
		ChangesTable: changesTable, KeysTable: keysTable, SourcesTable: sourcesTable,
		MaxBacklog: o.maxBacklog, MaxAge: o.maxAge, PressureInterval: o.pressureInterval, Group: o.group, GroupInFlight: o.groupInFlight,
		Logger: logger, Observer: observe.Func(a.observe),
	})
	if err == nil {
		a.flusher, err = a.co.Flusher(coalesce.FlusherConfig{
			Fold: a.fold, BatchSize: o.batch, KeysPerTx: o.keysPerTx, Linger: o.linger, PollMin: time.Millisecond, PollMax: 50 * time.Millisecond,
		})
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return a, nil
}

func (a *app) close() { a.db.Close() }

func (a *app) logf(format string, args ...any) {
	if a.log != nil {
		fmt.Fprintf(a.log, "statesync: "+format+"\n", args...)
	}
}

// tableDefs are the program's own tables, as its own migration would create
// them with plain SQL (exdb renders the types per driver).
func tableDefs() []exdb.Table {
	return []exdb.Table{
		{Name: stateTable, PrimaryKey: []string{"state_key"}, Columns: []exdb.Column{
			{Name: "state_key", Kind: exdb.Text, Len: keyLen, NotNull: true},
			{Name: "total", Kind: exdb.Int, NotNull: true, Default: "0"},
			{Name: "writes", Kind: exdb.Int, NotNull: true, Default: "0"},
		}},
		{Name: eventsTable, PrimaryKey: []string{"event_id"}, Columns: []exdb.Column{
			{Name: "event_id", Kind: exdb.Text, Len: keyLen, NotNull: true},
			{Name: "state_key", Kind: exdb.Text, Len: keyLen, NotNull: true},
			{Name: "seq", Kind: exdb.Int, NotNull: true},
			{Name: "delta", Kind: exdb.Int, NotNull: true},
		}},
	}
}

// createTables creates the program's tables and the coalescer's, unless
// they exist.
func (a *app) createTables(ctx context.Context) error {
	for _, def := range tableDefs() {
		if err := a.db.CreateTable(ctx, def); err != nil {
			return err
		}
	}
	return coalesce.CreateTables(ctx, a.db.Dialect, a.db.SQL, coalesce.Config{
		ChangesTable: changesTable, KeysTable: keysTable, SourcesTable: sourcesTable,
	})
}

// setup creates the tables, empties them (they belong to this program) and
// seeds a zero state row for each user the workload sends events for (naive
// mode updates it; the fold would create it).
func (a *app) setup(ctx context.Context) error {
	if err := a.createTables(ctx); err != nil {
		return err
	}
	for _, q := range a.sq.empty {
		if _, err := a.db.SQL.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	tx, err := a.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	seeded := map[int64]bool{}
	for _, e := range generate(a.o) {
		if !seeded[e.User] {
			seeded[e.User] = true
			if _, err := tx.ExecContext(ctx, a.sq.insertState, userKey(e.User), 0, 0); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// userKey is the state key of a user of the workload.
func userKey(u int64) string { return strconv.FormatInt(u, 10) }

// eventID is the event id of the workload's event id, and eventNum its
// inverse (0 for an id of no workload, as those posted over HTTP).
func eventID(id int64) string { return "e" + strconv.FormatInt(id, 10) }

func eventNum(id string) int64 {
	n, err := strconv.ParseInt(strings.TrimPrefix(id, "e"), 10, 64)
	if err != nil || !strings.HasPrefix(id, "e") {
		return 0
	}
	return n
}

// statements are the program's own SQL, built once from quoted identifiers
// and the driver's placeholders. Values always travel as arguments.
type statements struct {
	empty []string
	// insertState creates a state row (key, total, writes);
	// addToState adds a delta to one (delta, key) and counts a write.
	insertState, addToState string
	// insertEvent records an event of naive mode unless its id exists (0
	// rows affected).
	insertEvent string
	// readState reads one state row; statePerKey, eventsPerKey and changes
	// are the verification's.
	readState, statePerKey, eventsPerKey, changes string
}

func newStatements(db *exdb.DB) statements {
	q, p := db.Q, db.Ph
	state, ev, key := q(stateTable), q(eventsTable), q("state_key")
	var s statements
	// Emptied by TRUNCATE on MySQL: a DELETE leaves the rows' index
	// entries delete-marked until InnoDB's purge removes them, and the
	// next run's inserts of the same event ids then take shared locks on
	// them as duplicates, which block other writers' inserts (lock waits
	// of the program's own making, not of the schemes it compares).
	empty := "DELETE FROM "
	if db.Driver == "mysql" {
		empty = "TRUNCATE TABLE "
	}
	for _, t := range []string{state, ev, q(changesTable), q(keysTable), q(sourcesTable)} {
		s.empty = append(s.empty, empty+t)
	}
	s.insertState = fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s, %s, %s)", state, key, q("total"), q("writes"), p(1), p(2), p(3))
	s.addToState = fmt.Sprintf("UPDATE %[1]s SET %[2]s = %[2]s + %[4]s, %[3]s = %[3]s + 1 WHERE %[5]s = %[6]s",
		state, q("total"), q("writes"), p(1), key, p(2))

	// Insert-or-ignore, keyed by the event id. MySQL's INSERT IGNORE reports
	// 0 affected rows for a duplicate whatever clientFoundRows says.
	cols := fmt.Sprintf("%s (%s, %s, %s, %s) VALUES (%s, %s, %s, %s)",
		ev, q("event_id"), key, q("seq"), q("delta"), p(1), p(2), p(3), p(4))
	if db.Driver == "mysql" {
		s.insertEvent = "INSERT IGNORE INTO " + cols
	} else {
		s.insertEvent = "INSERT INTO " + cols + " ON CONFLICT DO NOTHING"
	}

	s.readState = fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s = %s", q("total"), q("writes"), state, key, p(1))
	s.statePerKey = fmt.Sprintf("SELECT %s, %s, %s FROM %s", key, q("total"), q("writes"), state)
	s.eventsPerKey = fmt.Sprintf("SELECT %[1]s, COUNT(*), COALESCE(SUM(%[2]s), 0) FROM %[3]s GROUP BY %[1]s", key, q("delta"), ev)
	// The coalescer's column names are fixed (see package coalesce).
	s.changes = fmt.Sprintf("SELECT %s, %s, %s, %s IS NULL FROM %s", q("change_key"), q("event_id"), q("payload"), q("folded_at"), q(changesTable))
	return s
}

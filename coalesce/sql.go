package coalesce

import (
	"fmt"
	"strings"

	"github.com/claimlock/claimlock/dialect"
)

// engine is the little the coalescer's own statements need to know about
// the server: its family, how it quotes names, its placeholders and its
// clock in milliseconds.
type engine int

const (
	engMySQL engine = iota
	engPostgres
	engSQLite
)

func engineOf(d dialect.Dialect) (engine, error) {
	if d == nil {
		return 0, invalid("Dialect", "is nil")
	}
	switch e := d.Capabilities().Engine; e {
	case dialect.EngineMySQL, dialect.EngineMariaDB, dialect.EngineTiDB:
		return engMySQL, nil
	case dialect.EnginePostgreSQL:
		return engPostgres, nil
	case dialect.EngineSQLite:
		return engSQLite, nil
	default:
		return 0, fmt.Errorf("coalesce: %w: engine %q", dialect.ErrNotSupported, e)
	}
}

// quote quotes a validated (schema-qualified) name.
func (e engine) quote(name string) string {
	q := `"`
	if e == engMySQL {
		q = "`"
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, ".")
}

// bind rewrites the ? placeholders of q to $1, $2, ... on PostgreSQL.
// The statements hold no ? inside literals.
func (e engine) bind(q string) string {
	if e != engPostgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// nowMillis is the database clock as integer milliseconds since the Unix
// epoch.
func (e engine) nowMillis() string {
	switch e {
	case engMySQL:
		return "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED)"
	case engPostgres:
		return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
	default:
		return "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
	}
}

// nowOnce is nowMillis as a scalar subquery, which the engine evaluates
// once per statement, so that a comparison with it can be an index
// condition.
func (e engine) nowOnce() string { return "(SELECT " + e.nowMillis() + ")" }

// nullFirst returns "col, " on PostgreSQL and "" elsewhere: the leading
// ORDER BY term of a statement that reads rows where col IS NULL through
// an index that holds col before the order's columns. PostgreSQL does not
// take IS NULL for an equality, so it follows the index's order only when
// the ORDER BY names col too; MariaDB does, and sorts when it is named.
func (e engine) nullFirst(col string) string {
	if e == engPostgres {
		return col + ", "
	}
	return ""
}

// insertIgnore is an INSERT that skips a row whose unique key exists,
// affecting no row then.
func (e engine) insertIgnore(rest string) string {
	if e == engMySQL {
		return "INSERT IGNORE INTO " + rest
	}
	return "INSERT INTO " + rest + " ON CONFLICT DO NOTHING"
}

// greatest is the two-argument maximum.
func (e engine) greatest() string {
	if e == engSQLite {
		return "MAX"
	}
	return "GREATEST"
}

// Status values of the keys table (the claim package's defaults).
const (
	statusPending    = "PENDING"
	statusProcessing = "PROCESSING"
	statusDone       = "DONE"
	statusFailed     = "FAILED"
)

// statements are the coalescer's own SQL, built once from quoted names.
// Values always travel as placeholders.
type statements struct {
	// intake
	findEvent, bumpSource, insertSource, readSource, insertChange string
	// the dirty mark
	readKey, insertKey, bumpDone, bumpProcessing, bumpInTx string
	// the flush
	startFlush, readChanges, bumpHeld, markFolded, persist string
	// reads
	versions, backlog, oldest, stranded string
	// retention
	prune string
}

func newStatements(e engine, cfg Config) statements {
	ch, keys, src := e.quote(cfg.ChangesTable), e.quote(cfg.KeysTable), e.quote(cfg.SourcesTable)
	now := e.nowMillis()
	var s statements
	b := e.bind
	s.findEvent = b("SELECT id, change_key, source, seq FROM " + ch + " WHERE event_id = ?")
	s.bumpSource = b("UPDATE " + src + " SET last_seq = ? WHERE change_key = ? AND source = ? AND last_seq < ?")
	s.insertSource = b(e.insertIgnore(src + " (change_key, source, last_seq) VALUES (?, ?, ?)"))
	s.readSource = b("SELECT last_seq FROM " + src + " WHERE change_key = ? AND source = ?")
	s.insertChange = b(e.insertIgnore(ch + " (change_key, event_id, source, seq, payload, accepted_at) VALUES (?, ?, ?, ?, ?, " + now + ")"))

	s.readKey = b("SELECT status, version, flush_version FROM " + keys + " WHERE change_key = ?")
	s.insertKey = b(e.insertIgnore(keys + " (change_key, status, version) VALUES (?, '" + statusPending + "', 1)"))
	// The compare-and-set compares the status and the version as one
	// value (the version of a row in that status), so that no plan finds
	// the row by its status: with statistics taken when no key was done,
	// PostgreSQL looked the key up through the reaper's status index and
	// read every done key. bumpDone's status condition is implied by its
	// version (only a bump moves a row out of done: the model checks it
	// as an equivalent mutant) and kept for rows changed by hand;
	// bumpProcessing's is not: without it a mark that read the row as
	// being flushed bumps the version of a row its flush has completed
	// meanwhile, and the change is never folded (TestMarkRacesFlushCompletion).
	s.bumpDone = b("UPDATE " + keys + " SET status = '" + statusPending + "', version = version + 1 WHERE change_key = ? AND CASE WHEN status = '" + statusDone + "' THEN version END = ?")
	s.bumpProcessing = b("UPDATE " + keys + " SET version = version + 1 WHERE change_key = ? AND CASE WHEN status = '" + statusProcessing + "' THEN version END = ?")
	s.bumpInTx = b("UPDATE " + keys + " SET version = version + 1, status = CASE WHEN status = '" + statusDone + "' THEN '" + statusPending + "' ELSE status END WHERE change_key = ?")

	// One batch's keys; on PostgreSQL locked in byte order first, as
	// bumpKeys does and for its reason (a batch's keys are what the marks
	// of processing keys write): read by the token, PostgreSQL locks them
	// in the table's order.
	s.startFlush = b("UPDATE " + keys + " SET flush_version = version WHERE token = ?")
	if e == engPostgres {
		s.startFlush = b("WITH locked AS MATERIALIZED (SELECT change_key FROM " + keys + " WHERE token = ? ORDER BY change_key COLLATE \"C\" FOR UPDATE)" +
			" UPDATE " + keys + " SET flush_version = version WHERE change_key = ANY(ARRAY(SELECT change_key FROM locked))")
	}
	// Ordered as the key index is (see nullFirst): by id alone,
	// PostgreSQL sorts all of a key's unfolded changes or, for a hot key,
	// walks the primary key past its folded ones.
	s.readChanges = b("SELECT id, event_id, source, seq, payload FROM " + ch + " WHERE change_key = ? AND folded_at IS NULL ORDER BY " + e.nullFirst("folded_at") + "id LIMIT ?")
	s.bumpHeld = b("UPDATE " + keys + " SET version = version + 1 WHERE change_key = ?")
	// By the listed ids. SQLite's planner, whose statistics count few
	// unfolded changes, took the unfolded index for the folded_at IS NULL
	// term and read every unfolded change of every key: the unary plus
	// keeps that term off every index.
	unfolded := "folded_at IS NULL"
	if e == engSQLite {
		unfolded = "+folded_at IS NULL"
	}
	s.markFolded = "UPDATE " + ch + " SET folded_at = " + now + " WHERE " + unfolded + " AND id IN "
	s.persist = b("UPDATE " + keys + " SET persisted = " + e.greatest() + "(persisted, ?), folded = folded + ? WHERE change_key = ?")

	s.versions = b("SELECT COALESCE((SELECT MAX(last_seq) FROM " + src + " WHERE change_key = ?), 0), COALESCE((SELECT persisted FROM " + keys + " WHERE change_key = ?), 0)")
	s.backlog = "SELECT COUNT(*) FROM " + keys + " WHERE status IN ('" + statusPending + "', '" + statusProcessing + "')"
	// Changes of parked keys wait for an operator, not for the flushers:
	// they do not count, or one poison key would refuse every change. The
	// first unfolded change in the unfolded index's order whose key is not
	// parked: it reads past the parked keys' changes only, where MIN()
	// beside the NOT EXISTS read every unfolded change.
	s.oldest = "SELECT COALESCE((SELECT " + now + " - c.accepted_at FROM " + ch + " c WHERE c.folded_at IS NULL" +
		" AND NOT EXISTS (SELECT 1 FROM " + keys + " k WHERE k.change_key = c.change_key AND k.status = '" + statusFailed + "')" +
		" ORDER BY " + e.nullFirst("c.folded_at") + "c.accepted_at LIMIT 1), 0)"
	// The keys of unfolded changes older than the first argument whose
	// key is done or missing, a row per change, oldest first, at most the
	// second argument (Unstrand counts the keys). The clock is read once
	// (nowOnce): PostgreSQL's clock_timestamp() is volatile, evaluated per
	// row and no index condition. Each change's key is looked up by its
	// primary key (a correlated subquery): joined, PostgreSQL hashed or
	// walked the whole keys table to meet a backlog of changes. Ordered as
	// the unfolded index is, or a generic plan may walk the whole key
	// index to find the unfolded changes.
	s.stranded = b("SELECT c.change_key FROM " + ch + " c WHERE c.folded_at IS NULL AND c.accepted_at < " + e.nowOnce() + " - ?" +
		" AND COALESCE((SELECT k.status FROM " + keys + " k WHERE k.change_key = c.change_key), '" + statusDone + "') = '" + statusDone + "'" +
		" ORDER BY " + e.nullFirst("c.folded_at") + "c.accepted_at LIMIT ?")
	// At most pruneBatch rows a statement, so that a prune never holds
	// many locks, the oldest first through the unfolded index (whose
	// order, with the primary key InnoDB and SQLite append to it, is
	// total: concurrent prunes lock in one order). MySQL has DELETE ...
	// ORDER BY ... LIMIT, the others take the ids first.
	order := " ORDER BY folded_at, accepted_at, id LIMIT " + fmt.Sprint(pruneBatch)
	if e == engMySQL {
		s.prune = "DELETE FROM " + ch + " WHERE folded_at < " + e.nowOnce() + " - ?" + order
	} else {
		s.prune = b("DELETE FROM " + ch + " WHERE id IN (SELECT id FROM " + ch + " WHERE folded_at < " + e.nowOnce() + " - ?" + order + ")")
	}
	return s
}

// in returns "(?, ?, ...)" with n placeholders numbered from first on
// PostgreSQL.
func (e engine) in(n, first int) string {
	var b strings.Builder
	b.WriteByte('(')
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		if e == engPostgres {
			fmt.Fprintf(&b, "$%d", first+i)
		} else {
			b.WriteByte('?')
		}
	}
	b.WriteByte(')')
	return b.String()
}

// pruneBatch is the most changes one prune statement deletes, so that a
// prune never holds many locks.
const pruneBatch = 1000

// unstrandKeys is the most keys one Unstrand call marks dirty.
const unstrandKeys = 1000

// batchSQL renders the statements of a batch ([Coalescer.AcceptBatch]),
// whose lists of values grow with the batch: each is its head, the
// repeated group of placeholders and its tail, built once from quoted
// names and joined for n groups.
type batchSQL struct {
	// findEvents reads the receipts of a list of event ids;
	// findEventsLocked reads the latest committed ones (a locking read on
	// MySQL, whose plain reads see the transaction's snapshot).
	findEvents, findEventsLocked batchStmt
	// insertChanges inserts changes, skipping recorded event ids,
	// returning the ids of those inserted (not on MySQL).
	insertChanges batchStmt
	// readSources reads and locks sources' rows; insertSources inserts
	// missing ones; setSources writes their sequences.
	readSources, insertSources, setSources batchStmt
	// The dirty marks of the batch's keys: readKeys reads their rows;
	// insertKeys inserts missing ones pending; bumpDoneKeys and
	// bumpProcessingKeys are bumpDone's and bumpProcessing's
	// compare-and-sets, a (key, version) group each.
	readKeys, insertKeys, bumpDoneKeys, bumpProcessingKeys batchStmt
}

// batchStmt is a statement with a list of n groups of placeholders.
type batchStmt struct{ head, group, sep, tail string }

// render returns the statement for n groups, its placeholders numbered
// on PostgreSQL.
func (s batchStmt) render(e engine, n int) string {
	var b strings.Builder
	b.Grow(len(s.head) + n*(len(s.group)+len(s.sep)) + len(s.tail))
	b.WriteString(s.head)
	for i := range n {
		if i > 0 {
			b.WriteString(s.sep)
		}
		b.WriteString(s.group)
	}
	b.WriteString(s.tail)
	return e.bind(b.String())
}

func newBatchSQL(e engine, cfg Config) batchSQL {
	ch, src := e.quote(cfg.ChangesTable), e.quote(cfg.SourcesTable)
	var s batchSQL
	s.findEvents = batchStmt{"SELECT id, event_id, change_key, source, seq FROM " + ch + " WHERE event_id IN (", "?", ", ", ")"}
	s.findEventsLocked = s.findEvents
	if e == engMySQL {
		s.findEventsLocked.tail += " LOCK IN SHARE MODE"
	}
	insert, returning := "INSERT INTO ", " ON CONFLICT DO NOTHING RETURNING id, event_id"
	if e == engMySQL {
		insert, returning = "INSERT IGNORE INTO ", ""
	}
	s.insertChanges = batchStmt{insert + ch + " (change_key, event_id, source, seq, payload, accepted_at) VALUES ",
		"(?, ?, ?, ?, ?, " + e.nowMillis() + ")", ", ", returning}
	// Each pair by the primary key: every engine reads an OR of
	// equalities as that many lookups.
	lock := " FOR UPDATE"
	if e == engSQLite {
		lock = "" // a single writer: the transaction's first write locks the database
	}
	s.readSources = batchStmt{"SELECT change_key, source, last_seq FROM " + src + " WHERE ", "(change_key = ? AND source = ?)", " OR ", lock}
	ignore, ignoreTail := "INSERT INTO ", " ON CONFLICT DO NOTHING"
	if e == engMySQL {
		ignore, ignoreTail = "INSERT IGNORE INTO ", ""
	}
	s.insertSources = batchStmt{ignore + src + " (change_key, source, last_seq) VALUES ", "(?, ?, ?)", ", ", ignoreTail}
	set := " ON CONFLICT (change_key, source) DO UPDATE SET last_seq = excluded.last_seq"
	if e == engMySQL {
		set = " ON DUPLICATE KEY UPDATE last_seq = VALUES(last_seq)"
	}
	s.setSources = batchStmt{"INSERT INTO " + src + " (change_key, source, last_seq) VALUES ", "(?, ?, ?)", ", ", set}

	keys := e.quote(cfg.KeysTable)
	s.readKeys = batchStmt{"SELECT change_key, status, version, flush_version FROM " + keys + " WHERE change_key IN (", "?", ", ", ")"}
	s.insertKeys = batchStmt{ignore + keys + " (change_key, status, version) VALUES ", "(?, '" + statusPending + "', 1)", ", ", ignoreTail}
	// As bumpDone and bumpProcessing (newStatements says why the status
	// is compared with the version), for each key by its primary key.
	s.bumpDoneKeys = bumpKeys(e, keys, "status = '"+statusPending+"', version = version + 1", statusDone)
	s.bumpProcessingKeys = bumpKeys(e, keys, "version = version + 1", statusProcessing)
	return s
}

// bumpKeys is the statement of markKeys that sets set on the keys whose
// row is in status at the given version, each by its primary key, and
// locks their rows in the keys' byte order: the order of a flush's writes
// to the keys of one transaction (FlusherConfig.KeysPerTx), so that the
// two never wait for each other in a cycle. InnoDB reads an OR of
// primary-key equalities in the key's order (utf8mb4_bin: byte order);
// PostgreSQL reads them in the table's physical order, so its rows are
// locked first, sorted, in a CTE (the "C" collation compares bytes), and
// the update reads the locked keys by the primary key. A row changed
// while the CTE waited for its lock is read again and left out when its
// status or version moved.
func bumpKeys(e engine, keys, set, status string) batchStmt {
	cas := "(change_key = ? AND CASE WHEN status = '" + status + "' THEN version END = ?)"
	if e != engPostgres {
		return batchStmt{"UPDATE " + keys + " SET " + set + " WHERE ", cas, " OR ", ""}
	}
	return batchStmt{"WITH locked AS MATERIALIZED (SELECT change_key FROM " + keys + " WHERE ", cas, " OR ",
		" ORDER BY change_key COLLATE \"C\" FOR UPDATE) UPDATE " + keys + " SET " + set +
			" WHERE change_key = ANY(ARRAY(SELECT change_key FROM locked))"}
}

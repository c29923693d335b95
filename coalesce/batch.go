package coalesce

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
)

// MaxBatch is the most changes one [Coalescer.AcceptBatch] takes: its
// insert binds five values a change, well within every engine's limit of
// bound values, and its statements stay a few hundred kilobytes without
// payloads (large payloads meet MySQL's max_allowed_packet sooner: keep
// batch × payload below it).
const MaxBatch = 1000

// BatchResult is the outcome of one change of a batch, at the change's
// index: what [Coalescer.Accept] would have returned for it.
type BatchResult struct {
	// Receipt is the change's receipt, or for an event id accepted
	// before, the first one's with Duplicate set; zero when Err is set.
	Receipt Receipt
	// Err is the change's refusal: a [*StaleError] (matching [ErrStale])
	// when its sequence is not above the last one accepted from its
	// source for its key, the batch's earlier changes counted.
	Err error
}

// noSeq marks a sources row that a batch inserted to lock it: no sequence
// was accepted from the source for the key yet. A batch's changes with a
// Source never carry it, so it never stays in a committed row.
const noSeq = math.MinInt64

// checkBatch refuses a batch the coalescer cannot take as a whole.
func checkBatch(chs []Change) error {
	if len(chs) == 0 {
		return invalid("changes", "the batch is empty")
	}
	if len(chs) > MaxBatch {
		return invalid("changes", "a batch holds at most %d changes (MaxBatch), got %d", MaxBatch, len(chs))
	}
	seen := make(map[string]int, len(chs))
	for i, ch := range chs {
		if err := check(ch); err != nil {
			return fmt.Errorf("%w (change %d)", err, i)
		}
		if ch.Source != "" && ch.Seq == noSeq {
			return invalid("Change.Seq", "must be above math.MinInt64 in a batch (change %d)", i)
		}
		if j, ok := seen[ch.EventID]; ok {
			return invalid("Change.EventID", "changes %d and %d of the batch have the same event id %q", j, i, ch.EventID)
		}
		seen[ch.EventID] = i
	}
	return nil
}

// AcceptBatch records chs durably in one transaction and marks their keys
// dirty, as if each had been given to [Coalescer.Accept] in order: the
// result at index i is what Accept would have returned for chs[i] (a
// receipt, the first receipt of an event id accepted before, or a
// [*StaleError] in BatchResult.Err, a source's earlier changes in the
// batch counted). When AcceptBatch returns results, every recorded change
// is committed and will be folded exactly once.
//
// The whole batch is refused, and nothing written, with an
// [*OverloadError] (matching [ErrOverloaded]) when a limit of the Config
// is exceeded, and with an error wrapping [dialect.ErrInvalidConfig] for
// an empty batch, one of more than [MaxBatch] changes, a change the tables
// cannot hold, two changes with one event id, or a change with a Source
// whose Seq is math.MinInt64.
//
// The transaction takes a fixed number of statements whatever the
// batch's size: one lookup of the batch's event ids, one insert of its new
// changes (on MySQL and MariaDB, and a read of their ids), and for its
// changes with a Source, a locking read of their sources' rows (an insert
// of those missing), and one write of the sequences that moved. The dirty
// marks follow, after the commit: Accept's compare-and-set, for all the
// batch's keys at once (one read of their rows, and at most an insert and
// two compare-and-sets). Deadlocks and serialization failures are retried
// ([Config.Retry]), and so is the batch when a concurrent accept records
// one of its event ids between its lookup and its insert, where the batch
// cannot tell that change's outcome without its lookup: a change with a
// Source (its source's sequence moved for a duplicate), and on MySQL and
// MariaDB any change (its insert counts the rows it skipped, not which).
func (c *Coalescer) AcceptBatch(ctx context.Context, chs []Change) (res []BatchResult, err error) {
	start := time.Now()
	defer func() { c.observeBatch(ctx, start, chs, res, false, err) }()
	if err := checkBatch(chs); err != nil {
		return nil, err
	}
	if err := c.pressure(ctx); err != nil {
		return nil, err
	}
	return c.acceptBatch(ctx, chs)
}

// acceptBatch is AcceptBatch once chs is checked and the backlog's limits
// are: it records chs and marks their keys.
func (c *Coalescer) acceptBatch(ctx context.Context, chs []Change) (res []BatchResult, err error) {
	err = dialect.Retry(ctx, c.cfg.Retry, "coalesce accept batch", func() error {
		tx, err := c.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if res, err = c.recordBatch(ctx, tx, chs); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return nil, c.wrap("accept batch", err)
	}
	if keys := batchKeys(res); len(keys) > 0 {
		if err := c.markCommitted(ctx, func(ctx context.Context) error { return c.markKeys(ctx, keys) }); err != nil {
			return nil, c.wrap("accept batch: mark dirty", err)
		}
	}
	return res, nil
}

// AcceptBatchTx records chs in the caller's transaction tx, opened on the
// coalescer's database, so that they are accepted only if tx commits. It
// returns what [Coalescer.AcceptBatch] returns, with the statements of its
// transaction, but neither retries nor commits: an error (a deadlock
// included) aborts tx, which the caller rolls back and may run again.
//
// As [Coalescer.AcceptTx] it writes the row of each distinct key of a
// recorded change in tx (one statement a key), and those rows stay locked
// until tx ends: prefer AcceptBatch for hot keys. Where AcceptBatch runs
// its batch again because a concurrent accept recorded one of its event
// ids, AcceptBatchTx returns an error matching [dialect.ErrRetryable]
// (and [dialect.IsRetryable]): roll tx back and run it again.
func (c *Coalescer) AcceptBatchTx(ctx context.Context, tx *sql.Tx, chs []Change) (res []BatchResult, err error) {
	start := time.Now()
	defer func() { c.observeBatch(ctx, start, chs, res, true, err) }()
	if tx == nil {
		return nil, invalid("tx", "is nil")
	}
	if err := checkBatch(chs); err != nil {
		return nil, err
	}
	if err := c.pressure(ctx); err != nil {
		return nil, err
	}
	res, err = c.recordBatch(ctx, tx, chs)
	if err != nil {
		return nil, c.wrap("accept batch", err)
	}
	// The keys of recorded changes, each once (the first acceptance of a
	// duplicate marked its key in its own transaction), in byte order:
	// the order in which other marks and a flush's grouped folds lock
	// keys' rows, so that none waits for another in a cycle.
	var keys []string
	for _, r := range res {
		if r.Err == nil && !r.Receipt.Duplicate {
			keys = append(keys, r.Receipt.Key)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, k := range keys {
		if err := c.markInTx(ctx, tx, k); err != nil {
			return nil, c.wrap("accept batch: mark dirty", err)
		}
	}
	if len(keys) > 0 {
		c.Wake()
	}
	return res, nil
}

// markInTx bumps key's version in tx, setting a done key pending, or
// inserts its row pending.
func (c *Coalescer) markInTx(ctx context.Context, tx *sql.Tx, key string) error {
	for range 100 {
		n, err := execN(ctx, tx, c.sq.bumpInTx, key)
		if err != nil || n == 1 {
			return err
		}
		if n, err = execN(ctx, tx, c.sq.insertKey, key); err != nil || n == 1 {
			return err
		}
	}
	return fmt.Errorf("key %q: its row kept appearing and disappearing", key)
}

// keyRow is what a dirty mark reads of a key's row.
type keyRow struct {
	status       string
	ver, flushed int64
}

// readKeyRows reads the rows of keys in one statement: their status,
// version and flush version, by key; a key without a row is missing.
func (c *Coalescer) readKeyRows(ctx context.Context, keys []string) (map[string]keyRow, error) {
	rows, err := c.db.QueryContext(ctx, c.bq.readKeys.render(c.e, len(keys)), anys(keys)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	read := make(map[string]keyRow, len(keys))
	for rows.Next() {
		var k string
		var r keyRow
		if err := rows.Scan(&k, &r.status, &r.ver, &r.flushed); err != nil {
			return nil, err
		}
		read[k] = r
	}
	return read, rows.Err()
}

// markKeys is [Coalescer.markDirty] for several keys with a fixed number
// of statements: one read of their rows, then at most an insert of the
// missing ones and the two compare-and-sets, each for every key that needs
// it, each key deciding as markDirty decides. A statement that wrote fewer
// rows than it had keys met a row changed since the read: its keys get a
// markDirty of their own, which reads again (a key it finds marked meanwhile
// needs nothing, or one more version bump, which costs a flush a requeue
// at most). One key takes markDirty's statements.
func (c *Coalescer) markKeys(ctx context.Context, keys []string) error {
	if len(keys) == 1 {
		return c.markDirty(ctx, keys[0])
	}
	// One order, so that two batches' statements lock shared rows alike.
	keys = slices.Sorted(slices.Values(keys))
	read, err := c.readKeyRows(ctx, keys)
	if err != nil {
		return err
	}
	if c.markRead != nil {
		for _, k := range keys {
			c.markRead(k)
		}
	}
	var missing, done, processing []string
	var doneArgs, processingArgs []any
	for _, k := range keys {
		r, found := read[k]
		switch {
		case !found:
			missing = append(missing, k)
		case r.status == statusPending, r.status == statusFailed:
		case r.status == statusDone:
			done = append(done, k)
			doneArgs = append(doneArgs, k, r.ver)
		case r.status == statusProcessing && r.ver > r.flushed:
		case r.status == statusProcessing:
			processing = append(processing, k)
			processingArgs = append(processingArgs, k, r.ver)
		default:
			return fmt.Errorf("key %q: unexpected status %q", k, r.status)
		}
	}
	var again []string
	woke := false
	for _, w := range []struct {
		q    batchStmt
		keys []string
		args []any
		wake bool
	}{
		{c.bq.insertKeys, missing, anys(missing), true},
		{c.bq.bumpDoneKeys, done, doneArgs, true},
		{c.bq.bumpProcessingKeys, processing, processingArgs, false},
	} {
		if len(w.keys) == 0 {
			continue
		}
		n, err := execN(ctx, c.db, w.q.render(c.e, len(w.keys)), w.args...)
		if err != nil {
			return err
		}
		woke = woke || w.wake && n > 0
		if n != int64(len(w.keys)) {
			again = append(again, w.keys...)
		}
	}
	if woke {
		c.Wake()
		c.notify(ctx)
	}
	for _, k := range again {
		if err := c.markDirty(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// anys returns ss as arguments.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// batchKeys returns the distinct keys of res's receipts (recorded changes
// and duplicates, whose keys Accept marks again), in their first order.
func batchKeys(res []BatchResult) []string {
	var keys []string
	seen := map[string]bool{}
	for _, r := range res {
		if r.Err == nil && !seen[r.Receipt.Key] {
			seen[r.Receipt.Key] = true
			keys = append(keys, r.Receipt.Key)
		}
	}
	return keys
}

// srcKey is a (key, source) pair of the sources table.
type srcKey struct{ key, source string }

// errBatchRaced is the error of a batch one of whose changes a concurrent
// accept recorded between the batch's lookup of its event ids and its
// insert, when the batch cannot tell that change's outcome in its
// transaction: one with a Source (its source's sequence was moved in the
// transaction, as for a new change), or any on MySQL (whose insert counts
// the rows it skipped but does not name them). Run again, the batch's
// lookup finds the change.
var errBatchRaced = fmt.Errorf("%w: a concurrent accept recorded one of the batch's event ids after the batch looked them up; run the batch again", dialect.ErrRetryable)

// recordBatch writes chs in tx and returns their results.
func (c *Coalescer) recordBatch(ctx context.Context, tx *sql.Tx, chs []Change) ([]BatchResult, error) {
	res := make([]BatchResult, len(chs))
	ids := make([]string, len(chs))
	for i, ch := range chs {
		ids[i] = ch.EventID
	}
	// The event ids accepted before: the first receipts, and no sequence
	// check (a resend is a duplicate, not a stale change).
	known, err := c.findEvents(ctx, tx, c.bq.findEvents.render(c.e, len(ids)), ids)
	if err != nil {
		return nil, err
	}
	var fresh []int // indexes of the changes to insert
	var sourced []int
	for i, ch := range chs {
		if r, ok := known[ch.EventID]; ok {
			res[i].Receipt = r
			continue
		}
		if ch.Source != "" {
			sourced = append(sourced, i)
		}
		fresh = append(fresh, i)
	}
	if len(sourced) > 0 {
		if err := c.checkSources(ctx, tx, chs, sourced, res); err != nil {
			return nil, err
		}
		if err := c.findStale(ctx, tx, chs, sourced, res); err != nil {
			return nil, err
		}
		fresh = slices.DeleteFunc(fresh, func(i int) bool { return res[i].Err != nil || res[i].Receipt.Duplicate })
	}
	if len(fresh) == 0 {
		return res, nil
	}
	if c.beforeInsert != nil {
		c.beforeInsert(ctx)
	}
	inserted, err := c.insertChanges(ctx, tx, chs, fresh)
	if err != nil {
		return nil, err
	}
	var lost []string
	for _, i := range fresh {
		ch := chs[i]
		id, ok := inserted[ch.EventID]
		if !ok {
			if ch.Source != "" {
				return nil, errBatchRaced
			}
			lost = append(lost, ch.EventID)
			continue
		}
		res[i].Receipt = Receipt{Key: ch.Key, EventID: ch.EventID, Source: ch.Source, Seq: ch.Seq, ID: id}
	}
	if len(lost) == 0 {
		return res, nil
	}
	// Recorded by a concurrent accept since the lookup: their receipts.
	found, err := c.findEvents(ctx, tx, c.bq.findEventsLocked.render(c.e, len(lost)), lost)
	if err != nil {
		return nil, err
	}
	for _, i := range fresh {
		if res[i].Receipt.EventID != "" {
			continue
		}
		id := chs[i].EventID
		r, ok := found[id]
		if !ok {
			return nil, fmt.Errorf("event %q: neither inserted nor found", id)
		}
		res[i].Receipt = r
	}
	return res, nil
}

// findStale looks up again the event ids of the changes at the indexes
// sourced judged stale: a change recorded by a concurrent accept since the
// batch's lookup moved its source's sequence to its own, and is a
// duplicate, as for [Coalescer.Accept].
func (c *Coalescer) findStale(ctx context.Context, tx *sql.Tx, chs []Change, sourced []int, res []BatchResult) error {
	var stale []string
	for _, i := range sourced {
		if res[i].Err != nil {
			stale = append(stale, chs[i].EventID)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	found, err := c.findEvents(ctx, tx, c.bq.findEventsLocked.render(c.e, len(stale)), stale)
	if err != nil || len(found) == 0 {
		return err
	}
	for _, i := range sourced {
		if r, ok := found[chs[i].EventID]; ok && res[i].Err != nil {
			res[i] = BatchResult{Receipt: r}
		}
	}
	return nil
}

// findEvents runs q, one of the batch's event lookups, for ids and
// returns the receipts found by event id, Duplicate set.
func (c *Coalescer) findEvents(ctx context.Context, tx *sql.Tx, q string, ids []string) (map[string]Receipt, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Receipt{}
	for rows.Next() {
		r := Receipt{Duplicate: true}
		if err := rows.Scan(&r.ID, &r.EventID, &r.Key, &r.Source, &r.Seq); err != nil {
			return nil, err
		}
		out[r.EventID] = r
	}
	return out, rows.Err()
}

// insertChanges inserts the changes of chs at the indexes fresh, skipping
// an event id recorded meanwhile, and returns the ids of those it
// inserted by event id. PostgreSQL and SQLite return them from the insert;
// MySQL has no RETURNING (MariaDB's is not used, so that one path serves
// both): when the insert counts every change inserted, the batch's rows
// are read back; when it skipped one, which it does not name, the batch is
// run again ([errBatchRaced]).
func (c *Coalescer) insertChanges(ctx context.Context, tx *sql.Tx, chs []Change, fresh []int) (map[string]int64, error) {
	args := make([]any, 0, 5*len(fresh))
	ids := make([]string, 0, len(fresh))
	for _, i := range fresh {
		ch := chs[i]
		args = append(args, ch.Key, ch.EventID, ch.Source, ch.Seq, ch.Payload)
		ids = append(ids, ch.EventID)
	}
	q := c.bq.insertChanges.render(c.e, len(fresh))
	out := make(map[string]int64, len(fresh))
	if c.e != engMySQL {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var ev string
			if err := rows.Scan(&id, &ev); err != nil {
				return nil, err
			}
			out[ev] = id
		}
		return out, rows.Err()
	}
	n, err := execN(ctx, tx, q, args...)
	if err != nil {
		return nil, err
	}
	if n != int64(len(fresh)) {
		return nil, errBatchRaced
	}
	// Every event id was inserted: the rows of the batch's event ids are
	// its own.
	own, err := c.findEvents(ctx, tx, c.bq.findEvents.render(c.e, len(ids)), ids)
	if err != nil {
		return nil, err
	}
	for ev, r := range own {
		out[ev] = r.ID
	}
	return out, nil
}

// checkSources checks the sequences of the changes of chs at the indexes
// sourced, in order, against their sources' rows, locked in tx (inserted
// first where missing), setting res[i].Err for a stale one, and writes
// the sequences that moved.
func (c *Coalescer) checkSources(ctx context.Context, tx *sql.Tx, chs []Change, sourced []int, res []BatchResult) error {
	var pairs []srcKey
	seen := map[srcKey]bool{}
	for _, i := range sourced {
		p := srcKey{chs[i].Key, chs[i].Source}
		if !seen[p] {
			seen[p] = true
			pairs = append(pairs, p)
		}
	}
	// A fixed order, so that two batches lock their shared rows alike.
	slices.SortFunc(pairs, func(a, b srcKey) int {
		if n := strings.Compare(a.key, b.key); n != 0 {
			return n
		}
		return strings.Compare(a.source, b.source)
	})
	args := make([]any, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p.key, p.source)
	}
	var cur map[srcKey]int64
	for attempt := 0; ; attempt++ {
		if attempt == 100 {
			return errors.New("the batch's sources' rows kept changing")
		}
		var err error
		if cur, err = c.readSources(ctx, tx, len(pairs), args); err != nil {
			return err
		}
		var missing []any
		for _, p := range pairs {
			if _, ok := cur[p]; !ok {
				missing = append(missing, p.key, p.source, int64(noSeq))
			}
		}
		if len(missing) == 0 {
			break
		}
		// Inserted as locks, with no sequence yet; a row another
		// transaction inserted meanwhile is read (and locked) again.
		n, err := execN(ctx, tx, c.bq.insertSources.render(c.e, len(missing)/3), missing...)
		if err != nil {
			return err
		}
		if n == int64(len(missing)/3) {
			for k := 0; k < len(missing); k += 3 {
				cur[srcKey{missing[k].(string), missing[k+1].(string)}] = noSeq
			}
			break
		}
	}
	first := make(map[srcKey]int64, len(cur))
	for p, s := range cur {
		first[p] = s
	}
	for _, i := range sourced {
		ch := chs[i]
		p := srcKey{ch.Key, ch.Source}
		if s := cur[p]; s != noSeq && ch.Seq <= s {
			res[i].Err = &StaleError{Key: ch.Key, Source: ch.Source, Seq: ch.Seq, Current: s}
			continue
		}
		cur[p] = ch.Seq
	}
	var set []any
	for _, p := range pairs {
		if cur[p] != first[p] {
			set = append(set, p.key, p.source, cur[p])
		}
	}
	if len(set) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, c.bq.setSources.render(c.e, len(set)/3), set...)
	return err
}

// readSources reads, and locks in tx, the sources' rows of the n pairs in
// args (key, source, key, source, ...).
func (c *Coalescer) readSources(ctx context.Context, tx *sql.Tx, n int, args []any) (map[srcKey]int64, error) {
	rows, err := tx.QueryContext(ctx, c.bq.readSources.render(c.e, n), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[srcKey]int64, n)
	for rows.Next() {
		var p srcKey
		var s int64
		if err := rows.Scan(&p.key, &p.source, &s); err != nil {
			return nil, err
		}
		out[p] = s
	}
	return out, rows.Err()
}

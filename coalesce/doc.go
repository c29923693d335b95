// Package coalesce is the hot-row write path: it accepts changes of a key's
// state fast and durably, and folds each key's accumulated changes into its
// state with one writer per key, so that thousands of requests updating one
// user's row become a few state writes instead of thousands of waits for
// that row's lock.
//
// # Accept, then flush
//
// [Coalescer.Accept] records a [Change] (key, event id, optional source
// and sequence, payload bytes) as a row of the changes table and marks its
// key dirty, then returns a [Receipt]: the change is committed and will be
// folded exactly once (the 202 of an HTTP intake). It never updates the
// key's state, and it writes the key's row of the keys table only when no
// flush already pending or in progress is sure to fold the change (a
// compare-and-set on the row's status and version), so the dirty mark does
// not become the hot row instead. [Coalescer.AcceptTx] does the same in the
// caller's transaction.
//
// A [Flusher] ([Coalescer.Flusher], [Flusher.Run]) claims dirty keys with
// package claim (the keys table is a claim table with a version column:
// one flusher per key at a time, fair order, retries with backoff, parked
// keys) and, for each key, in one transaction: reads its unfolded changes
// in the order they were accepted, calls the [FoldFunc] with them and the
// transaction, marks them folded and acks the key by version. A change
// accepted during the flush moved the version, so the ack sends the key
// back to pending instead of done and the change is folded by the next
// flush: nothing accepted is lost, and since the fold's writes, the marks
// and the ack commit together, nothing is folded twice, even when a
// flusher is killed at any step. A killed flusher's keys stay processing
// until a reaper (package zombie, with [Flusher.ClaimConfig]) returns
// them; their changes are then folded by another flusher.
//
// # Duplicates, stale changes, backpressure
//
// A change whose event id was accepted before returns the first receipt
// (Receipt.Duplicate), whatever else it carries: the event id is a unique
// key of the changes table. A change with a Source is refused with a
// [*StaleError] unless its Seq is above the last one accepted from that
// source for the key (an HTTP 409). With [Config.MaxBacklog] or
// [Config.MaxAge], Accept refuses with an [*OverloadError] carrying a
// retry-after when too many keys are dirty or the oldest unfolded change
// is too old, on the database clock (an HTTP 429).
//
// # Read your writes
//
// [Coalescer.Versions] returns a key's accepted version (the highest
// sequence accepted) and its persisted version (the highest sequence
// folded into its state): when one source writes a key, persisted >= s
// means the change of sequence s, and every one before it, is in the state.
//
// # Tables
//
// [CreateTables] creates the three tables on every engine (MySQL and
// MariaDB, PostgreSQL, SQLite); [CreateTablesDDL] prints them:
//
//	changes(id, change_key, event_id UNIQUE, source, seq, payload, accepted_at, folded_at)
//	keys(change_key PK, status, token, claimed_at, attempts, run_at, last_error,
//	     version, flush_version, persisted, folded)
//	sources(change_key, source, last_seq; PK (change_key, source))
//
// Folded changes stay in the changes table, their event ids keeping
// resends out, until [FlusherConfig.Retain] has passed: then [Flusher.Run]
// deletes them ([Flusher.Prune]), and a change resent after that is
// accepted again.
//
// See docs/coalesce.md for when to coalesce, the crash window and what
// lock waits to expect.
package coalesce

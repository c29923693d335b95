// Package redisintake is a Redis intake for package coalesce: clients'
// versioned writes of a key's whole state land in Redis, one script per
// write, and are moved to the coalescer's tables, where its flushers fold
// them into SQL with the user's fold.
//
// # Accept
//
// [Intake.Accept] runs one Lua script that compares the write's version
// with the key's current one and, only if it is above, stores the latest
// state and version and marks the key dirty (a sorted set scored by the
// time the key became dirty): all three or nothing. A resend of the
// current version with the same state returns a receipt marked Duplicate;
// an older version is refused with a [*coalesce.StaleError], and a full
// backlog ([Config.MaxBacklog]) with a [*coalesce.OverloadError], the same
// types the SQL intake returns, so one HTTP handler maps both to 409 and
// 429.
//
// # Drain, then flush
//
// [Intake.Drain] ([Intake.Run] in a loop) takes the oldest dirty keys,
// records each key's latest version with [coalesce.Coalescer.Accept] (the
// version as the sequence of the intake's source, an event id naming the
// key and version) and then compare-and-deletes the key's dirty mark: only
// if the key's version in Redis is still the one recorded, so a write
// accepted meanwhile keeps the key dirty. The coalescer's flushers
// ([coalesce.Flusher.Run]) then fold it, one flusher per key, into the
// user's table; [Latest] picks the newest state of a fold's changes. A
// drain or flusher killed at any step leaves the key dirty in Redis or in
// the keys table, and the next one finishes without recording anything
// twice; an older version never replaces a newer one (the coalescer
// refuses a sequence not above its source's last).
//
// # Which store is the source of truth
//
// The SQL intake ([coalesce.Coalescer.Accept]) commits each change to the
// database before it returns: a receipt is as durable as the database.
//
// This intake returns once Redis holds the write. Until a drain has
// recorded it in SQL, Redis is its only copy, and Redis's persistence
// decides what a Redis crash loses: with appendonly yes and appendfsync
// always, nothing acknowledged; with appendfsync everysec (the usual
// setting), up to about a second of writes; with RDB snapshots only,
// everything since the last snapshot; a failover to an asynchronous
// replica, what it had not received. Eviction must be off
// (maxmemory-policy noeviction): an evicted state or dirty set is a lost
// write. Once drained, SQL holds the state durably and is the source of
// truth; the copy in Redis serves only the version check, and stays there
// (one hash per key ever written: size Redis for the keys). After Redis
// lost writes, it accepts versions that SQL already has or has passed:
// the drain that meets one drops it (SQL keeps its newer state), logs a
// warning and raises the key's version in Redis to SQL's, so later ones
// are refused. Such writes were acknowledged and are not applied: after a
// Redis loss, writers should continue above SQL's persisted version
// ([Intake.Versions]).
//
// The intake keeps the latest state of each key, not each write: versions
// overwritten in Redis before a drain never reach SQL. It serves states
// written whole (last write wins); changes that must each count (counters,
// balances) belong in the SQL intake, which keeps every change.
//
// See docs/coalesce.md for the coalescer, its flushers and its crash
// window.
package redisintake

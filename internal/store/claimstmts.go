package store

import (
	"strings"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store/render"
)

// ClaimNames are what an engine's claim templates see of the table: its
// quoted identifiers and rendered status literals. Values never appear
// here; they are placeholders, written {{arg "name"}}.
type ClaimNames struct {
	// Table and the column names, quoted. Optional columns are "".
	Table, ID, Status, Token, ClaimedAt, Attempts, Version, CreatedAt string
	// RunAt, Error and Worker are the optional run-at, error and worker
	// columns, quoted. A claim writes {{arg "worker"}} to Worker.
	RunAt, Error, Worker string
	// Archive is the quoted archive table (ClaimTable.Archive), or "".
	Archive string
	// Scope are the quoted scope columns (for {{scope .Scope}}).
	Scope []string
	// Returned are the columns a claim returns, quoted: the key, the
	// version (if any), the attempts (if any, NULL read as 0), then the
	// extra columns.
	Returned []string
	// Status literals; Failed is "" without a failed status.
	Pending, Processing, Done, Failed string
	// TextKey is true for text keys.
	TextKey bool
	// ClearClaimedAt: rows going back to pending get a NULL ClaimedAt
	// ({{template "cleartime" .}}).
	ClearClaimedAt bool
	// TextTimes: the claimed-at, created-at and run-at columns hold text
	// dates (SQLite).
	TextTimes bool
	// ClaimIndex, TokenIndex, ReapIndex, ScopeIndex (scoped tables only)
	// and SchedIndex (tables with RunAt only) are the recommended indexes'
	// quoted names.
	ClaimIndex, TokenIndex, ReapIndex, ScopeIndex, SchedIndex string
	// ClaimedAtPer, CreatedAtPer and RunAtPer are "" for a time column in
	// the engine's own convention and, for one holding integer unix time
	// ([dialect.TimeFormat]), how many of the engine's time units
	// ([render.Style.TimeUnit]) make one of the column's, as SQL text:
	// "1000000" for unix seconds on an engine counting microseconds.
	// Templates write the two forms side by side
	// ({{if .ClaimedAtPer}}...{{else}}...{{end}}), usually through
	// {{tc .ClaimedAt .ClaimedAtPer "arg"...}}, which packs a column, its
	// Per and placeholder names for a {{template}} call.
	ClaimedAtPer, CreatedAtPer, RunAtPer string
}

// ClaimVariant is what a claim statement is rendered for besides the
// table: the flags its template tests. The table below says which
// statement is rendered with which.
type ClaimVariant struct {
	Scoped    bool   // reap, stats, unpark, retry now, list: restricted to the scope
	Park      bool   // reap: park stale rows at MaxAttempts instead of returning them
	Below     bool   // reap: return only rows with fewer attempts than "below"
	KeyHint   bool   // key-list statements: read the primary key (Driver.HintsKeys)
	ByKeys    bool   // read back, release, unpark, retry now: only the listed keys
	Undo      bool   // ack: undo the claim's attempts increment
	ParkAt    bool   // ack: park rows whose attempts reached MaxAttempts
	Target    string // ack: the status literal to set
	Delete    bool   // ack to done: delete the rows instead (ClaimTable.DeleteDone)
	Snooze    bool   // release: set RunAt to now + "delay" (a snooze)
	Reset     bool   // unpark: reset the attempts
	Set       RowSet // list: the rows listed
	Hint      bool   // mark, skip locked pick: with FORCE INDEX
	From      bool   // mark, skip locked pick, held claim: above the key cursor
	Pipelined bool   // ack+claim: the ack's token is {{arg "ack_token"}}
	IndexCols string // index DDL: the quoted columns
	IndexName string // index DDL: the quoted index name, qualified by the table's schema
	Online    bool   // index DDL: build without blocking writes (IndexOptions.Online)
}

// claimData is what a claim template is executed with.
type claimData struct {
	ClaimNames
	ClaimVariant
}

// claimTmpl is the [ClaimSQL] template a claim statement renders: each is
// the field of its name (tMark: Mark, tHeldAck: Held.Ack, tIndex: the
// field of Indexes the key's index names).
type claimTmpl uint8

const (
	tClaim claimTmpl = iota
	tMark
	tSkipLockedPick
	tSkipLockedMark
	tReadBack
	tAck
	tAckLock
	tHeartbeat
	tHeartbeatHeld
	tRelease
	tReap
	tReapLock
	tReapKeys
	tUnpark
	tRetryNow
	tList
	tStats
	tColumns
	tIndexExists
	tIndex
	tDropIndex
	tAckClaim
	tArchive
	tPurge
	tHeldLimit
	tHeldUnlimit
	tHeldClaim
	tHeldLook
	tHeldAttempts
	tHeldRead
	tHeldAck
)

// source returns the template t with the defines it may use, or "" where
// the engine has no such statement.
func (c *ClaimSQL) source(t claimTmpl, ix indexKind) string {
	src := map[claimTmpl]string{
		tClaim: c.Claim, tMark: c.Mark, tSkipLockedPick: c.SkipLockedPick, tSkipLockedMark: c.SkipLockedMark,
		tReadBack: c.ReadBack, tAck: c.Ack, tAckLock: c.AckLock, tHeartbeat: c.Heartbeat, tHeartbeatHeld: c.HeartbeatHeld,
		tRelease: c.Release, tReap: c.Reap, tReapLock: c.ReapLock, tReapKeys: c.ReapKeys, tUnpark: c.Unpark,
		tRetryNow: c.RetryNow, tList: c.List, tStats: c.Stats, tColumns: c.Columns, tIndexExists: c.IndexExists,
		tIndex: c.Indexes.of(ix), tDropIndex: c.DropIndex, tAckClaim: c.AckClaim, tArchive: c.Archive, tPurge: c.Purge,
		tHeldLimit: c.Held.Limit, tHeldUnlimit: c.Held.Unlimit, tHeldClaim: c.Held.Claim, tHeldLook: c.Held.Look, tHeldAttempts: c.Held.Attempts,
		tHeldRead: c.Held.Read, tHeldAck: c.Held.Ack,
	}[t]
	if t == tHeldAck && src == "" {
		src = heldAck
	}
	if src == "" {
		return ""
	}
	return coreDefines + c.Common + src
}

// indexKind is one of the recommended indexes ([recommendedIndexes]).
type indexKind uint8

const (
	ixNone indexKind = iota
	ixClaim
	ixToken
	ixReap
	ixScope
	ixSched
)

// indexKinds are the recommended indexes in the order of [recommendedIndexes].
var indexKinds = []indexKind{ixClaim, ixToken, ixReap, ixScope, ixSched}

// suffix is the index's name suffix ([IndexName]).
func (k indexKind) suffix() string {
	return [...]string{"", "claim", "token", "reap", "scope", "sched"}[k]
}

// of returns the DDL template of index k.
func (x IndexSQL) of(k indexKind) string {
	return [...]string{"", x.Claim, x.Token, x.Reap, x.Scope, x.Sched}[k]
}

// ackTo is the status an ack sets, by its outcome.
type ackTo uint8

const (
	toNone ackTo = iota
	toDone
	toPending
	toFailed
)

// claimKey names one statement of a claim store: the template it renders
// and the variant it renders it for. The variant's Target, Delete,
// IndexCols and IndexName are not part of the key: they follow from to,
// index and the table.
type claimKey struct {
	t     claimTmpl
	to    ackTo
	index indexKind
	v     ClaimVariant
}

// claimEntry is one line of the claim table: a statement, its name in the
// golden files (completed by its variant), its name in Statements ("":
// not listed) and the condition under which a store has it (nil: always,
// when the engine has the template).
type claimEntry struct {
	name, listed string
	key          claimKey
	when         func(*claimPlan) bool
}

// claimTable is every statement a claim store renders, in the order of the
// golden files. The engine's template decides the rest: a statement whose
// template the engine leaves empty does not exist for it.
var claimTable = []claimEntry{
	{name: "claim", listed: "claim", key: claimKey{t: tClaim}},
	{name: "read back", listed: "read back", key: claimKey{t: tReadBack}},
	{name: "read back keys", listed: "read back keys", key: claimKey{t: tReadBack, v: ClaimVariant{ByKeys: true}}},

	// Acks by key list, and their row locks; the same naming the primary
	// key (KeyHint) on a Driver that HintsKeys, used once VerifySchema found
	// the key column to be the primary key.
	{name: "ack", listed: "ack done", key: claimKey{t: tAck, to: toDone}},
	{name: "ack", listed: "ack pending", key: claimKey{t: tAck, to: toPending}},
	{name: "ack", listed: "ack failed", key: claimKey{t: tAck, to: toFailed}, when: failedStatus},
	{name: "ack requeue", listed: "ack requeue", key: claimKey{t: tAck, to: toPending, v: ClaimVariant{Undo: true}}},
	{name: "ack lock", listed: "ack lock", key: claimKey{t: tAckLock}},
	{name: "release keys", listed: "release keys", key: claimKey{t: tRelease, v: ClaimVariant{ByKeys: true}}},
	{name: "ack", listed: "ack done by key", key: claimKey{t: tAck, to: toDone, v: ClaimVariant{KeyHint: true}}, when: hintsKeys},
	{name: "ack", listed: "ack pending by key", key: claimKey{t: tAck, to: toPending, v: ClaimVariant{KeyHint: true}}, when: hintsKeys},
	{name: "ack", listed: "ack failed by key", key: claimKey{t: tAck, to: toFailed, v: ClaimVariant{KeyHint: true}}, when: all(hintsKeys, failedStatus)},
	{name: "ack requeue", listed: "ack requeue by key", key: claimKey{t: tAck, to: toPending, v: ClaimVariant{Undo: true, KeyHint: true}}, when: hintsKeys},
	{name: "ack lock", listed: "ack lock by key", key: claimKey{t: tAckLock, v: ClaimVariant{KeyHint: true}}, when: hintsKeys},
	{name: "release keys", listed: "release keys by key", key: claimKey{t: tRelease, v: ClaimVariant{ByKeys: true, KeyHint: true}}, when: hintsKeys},
	// A retry that parks at MaxAttempts in one statement, which says which
	// rows it parked: RETURNING engines only.
	{name: "ack park", listed: "ack park", key: claimKey{t: tAck, v: ClaimVariant{ParkAt: true}}, when: all(returning, parks)},
	{name: "archive", listed: "archive", key: claimKey{t: tArchive, v: ClaimVariant{ByKeys: true}}, when: archives},
	{name: "purge", listed: "purge", key: claimKey{t: tPurge, v: ClaimVariant{ByKeys: true}}, when: archives},

	{name: "heartbeat", listed: "heartbeat", key: claimKey{t: tHeartbeat}},
	{name: "heartbeat held", listed: "heartbeat held", key: claimKey{t: tHeartbeatHeld}},
	{name: "release", listed: "release", key: claimKey{t: tRelease}},

	// A sweep: the return of every stale row (no MaxAttempts), or the park
	// of those at MaxAttempts, then the return of those below it. Where the
	// server has SKIP LOCKED, an engine with ReapLock and ReapKeys locks the
	// stale rows' keys, skipping locked rows, and updates those instead.
	{name: "reap", listed: "reap", key: claimKey{t: tReap}},
	{name: "reap lock", listed: "reap lock", key: claimKey{t: tReapLock}, when: skipLocked},
	{name: "reap keys", listed: "reap keys", key: claimKey{t: tReapKeys}, when: skipLocked},
	{name: "reap", listed: "reap scoped", key: claimKey{t: tReap, v: ClaimVariant{Scoped: true}}},
	{name: "reap lock", listed: "reap lock scoped", key: claimKey{t: tReapLock, v: ClaimVariant{Scoped: true}}, when: skipLocked},
	{name: "reap keys", listed: "reap keys scoped", key: claimKey{t: tReapKeys, v: ClaimVariant{Scoped: true}}, when: skipLocked},
	{name: "reap", listed: "reap park", key: claimKey{t: tReap, v: ClaimVariant{Park: true}}, when: parks},
	{name: "reap lock", listed: "reap lock park", key: claimKey{t: tReapLock, v: ClaimVariant{Park: true}}, when: all(parks, skipLocked)},
	{name: "reap keys", listed: "reap keys park", key: claimKey{t: tReapKeys, v: ClaimVariant{Park: true}}, when: all(parks, skipLocked)},
	{name: "reap", listed: "reap park scoped", key: claimKey{t: tReap, v: ClaimVariant{Park: true, Scoped: true}}, when: parks},
	{name: "reap lock", listed: "reap lock park scoped", key: claimKey{t: tReapLock, v: ClaimVariant{Park: true, Scoped: true}}, when: all(parks, skipLocked)},
	{name: "reap keys", listed: "reap keys park scoped", key: claimKey{t: tReapKeys, v: ClaimVariant{Park: true, Scoped: true}}, when: all(parks, skipLocked)},
	{name: "reap", listed: "reap below", key: claimKey{t: tReap, v: ClaimVariant{Below: true}}, when: attempts},
	{name: "reap lock", listed: "reap lock below", key: claimKey{t: tReapLock, v: ClaimVariant{Below: true}}, when: all(attempts, skipLocked)},
	{name: "reap", listed: "reap below scoped", key: claimKey{t: tReap, v: ClaimVariant{Below: true, Scoped: true}}, when: attempts},
	{name: "reap lock", listed: "reap lock below scoped", key: claimKey{t: tReapLock, v: ClaimVariant{Below: true, Scoped: true}}, when: all(attempts, skipLocked)},

	{name: "snooze", listed: "snooze", key: claimKey{t: tRelease, v: ClaimVariant{ByKeys: true, Snooze: true}}, when: runAt},

	// Operator actions, on every row of a scope or of a key list.
	{name: "unpark", listed: "unpark", key: claimKey{t: tUnpark}, when: failedStatus},
	{name: "retry now", listed: "retry now", key: claimKey{t: tRetryNow}, when: runAt},
	{name: "unpark", listed: "unpark keys", key: claimKey{t: tUnpark, v: ClaimVariant{ByKeys: true}}, when: failedStatus},
	{name: "retry now", listed: "retry now keys", key: claimKey{t: tRetryNow, v: ClaimVariant{ByKeys: true}}, when: runAt},
	{name: "unpark", listed: "unpark scoped", key: claimKey{t: tUnpark, v: ClaimVariant{Scoped: true}}, when: failedStatus},
	{name: "retry now", listed: "retry now scoped", key: claimKey{t: tRetryNow, v: ClaimVariant{Scoped: true}}, when: runAt},
	{name: "unpark", key: claimKey{t: tUnpark, v: ClaimVariant{Scoped: true, ByKeys: true}}, when: failedStatus},
	{name: "retry now", key: claimKey{t: tRetryNow, v: ClaimVariant{Scoped: true, ByKeys: true}}, when: runAt},
	{name: "unpark", key: claimKey{t: tUnpark, v: ClaimVariant{Reset: true}}, when: failedStatus},
	{name: "unpark", key: claimKey{t: tUnpark, v: ClaimVariant{ByKeys: true, Reset: true}}, when: failedStatus},
	{name: "unpark", listed: "unpark reset scoped", key: claimKey{t: tUnpark, v: ClaimVariant{Scoped: true, Reset: true}}, when: failedStatus},
	{name: "unpark", key: claimKey{t: tUnpark, v: ClaimVariant{Scoped: true, ByKeys: true, Reset: true}}, when: failedStatus},
	{name: "list failed", listed: "list failed", key: claimKey{t: tList, v: ClaimVariant{Set: SetFailed}}, when: failedStatus},
	{name: "list failed", listed: "list failed scoped", key: claimKey{t: tList, v: ClaimVariant{Set: SetFailed, Scoped: true}}, when: failedStatus},
	{name: "list processing", listed: "list processing", key: claimKey{t: tList, v: ClaimVariant{Set: SetProcessing}}},
	{name: "list processing", listed: "list processing scoped", key: claimKey{t: tList, v: ClaimVariant{Set: SetProcessing, Scoped: true}}},
	{name: "list scheduled", listed: "list scheduled", key: claimKey{t: tList, v: ClaimVariant{Set: SetScheduled}}, when: runAt},
	{name: "list scheduled", listed: "list scheduled scoped", key: claimKey{t: tList, v: ClaimVariant{Set: SetScheduled, Scoped: true}}, when: runAt},
	{name: "stats", listed: "stats", key: claimKey{t: tStats}},
	{name: "stats", listed: "stats scoped", key: claimKey{t: tStats, v: ClaimVariant{Scoped: true}}},

	// The catalog, and the recommended indexes' DDL ([recommendedIndexes]), plain and
	// online, each with the DROP INDEX of an invalid one.
	{name: "columns", key: claimKey{t: tColumns}},
	{name: "index exists", key: claimKey{t: tIndexExists}},
	{name: "index", key: claimKey{t: tIndex, index: ixClaim}},
	{name: "drop index", key: claimKey{t: tDropIndex, index: ixClaim}},
	{name: "index", key: claimKey{t: tIndex, index: ixClaim, v: ClaimVariant{Online: true}}},
	{name: "drop index", key: claimKey{t: tDropIndex, index: ixClaim, v: ClaimVariant{Online: true}}},
	{name: "index", key: claimKey{t: tIndex, index: ixToken}},
	{name: "drop index", key: claimKey{t: tDropIndex, index: ixToken}},
	{name: "index", key: claimKey{t: tIndex, index: ixToken, v: ClaimVariant{Online: true}}},
	{name: "drop index", key: claimKey{t: tDropIndex, index: ixToken, v: ClaimVariant{Online: true}}},
	{name: "index", key: claimKey{t: tIndex, index: ixReap}},
	{name: "drop index", key: claimKey{t: tDropIndex, index: ixReap}},
	{name: "index", key: claimKey{t: tIndex, index: ixReap, v: ClaimVariant{Online: true}}},
	{name: "drop index", key: claimKey{t: tDropIndex, index: ixReap, v: ClaimVariant{Online: true}}},
	{name: "index", key: claimKey{t: tIndex, index: ixScope}, when: scoped},
	{name: "drop index", key: claimKey{t: tDropIndex, index: ixScope}, when: scoped},
	{name: "index", key: claimKey{t: tIndex, index: ixScope, v: ClaimVariant{Online: true}}, when: scoped},
	{name: "drop index", key: claimKey{t: tDropIndex, index: ixScope, v: ClaimVariant{Online: true}}, when: scoped},
	{name: "index", key: claimKey{t: tIndex, index: ixSched}, when: runAt},
	{name: "drop index", key: claimKey{t: tDropIndex, index: ixSched}, when: runAt},
	{name: "index", key: claimKey{t: tIndex, index: ixSched, v: ClaimVariant{Online: true}}, when: runAt},
	{name: "drop index", key: claimKey{t: tDropIndex, index: ixSched, v: ClaimVariant{Online: true}}, when: runAt},

	// Ack+claim in one statement (see pipeline.go); an archiving ack is not
	// one statement.
	{name: "ack claim", listed: "ack claim done", key: claimKey{t: tAckClaim, to: toDone, v: ClaimVariant{Pipelined: true}}, when: not(archives)},
	{name: "ack claim", listed: "ack claim pending", key: claimKey{t: tAckClaim, to: toPending, v: ClaimVariant{Pipelined: true}}},
	{name: "ack claim", listed: "ack claim failed", key: claimKey{t: tAckClaim, to: toFailed, v: ClaimVariant{Pipelined: true}}, when: failedStatus},
	{name: "ack claim park", listed: "ack claim park", key: claimKey{t: tAckClaim, v: ClaimVariant{ParkAt: true, Pipelined: true}}, when: parks},

	// The held-transaction claim (held.go), where the engine has one.
	{name: "held limit", key: claimKey{t: tHeldLimit}, when: holds},
	{name: "held unlimit", key: claimKey{t: tHeldUnlimit}, when: holds},
	{name: "held claim", listed: "held claim", key: claimKey{t: tHeldClaim}, when: holds},
	{name: "held claim", listed: "held claim from", key: claimKey{t: tHeldClaim, v: ClaimVariant{From: true}}, when: all(holds, intKeys)},
	{name: "held look", listed: "held look", key: claimKey{t: tHeldLook}, when: holds},
	{name: "held attempts", listed: "held attempts", key: claimKey{t: tHeldAttempts}, when: holds},
	{name: "held read", key: claimKey{t: tHeldRead}, when: holds},
	{name: "held ack", listed: "held ack done", key: claimKey{t: tHeldAck, to: toDone}, when: holds},
	{name: "held ack", listed: "held ack pending", key: claimKey{t: tHeldAck, to: toPending}, when: holds},
	{name: "held ack", listed: "held ack failed", key: claimKey{t: tHeldAck, to: toFailed}, when: all(holds, failedStatus)},
	{name: "held ack", listed: "held ack done by key", key: claimKey{t: tHeldAck, to: toDone, v: ClaimVariant{KeyHint: true}}, when: all(holds, hintsKeys)},
	{name: "held ack", listed: "held ack pending by key", key: claimKey{t: tHeldAck, to: toPending, v: ClaimVariant{KeyHint: true}}, when: all(holds, hintsKeys)},
	{name: "held ack", listed: "held ack failed by key", key: claimKey{t: tHeldAck, to: toFailed, v: ClaimVariant{KeyHint: true}}, when: all(holds, hintsKeys, failedStatus)},

	// The claim of an engine without RETURNING ([ClaimOverride]): marking
	// statements, plain and naming the claim index (Hint), from the lowest
	// key and above the key cursor (From); SKIP LOCKED picks likewise, and
	// the marking of the keys picked.
	{name: "claim", key: claimKey{t: tMark}},
	{name: "claim skip locked", key: claimKey{t: tSkipLockedPick}},
	{name: "claim", key: claimKey{t: tMark, v: ClaimVariant{From: true}}},
	{name: "claim skip locked", key: claimKey{t: tSkipLockedPick, v: ClaimVariant{From: true}}},
	{name: "claim", key: claimKey{t: tMark, v: ClaimVariant{Hint: true}}},
	{name: "claim skip locked", key: claimKey{t: tSkipLockedPick, v: ClaimVariant{Hint: true}}},
	{name: "claim", key: claimKey{t: tMark, v: ClaimVariant{Hint: true, From: true}}},
	{name: "claim skip locked", key: claimKey{t: tSkipLockedPick, v: ClaimVariant{Hint: true, From: true}}},
	{name: "claim skip locked update", key: claimKey{t: tSkipLockedMark}},
}

// claimPlan is what the table's conditions ask about: the table
// description and the engine.
type claimPlan struct {
	spec dialect.ClaimTable
	drv  Driver
	caps dialect.Capabilities
	sqls *ClaimSQL
}

func failedStatus(p *claimPlan) bool { return p.spec.Failed.IsSet() }
func attempts(p *claimPlan) bool     { return p.spec.Attempts != "" }
func parks(p *claimPlan) bool        { return attempts(p) && failedStatus(p) }
func runAt(p *claimPlan) bool        { return p.spec.RunAt != "" }
func scoped(p *claimPlan) bool       { return len(p.spec.Scope) > 0 }
func archives(p *claimPlan) bool     { return p.spec.Archive != "" }
func intKeys(p *claimPlan) bool      { return p.spec.IDKind == dialect.IDInt }
func returning(p *claimPlan) bool    { return p.caps.Returning }
func skipLocked(p *claimPlan) bool   { return p.caps.SkipLocked }
func hintsKeys(p *claimPlan) bool    { return p.drv.HintsKeys() }
func holds(p *claimPlan) bool        { return p.sqls.Held.Claim != "" }

func all(conds ...func(*claimPlan) bool) func(*claimPlan) bool {
	return func(p *claimPlan) bool {
		for _, c := range conds {
			if !c(p) {
				return false
			}
		}
		return true
	}
}

func not(cond func(*claimPlan) bool) func(*claimPlan) bool {
	return func(p *claimPlan) bool { return !cond(p) }
}

// claimNames quotes a validated claim table description.
func (b *Backend) claimNames(t dialect.ClaimTable) ClaimNames {
	q := b.quoteOpt
	n := ClaimNames{
		Table: b.quoteName(t.Table), ID: q(t.ID), Status: q(t.Status), Token: q(t.Token),
		ClaimedAt: q(t.ClaimedAt), Attempts: q(t.Attempts), Version: q(t.Version), CreatedAt: q(t.CreatedAt),
		RunAt: q(t.RunAt), Error: q(t.Error), Worker: q(t.Worker),
		Pending: t.Pending.Literal(), Processing: t.Processing.Literal(), Done: t.Done.Literal(),
		TextKey: t.IDKind == dialect.IDText, ClearClaimedAt: t.ClearClaimedAt, TextTimes: t.TextTimes,
	}
	n.ClaimedAtPer, n.CreatedAtPer, n.RunAtPer = b.timePer(t.ClaimedAtFormat), b.timePer(t.CreatedAtFormat), b.timePer(t.RunAtFormat)
	if t.Failed.IsSet() {
		n.Failed = t.Failed.Literal()
	}
	if t.Archive != "" {
		n.Archive = b.quoteName(t.Archive)
	}
	for _, c := range t.Scope {
		n.Scope = append(n.Scope, q(c))
	}
	n.Returned = append(n.Returned, n.ID)
	if n.Version != "" {
		n.Returned = append(n.Returned, n.Version)
	}
	if n.Attempts != "" {
		n.Returned = append(n.Returned, "COALESCE("+n.Attempts+", 0)")
	}
	for _, c := range t.Columns {
		n.Returned = append(n.Returned, q(c))
	}
	n.ClaimIndex, n.TokenIndex, n.ReapIndex = q(IndexName(t.Table, "claim")), q(IndexName(t.Table, "token")), q(IndexName(t.Table, "reap"))
	if len(t.Scope) > 0 {
		n.ScopeIndex = q(IndexName(t.Table, "scope"))
	}
	if t.RunAt != "" {
		n.SchedIndex = q(IndexName(t.Table, "sched"))
	}
	return n
}

// renderClaims renders every statement of the claim table that spec has
// on b's engine.
func (b *Backend) renderClaims(spec dialect.ClaimTable, names ClaimNames) (statements[claimKey], error) {
	var out statements[claimKey]
	p := &claimPlan{spec: spec, drv: b.drv, caps: b.caps, sqls: &b.claims}
	for _, e := range claimTable {
		if e.when != nil && !e.when(p) {
			continue
		}
		src := b.claims.source(e.key.t, e.key.index)
		if src == "" {
			continue
		}
		v := b.claimVariant(spec, names, e.key)
		name := e.name
		if e.key.index != ixNone {
			name += " " + IndexName(spec.Table, e.key.index.suffix())
		}
		if err := out.add(b, e.key, name+describe(v), e.listed, src, claimData{names, v}, names.TextKey); err != nil {
			return out, err
		}
	}
	return out, nil
}

// claimVariant completes the variant of key k with what follows from the
// table: the ack's status literal, whether an ack to done deletes, and
// an index's columns and name.
func (b *Backend) claimVariant(spec dialect.ClaimTable, names ClaimNames, k claimKey) ClaimVariant {
	v := k.v
	switch k.to {
	case toDone:
		v.Target = names.Done
		v.Delete = spec.DeleteDone && spec.Archive == ""
	case toPending:
		v.Target = names.Pending
	case toFailed:
		v.Target = names.Failed
	}
	if k.index == ixNone {
		return v
	}
	name := IndexName(spec.Table, k.index.suffix())
	if k.t == tDropIndex {
		v.IndexName = b.drv.Quote(name)
		if schema, _ := SplitName(spec.Table); schema != "" {
			v.IndexName = b.drv.Quote(schema) + "." + v.IndexName
		}
		return v
	}
	for _, ix := range recommendedIndexes(spec) {
		if ix.Name == name {
			cols := make([]string, len(ix.Columns))
			for i, c := range ix.Columns {
				cols[i] = b.drv.Quote(c)
			}
			v.IndexCols = strings.Join(cols, ", ")
		}
	}
	return v
}

// describe names the flags of v that are set, for the name of a rendered
// statement.
func describe(v ClaimVariant) string {
	var parts []string
	flag := func(on bool, name string) {
		if on {
			parts = append(parts, name)
		}
	}
	flag(v.Scoped, "scoped")
	flag(v.Park, "park")
	flag(v.Below, "below")
	flag(v.ByKeys, "by keys")
	flag(v.KeyHint, "key hint")
	flag(v.Undo, "undo")
	flag(v.ParkAt, "park at max")
	flag(v.Target != "", "to "+v.Target)
	flag(v.Delete, "delete")
	flag(v.Snooze, "snooze")
	flag(v.Reset, "reset")
	flag(v.Hint, "force index")
	flag(v.From, "from cursor")
	flag(v.Pipelined, "pipelined")
	flag(v.Online, "online")
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// timePer returns the ...Per value of a column of format f: the number of
// the engine's time units in one unit of the column, or "" where the
// column holds the engine's own convention (native types; on SQLite, whose
// own convention is integer milliseconds, unix milliseconds too).
func (b *Backend) timePer(f dialect.TimeFormat) string {
	ms := b.style.TimeUnit == render.Milliseconds
	switch {
	case f == dialect.UnixSeconds && ms:
		return "1000"
	case f == dialect.UnixSeconds:
		return "1000000"
	case f == dialect.UnixMillis && !ms:
		return "1000"
	}
	return ""
}

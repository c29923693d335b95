// Package plantest is the engine-neutral half of the plan tests in
// dialect/postgres, dialect/mysql and dialect/sqlite: one layout of a large
// claim table and lease table, the statements to explain on them with their
// arguments, and how many rows each may read. An engine's test loads the
// layout with its own SQL, explains every statement under its plan modes
// and statistics, and checks what it read against [Case.Budget].
//
// The budgets say what "reads only the rows it needs" means for each
// statement; a plan that walks the primary key, scans the table or hashes
// every processing row to join a hundred exceeds them by three orders of
// magnitude.
package plantest

import (
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/store/render"
)

// The claim table: Rows rows with keys 1..Rows, in tasks (the scope column
// task_id) of TaskRows consecutive keys, task_id = 1 + (id-1)/TaskRows.
//
//   - keys 1..DoneTo are done (claimed a day before the load, token NULL,
//     attempts 1);
//   - DoneTo+1..ProcessingTo are processing, claimed at the load (fresh),
//     in batches of 100 under the token "tok-" || (id-1)/100, attempts 1;
//   - the rest are pending (token and claimed_at NULL, attempts 0).
//
// Every row has created_at at the load, version 0 and payload 'p'.
const (
	Rows         = 1_000_000
	TaskRows     = 10_000
	DoneTo       = 800_000
	ProcessingTo = 900_000
)

// The statistics an engine takes before it loads the table come from
// ThenRows rows that looked different, as a table does soon after its first
// bulk loads: five tasks (task_id = 1 + (id-1)/ThenTaskRows), 90% of the
// rows pending and the rest processing and stale (claimed a day before,
// token "old-" || (id-1)/100, attempts 1), nothing done. They are deleted
// before the load; the statistics stay. With them a generic plan expects a
// claim's scope to hold a fifth of the table, pending, and the reaps to
// find stale rows everywhere.
//
// With statistics of fewer scopes still (one to three tasks measured), a
// generic plan of scoped Stats scans the table on PostgreSQL: it believes
// the scope is a third of the table or more, and no statement shape makes
// an aggregate over "the whole table" cheaper through an index. The
// package documentation of dialect/postgres says so.
const (
	ThenRows     = 30_000
	ThenTaskRows = 6_000
	ThenPending  = 27_000 // ids 1..ThenPending are pending, the rest processing
)

// The lease table (store.LeaseTableDef, text keys "k-" || n for n in
// 1..Rows): n <= LeasesFreeTo are free (owner and expires_at NULL, lock_at a
// day before the load, fence 1), the others held by "own-" || n until an
// hour after the load (lock_at at the load, fence 1). Its statistics come
// from ThenRows keys of which ThenLeasesFree are free and the rest held and
// expired a day before.
const (
	LeasesFreeTo   = 900_000
	ThenLeasesFree = 12_000
)

// Rows and keys the statements work on.
const (
	// ClaimTask has pending rows only; StatsTask processing rows only.
	ClaimTask = 95
	StatsTask = 85
	// HeldToken holds keys HeldFrom..HeldFrom+99 (task 86).
	HeldToken = "tok-8500"
	HeldFrom  = 850_001
	// StaleFrom..StaleFrom+StaleRows-1 (token "tok-8000", task ReapTask)
	// are made stale, claimed an hour ago, in the phase "100 stale rows".
	StaleFrom = DoneTo + 1
	StaleRows = 100
	ReapTask  = 81
	// StaleLeaseFrom..StaleLeaseFrom+StaleRows-1 expire an hour before the
	// phase "100 stale rows".
	StaleLeaseFrom = LeasesFreeTo + 1
	// LeaseKey is held by LeaseOwner; NewLeaseKey is not in the table.
	LeaseKey    = "k-950000"
	LeaseOwner  = "own-950000"
	NewLeaseKey = "k-0"
	// Limit is the batch of claims and reaps.
	Limit = 100
	// Small is the budget of a statement that touches at most a batch.
	Small = 1_000
)

// A Phase is a state of the tables in which every statement is explained.
type Phase struct {
	Name string
	// Timeout is the reaps' timeout.
	Timeout time.Duration
	// MakeStale is true when the engine's test makes StaleRows rows (and
	// leases) stale before the phase and restores them after it.
	MakeStale bool
	// Stale is the number of stale claim rows in the phase.
	Stale int64
}

// Phases: nothing stale (the common sweep), StaleRows stale rows, and a
// backlog in which every processing row is stale (a reaper's first sweep
// after an outage).
var Phases = []Phase{
	{Name: "nothing stale", Timeout: 10 * time.Minute},
	{Name: "100 stale rows", Timeout: 10 * time.Minute, MakeStale: true, Stale: StaleRows},
	{Name: "backlog of stale rows", Timeout: time.Microsecond, Stale: ProcessingTo - DoneTo},
}

// Store names the store a statement belongs to.
type Store string

// The stores.
const (
	Claims Store = "claims"
	Leases Store = "leases"
)

// A Case is one statement: its name in the store's Statements, its
// arguments and the most rows it may read in a phase.
type Case struct {
	Store Store
	Name  string
	Args  func(Phase) *render.Args
	// Budget is the most rows the statement may read from its table, summed
	// over every access to it.
	Budget func(Phase) int64
	// FullScan is set for the one statement that reads the whole table by
	// design: unscoped Stats counts every row. Whatever the phase, it reads
	// the table: it is explained in the first phase only.
	FullScan bool
	// Why says what the budget allows, for failure messages.
	Why string
}

func small(Phase) int64 { return Small }

// heldKeys are the keys HeldToken holds.
func heldKeys() []any {
	keys := make([]any, Limit)
	for i := range keys {
		keys[i] = int64(HeldFrom + i)
	}
	return keys
}

// Cases returns every statement of a claim store and a lease store over
// the layout. Engines without a statement (MySQL has no "claim" template,
// PostgreSQL no "read back") skip it; engine-specific statements (MySQL's
// claim) are the engine test's own cases.
func Cases() []Case {
	held := func(Phase) *render.Args { return &render.Args{Token: HeldToken, Keys: heldKeys(), MaxAttempts: 3} }
	reap := func(scope []any) func(Phase) *render.Args {
		return func(p Phase) *render.Args {
			return &render.Args{Timeout: p.Timeout, Limit: Limit, MaxAttempts: 2, Below: 2, Scope: scope}
		}
	}
	// Parking reads the stale rows until it has found Limit at MaxAttempts
	// (none here): its need is the stale rows, not the table.
	park := func(p Phase) int64 { return p.Stale + Small }
	lease := func(Phase) *render.Args {
		return &render.Args{Key: LeaseKey, Owner: LeaseOwner, TTL: time.Minute, Limit: Limit}
	}
	// Insert creates a key that is not there yet.
	insert := func(Phase) *render.Args {
		return &render.Args{Key: NewLeaseKey, Owner: LeaseOwner, TTL: time.Minute}
	}
	out := []Case{
		{Store: Claims, Name: "claim", Args: func(Phase) *render.Args {
			// The rotating cursor mid-table: the part above it and the
			// wrapped part are both read.
			return &render.Args{Token: "plan-tok", Limit: Limit, Scope: []any{int64(ClaimTask)}, After: int64(Rows / 2)}
		}, Budget: small, Why: "a batch of pending rows"},
		{Store: Claims, Name: "stats", Args: func(Phase) *render.Args { return &render.Args{} },
			Budget: func(Phase) int64 { return Rows + Rows/10 }, FullScan: true, Why: "every row: unscoped stats count the table"},
		{Store: Claims, Name: "stats scoped", Args: func(Phase) *render.Args {
			return &render.Args{Scope: []any{int64(StatsTask)}}
		}, Budget: func(Phase) int64 { return 2 * TaskRows }, Why: "the scope's rows"},
		{Store: Claims, Name: "reap", Args: reap(nil), Budget: small, Why: "a batch of stale rows"},
		{Store: Claims, Name: "reap scoped", Args: reap([]any{int64(ReapTask)}), Budget: small, Why: "a batch of stale rows"},
		{Store: Claims, Name: "reap below", Args: reap(nil), Budget: small, Why: "a batch of stale rows"},
		{Store: Claims, Name: "reap below scoped", Args: reap([]any{int64(ReapTask)}), Budget: small, Why: "a batch of stale rows"},
		{Store: Claims, Name: "reap park", Args: reap(nil), Budget: park, Why: "the stale rows"},
		{Store: Claims, Name: "reap park scoped", Args: reap([]any{int64(ReapTask)}), Budget: park, Why: "the stale rows"},
		{Store: Claims, Name: "reap lock", Args: reap(nil), Budget: small, Why: "a batch of stale rows"},
		{Store: Claims, Name: "reap lock scoped", Args: reap([]any{int64(ReapTask)}), Budget: small, Why: "a batch of stale rows"},
		{Store: Claims, Name: "reap lock park", Args: reap(nil), Budget: park, Why: "the stale rows"},
		{Store: Claims, Name: "reap lock park scoped", Args: reap([]any{int64(ReapTask)}), Budget: park, Why: "the stale rows"},
		{Store: Claims, Name: "reap lock below", Args: reap(nil), Budget: small, Why: "a batch of stale rows"},
		{Store: Claims, Name: "reap lock below scoped", Args: reap([]any{int64(ReapTask)}), Budget: small, Why: "a batch of stale rows"},
		{Store: Leases, Name: "reap", Args: lease, Budget: small, Why: "a batch of expired leases"},
		{Store: Leases, Name: "held", Args: lease, Budget: small, Why: "a page of held leases, soonest expiry first"},
	}
	for _, name := range []string{"claim skip locked"} {
		c := out[0]
		c.Name = name
		out = append(out, c)
	}
	for _, name := range []string{"reap keys", "reap keys scoped", "reap keys park", "reap keys park scoped"} {
		out = append(out, Case{Store: Claims, Name: name, Args: func(p Phase) *render.Args {
			return &render.Args{Timeout: p.Timeout, Keys: heldKeys(), MaxAttempts: 2, Below: 2, Scope: []any{int64(ReapTask)}}
		}, Budget: small, Why: "the locked keys"})
	}
	for _, name := range []string{"read back", "read back keys", "ack done", "ack pending", "ack failed", "ack requeue", "ack park", "ack lock",
		"heartbeat", "heartbeat held", "release", "release keys", "ack done by key", "ack pending by key", "ack failed by key",
		"ack requeue by key", "ack lock by key", "release keys by key"} {
		out = append(out, Case{Store: Claims, Name: name, Args: held, Budget: small, Why: "one token's rows"})
	}
	// Held-transaction claims: a batch of pending rows; their acks and
	// attempts read the listed keys.
	out = append(out, Case{Store: Claims, Name: "held claim", Args: func(Phase) *render.Args {
		return &render.Args{Limit: Limit, Scope: []any{int64(ClaimTask)}}
	}, Budget: small, Why: "a batch of pending rows"})
	out = append(out, Case{Store: Claims, Name: "held claim from", Args: func(Phase) *render.Args {
		return &render.Args{Limit: Limit, Scope: []any{int64(ClaimTask)}, From: int64((ClaimTask-1)*TaskRows + TaskRows/2)}
	}, Budget: small, Why: "a batch of pending rows above the key cursor"})
	out = append(out, Case{Store: Claims, Name: "held look", Args: func(Phase) *render.Args {
		return &render.Args{Scope: []any{int64(ClaimTask)}}
	}, Budget: small, Why: "the first pending row"})
	for _, name := range []string{"held attempts", "held ack done", "held ack pending", "held ack failed",
		"held ack done by key", "held ack pending by key", "held ack failed by key"} {
		out = append(out, Case{Store: Claims, Name: name, Args: held, Budget: small, Why: "the listed keys"})
	}
	// Ack+claim (PostgreSQL's one statement): the held token's rows and a
	// batch of pending rows.
	for _, name := range []string{"ack claim done", "ack claim pending", "ack claim failed", "ack claim park"} {
		out = append(out, Case{Store: Claims, Name: name, Args: func(Phase) *render.Args {
			return &render.Args{Token: "plan-tok", AckToken: HeldToken, Keys: heldKeys(), MaxAttempts: 3, Limit: Limit, Scope: []any{int64(ClaimTask)}}
		}, Budget: small, Why: "one token's rows and a batch of pending rows"})
	}
	out = append(out, Case{Store: Claims, Name: "snooze", Args: func(Phase) *render.Args {
		return &render.Args{Token: HeldToken, Keys: heldKeys(), Delay: time.Minute}
	}, Budget: small, Why: "one token's rows"})
	// Operator actions and listings. Failed rows and processing rows are
	// found through the status indexes; there are no failed rows here, so
	// those statements must read next to nothing. Pending rows with a
	// future RunAt are found among the pending rows (of the scope): no
	// index orders them by RunAt, and these statements are for operators,
	// not loops.
	op := func(scope []any, keys bool) func(Phase) *render.Args {
		return func(p Phase) *render.Args {
			a := &render.Args{Limit: 1000, Scope: scope, Timeout: p.Timeout}
			if keys {
				a.Keys = heldKeys()
			}
			return a
		}
	}
	task := []any{int64(ClaimTask)}
	pending := func(Phase) int64 { return Rows - ProcessingTo + Small }
	scopePending := func(Phase) int64 { return 2*TaskRows + Small }
	for _, c := range []struct {
		name   string
		scope  []any
		keys   bool
		budget func(Phase) int64
		why    string
	}{
		{"unpark", nil, false, small, "the failed rows"},
		{"unpark scoped", task, false, small, "the scope's failed rows"},
		{"unpark keys", nil, true, small, "the keys"},
		{"unpark reset scoped", task, false, small, "the scope's failed rows"},
		{"retry now", nil, false, pending, "the pending rows"},
		{"retry now scoped", task, false, scopePending, "the scope's pending rows"},
		{"retry now keys", nil, true, small, "the keys"},
		{"list failed", nil, false, small, "the failed rows"},
		{"list failed scoped", task, false, small, "the scope's failed rows"},
		{"list processing", nil, false, small, "a page of the oldest processing rows"},
		{"list processing scoped", []any{int64(ReapTask)}, false, small, "a page of the scope's oldest processing rows"},
		{"list scheduled", nil, false, pending, "the pending rows"},
		{"list scheduled scoped", task, false, scopePending, "the scope's pending rows"},
	} {
		out = append(out, Case{Store: Claims, Name: c.name, Args: op(c.scope, c.keys), Budget: c.budget, Why: c.why})
	}
	out = append(out, Case{Store: Leases, Name: "insert", Args: insert, Budget: small, Why: "one key"})
	for _, name := range []string{"acquire", "read back", "renew", "release", "force", "inspect"} {
		out = append(out, Case{Store: Leases, Name: name, Args: lease, Budget: small, Why: "one key"})
	}
	out = append(out, Case{Store: Leases, Name: "release hold", Args: func(p Phase) *render.Args {
		a := lease(p)
		a.Hold = time.Now().Add(time.Minute)
		return a
	}, Budget: small, Why: "one key"})
	return out
}

// Spec is the claim table of the layout, with every optional column.
func Spec(table string) dialect.ClaimTable {
	st := func(v string) dialect.Status {
		s, err := store.StatusOf("status", v)
		if err != nil {
			panic(err)
		}
		return s
	}
	return dialect.ClaimTable{
		Table: table, ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Version: "version", CreatedAt: "created_at", RunAt: "run_at", Error: "last_error",
		Columns: []string{"payload"}, Scope: []string{"task_id"},
		Pending: st("PENDING"), Processing: st("PROCESSING"), Done: st("SENT"), Failed: st("FAILED"),
	}
}

// Skip reports whether c need not be explained in p (see Case.FullScan).
func (c Case) Skip(p Phase) bool { return c.FullScan && p.Name != Phases[0].Name }

// Name labels one explained statement for failure messages.
func Name(stats string, p Phase, mode string, c Case) string {
	return fmt.Sprintf("%s, %s, %s: %s %s", stats, p.Name, mode, c.Store, c.Name)
}

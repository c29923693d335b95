package postgres

import "github.com/claimlock/claimlock/internal/store"

// The statements below are text/template sources over store.ClaimNames and
// store.ClaimVariant (claim statements) or store.LeaseNames (lease
// statements): quoted identifiers ({{.Table}}, {{.ID}}, ...), status
// literals ({{.Pending}}, ...), variant flags, and values as placeholders
// ({{arg "token"}} renders $n). They are rendered once per table, when its
// store is built (internal/store's claimstmts.go and leasestmts.go list
// which, for which variants).
//
// A time column holding integer unix time (the names' ...Per fields, "per"
// its unit in microseconds) is written as the clock's microseconds divided
// by its unit, rounded down for claim and lock times ("enow") and up for
// expiries and run-at times ("elater"), and compared with the clock's now
// minus a duration, divided and rounded down ("eago"): a stored time up to
// one unit early never makes a claim or lease look older than it is. The
// column's side of every comparison stays bare, so its indexes serve.

// common holds the fragments the statements share. "materialized" is
// defined per server (see New): PostgreSQL 12+ would otherwise inline a CTE
// and could re-run its LIMIT subquery.
const common = `
{{- define "maxatt"}}{{arg "max_attempts"}}::bigint{{end}}
{{- define "concurrently"}}{{if .Online}}CONCURRENTLY {{end}}{{end}}
{{- define "order"}}{{if .TextKey}}({{.ID}} || ''){{else}}{{.ID}} + 0{{end}}{{end}}
{{- define "us"}}CAST(EXTRACT(EPOCH FROM {{.}}) * 1000000 AS bigint){{end}}
{{- define "usnow"}}CAST(EXTRACT(EPOCH FROM now()) * 1000000 AS bigint){{end}}
{{- define "enow"}}({{template "usnow"}} / {{.Per}}){{end}}
{{- define "eago"}}(({{template "usnow"}}{{range .Args}} - {{arg .}}::bigint{{end}}) / {{.Per}}){{end}}
{{- define "elater"}}(({{template "usnow"}}{{range .Args}} + {{arg .}}::bigint{{end}} + {{.Per}} - 1) / {{.Per}}){{end}}
{{- define "eus"}}({{.C}}::bigint * {{.Per}}){{end}}
{{- define "eage"}}({{template "usnow"}} - {{.C}}::bigint * {{.Per}}){{end}}
{{- define "eleft"}}({{.C}}::bigint * {{.Per}} - {{template "usnow"}}){{end}}
{{- define "claimnow"}}{{if .ClaimedAtPer}}{{template "enow" (tc .ClaimedAt .ClaimedAtPer)}}{{else}}now(){{end}}{{end}}
{{- define "future"}}{{.RunAt}} > {{if .RunAtPer}}{{template "enow" (tc .RunAt .RunAtPer)}}{{else}}now(){{end}}{{end}}
{{- define "locknow"}}{{if .LockedAtPer}}{{template "enow" (tc .LockedAt .LockedAtPer)}}{{else}}now(){{end}}{{end}}
{{- define "explater"}}{{if .ExpiresAtPer}}{{template "elater" (tc .ExpiresAt .ExpiresAtPer "ttl")}}{{else}}now() + {{template "ttl"}}{{end}}{{end}}
{{- define "lockus"}}{{if .LockedAtPer}}{{template "eus" (tc .LockedAt .LockedAtPer)}}{{else}}{{template "us" .LockedAt}}{{end}}{{end}}
{{- define "expus"}}{{if .ExpiresAtPer}}{{template "eus" (tc .ExpiresAt .ExpiresAtPer)}}{{else}}{{template "us" .ExpiresAt}}{{end}}{{end}}
{{- define "expgone"}}{{.ExpiresAt}} < {{if .ExpiresAtPer}}{{template "eago" (tc .ExpiresAt .ExpiresAtPer "slack")}}{{else}}now() - {{template "slack"}}{{end}}{{end}}
{{- define "age"}}GREATEST(CAST(EXTRACT(EPOCH FROM (now() - {{.}})) * 1000000 AS bigint), 0){{end}}
{{- define "ttl"}}({{arg "ttl"}}::bigint * interval '1 microsecond'){{end}}
{{- define "slack"}}({{arg "slack"}}::bigint * interval '1 microsecond'){{end}}
{{- define "stamp"}}{{template "lockus" .}}{{end}}
{{- define "lockgone"}}{{.LockedAt}} < {{if .LockedAtPer}}{{template "eago" (tc .LockedAt .LockedAtPer "ttl" "slack")}}{{else}}now() - {{template "ttl"}} - {{template "slack"}}{{end}}{{end}}
{{- define "held"}}{{if .Owner}}{{.Owner}} = {{arg "owner"}}{{else}}{{template "stamp" .}} = {{arg "stamp"}}{{end}}{{end}}
{{- define "free"}}{{if .Owner}}{{.Owner}} = NULL{{else}}{{.LockedAt}} = NULL{{end}}{{if .ExpiresAt}}, {{.ExpiresAt}} = NULL{{end}}{{end}}
{{- define "fence"}}{{if .Fence}}COALESCE({{.Fence}}, 0){{else}}0::bigint{{end}}{{end}}
{{- define "runnable"}}{{if .RunAt}} AND {{template "runat" .}} <= {{if .RunAtPer}}{{template "enow" (tc .RunAt .RunAtPer)}}{{else}}now(){{end}}{{end}}{{end}}
{{- define "runat"}}COALESCE({{.RunAt}}, {{if .RunAtPer}}0{{else}}'-infinity'{{end}}){{end}}
{{- define "delayed"}}{{if .RunAtPer}}{{template "elater" (tc .RunAt .RunAtPer "delay")}}{{else}}now() + ({{arg "delay"}}::bigint * interval '1 microsecond'){{end}}{{end}}
{{- define "filter"}}{{if .Scoped}}{{scope .Scope}}{{end}}{{if .ByKeys}} AND {{.ID}} {{keys}}{{end}}{{end}}
{{- define "locked"}}{{.}} = ANY(ARRAY(SELECT {{.}} FROM cl_c)){{end}}
{{- define "lockorder"}}{{if .TextKey}}{{.ID}}::text COLLATE "C"{{else}}{{.ID}}{{end}}{{end}}
{{- define "until"}}(timestamptz 'epoch' + {{arg "hold"}}::bigint * interval '1 microsecond'){{end}}
{{- define "hold"}}{{if .ExpiresAtPer -}}
  {{.Owner}} = CASE WHEN {{arg "hold"}}::bigint > {{template "usnow"}} THEN {{.Owner}} END, {{.ExpiresAt}} = CASE WHEN {{arg "hold"}}::bigint > {{template "usnow"}} THEN ({{arg "hold"}}::bigint + {{.ExpiresAtPer}} - 1) / {{.ExpiresAtPer}} END
  {{- else -}}
  {{.Owner}} = CASE WHEN {{template "until"}} > now() THEN {{.Owner}} END, {{.ExpiresAt}} = CASE WHEN {{template "until"}} > now() THEN {{template "until"}} END
  {{- end}}{{end}}
{{- define "expiry"}}{{if .ExpiresAt}}{{template "expus" .}}{{else if .LockedAtPer}}({{.LockedAt}}::bigint * {{.LockedAtPer}} + {{arg "ttl"}}::bigint){{else}}CAST(EXTRACT(EPOCH FROM {{.LockedAt}} + {{template "ttl"}}) * 1000000 AS bigint){{end}}{{end}}
{{- define "after"}}{{arg "after"}}::{{if .TextKey}}text{{else}}bigint{{end}}{{end}}
{{- define "claimpick"}}
  SELECT {{.ID}} FROM (SELECT {{.ID}} FROM {{.Table}}
    WHERE {{.Status}} = {{.Pending}}{{scope .Scope}}{{template "runnable" .}} AND {{template "order" .}} > {{template "after" .}}
    ORDER BY {{template "order" .}} LIMIT {{arg "limit"}}
    FOR UPDATE SKIP LOCKED) cl_above
  UNION ALL
  SELECT {{.ID}} FROM (SELECT {{.ID}} FROM {{.Table}}
    WHERE {{.Status}} = {{.Pending}}{{scope .Scope}}{{template "runnable" .}} AND {{template "order" .}} <= {{template "after" .}}
    ORDER BY {{template "order" .}} LIMIT {{arg "limit"}}
    FOR UPDATE SKIP LOCKED) cl_wrap
  LIMIT {{arg "limit"}}{{end}}
{{- define "claimmark"}}
UPDATE {{.Table}}
SET {{.Status}} = {{.Processing}}, {{.Token}} = {{arg "token"}}, {{.ClaimedAt}} = {{template "claimnow" .}}
    {{- if .Attempts}}, {{.Attempts}} = COALESCE({{.Attempts}}, 0) + 1{{end}}
    {{- if .Worker}}, {{.Worker}} = {{arg "worker"}}{{end}}
WHERE {{template "locked" .ID}} AND {{.Status}} = {{.Pending}}
RETURNING {{join .Returned}}{{end}}
{{- define "ackrows"}}
{{- if .Delete}}
DELETE FROM {{.Table}}
WHERE {{.Token}} = {{if .Pipelined}}{{arg "ack_token"}}{{else}}{{arg "token"}}{{end}} AND {{.ID}} {{keys}}
RETURNING {{.ID}}, false
{{- else}}
UPDATE {{.Table}}
SET {{.Status}} = {{if .ParkAt}}CASE WHEN COALESCE({{.Attempts}}, 0) >= {{template "maxatt" .}} THEN {{.Failed}} ELSE {{.Pending}} END{{else}}{{.Target}}{{end}},
    {{.Token}} = NULL{{if and .Undo .Attempts}}, {{.Attempts}} = GREATEST({{.Attempts}} - 1, 0){{end}}
    {{- if eq .Target .Pending}}{{template "cleartime" .}}{{end}}
    {{- if and .ParkAt .ClearClaimedAt}}, {{.ClaimedAt}} = CASE WHEN COALESCE({{.Attempts}}, 0) >= {{template "maxatt" .}} THEN {{.ClaimedAt}} END{{end}}
    {{- template "ackmark" .}}
WHERE {{.Token}} = {{if .Pipelined}}{{arg "ack_token"}}{{else}}{{arg "token"}}{{end}} AND {{.ID}} {{keys}}
RETURNING {{.ID}}, {{if .ParkAt}}{{.Status}} = {{.Failed}}{{else}}false{{end}}
{{- end}}{{end}}
`

// claimSQL: claims take rows in rotating key order (the store's cursor,
// "after"): the rows above the cursor, then the wrapped part from the
// lowest key up to it, each a LIMIT subquery that locks only the rows the
// outer LIMIT pulls (the second runs only when the first comes back
// short), each a range of the claim index. Claims order by id + 0 and the
// claim index is partial on it
// (PostgreSQL's plan trap: with ORDER BY id the planner may walk the
// primary key past every processed row): the primary key cannot supply that
// order, so no plan walks the key past processed rows. The
// candidates are locked in a MATERIALIZED CTE, never a LIMIT subquery under
// IN (which PostgreSQL may re-run and so claim more than the limit). Both
// strategies run it with SKIP LOCKED (see the package doc).
//
// The same reasoning holds for every statement that reads a large table
// (large_plan_test.go checks each one on 1,000,000 rows, under stale and
// fresh statistics, with custom and generic plans):
//   - The statements that update the rows a CTE locked find them with
//     key = ANY(ARRAY(SELECT key FROM cl_c)), one index lookup per key,
//     never a join: a generic plan estimates a LIMIT $n at a tenth of the
//     rows it limits, and with FROM cl_c the planner then hashed or merged
//     every pending (claim) or processing (reap) row to join a hundred
//     (940,000 rows read per claim under statistics from the table's first
//     loads). ARRAY() over the materialized CTE runs once, like the CTE.
//   - Reaps take the oldest stale rows first, ORDER BY claimed_at (leases:
//     expires_at), an order only the reap index (status, claimed_at), or
//     for a scoped reap the scope index, supplies: with ORDER BY id a
//     generic plan, or statistics that think many rows are stale, walked
//     the primary key through every row (454 ms per empty sweep).
var claimSQL = store.ClaimSQL{
	Claim: `
WITH cl_c AS {{template "materialized"}}({{template "claimpick" .}})
{{template "claimmark" .}}`,

	ReadBack: `
SELECT {{join .Returned}} FROM {{.Table}} WHERE {{.Token}} = {{arg "token"}}{{if .ByKeys}} AND {{.ID}} {{keys}}{{end}} ORDER BY {{.ID}}`,

	Ack: `{{template "ackrows" .}}`,

	// AckClaim acks a batch and claims the next in one statement: the ack
	// (cl_a) and the claim (cl_c, cl_n) are data-modifying CTEs, which
	// PostgreSQL runs to completion once each, in one snapshot and one
	// commit. They never touch the same row: the ack takes rows the old
	// token holds (processing), the claim pending ones, and a row the ack
	// returns to pending is not pending in the claim's snapshot. The first
	// row (kind 0) says what the ack did, as JSON arrays of the acked and of
	// the parked keys (NULL: none); the claimed rows (kind 1) follow with
	// the claim's columns.
	AckClaim: `
WITH cl_a (k, parked) AS ({{template "ackrows" .}}),
cl_c AS {{template "materialized"}}({{template "claimpick" .}}),
cl_n AS ({{template "claimmark" .}})
SELECT 0, (SELECT json_agg(k) FROM cl_a)::text, (SELECT json_agg(k) FROM cl_a WHERE parked)::text{{range .Returned}}, NULL{{end}}
UNION ALL
SELECT 1, NULL, NULL, cl_n.* FROM cl_n
ORDER BY 1`,

	// Archive moves rows in one statement: the DELETE's CTE returns the
	// rows as the ack's UPDATE left them, and the INSERT's affected rows are
	// the rows moved.
	Archive: `
WITH cl_m AS (
  DELETE FROM {{.Table}}
  WHERE {{.ID}} {{keys}} AND {{.Status}} = {{.Done}} AND {{.Token}} IS NULL
  RETURNING *)
INSERT INTO {{.Archive}} SELECT * FROM cl_m`,

	// AckLock locks the listed rows in key order, as Heartbeat and Release
	// below do: the LockRows node runs above the sort. In the table's
	// order it could deadlock with the batch's own heartbeat while an
	// AckTx's transaction waits.
	AckLock: `
SELECT {{.ID}}, {{or .Version "0"}}, {{or .Attempts "0"}} FROM {{.Table}}
WHERE {{.Token}} = {{arg "token"}} AND {{.ID}} {{keys}}
ORDER BY {{template "lockorder" .}} FOR UPDATE`,

	// Heartbeat and Release write every row a token holds, so they lock
	// them in key order (text keys in byte order) in a MATERIALIZED CTE:
	// read by the token, they would lock them in the table's physical
	// order, and could deadlock with a writer that locks two of the same
	// rows in key order (the coalesce package's dirty marks and multi-key
	// flushes). FOR NO KEY UPDATE is the lock the UPDATE itself takes, so
	// foreign keys that reference the table wait for nothing more than
	// before; it checks the conditions again on a row's latest version, and
	// the UPDATE writes only rows it locked.
	Heartbeat: `
WITH cl_c AS {{template "materialized"}}(
  SELECT {{.ID}} FROM {{.Table}} WHERE {{.Token}} = {{arg "token"}} AND {{.Status}} = {{.Processing}}
  ORDER BY {{template "lockorder" .}} FOR NO KEY UPDATE)
UPDATE {{.Table}} SET {{.ClaimedAt}} = {{if .ClaimedAtPer}}{{template "claimnow" .}}{{else}}GREATEST(now(), {{.ClaimedAt}} + interval '1 microsecond'){{end}}
WHERE {{template "locked" .ID}}
RETURNING {{.ID}}`,

	Release: `
WITH cl_c AS {{template "materialized"}}(
  SELECT {{.ID}} FROM {{.Table}}
  WHERE {{.Token}} = {{arg "token"}} AND {{.Status}} = {{.Processing}}{{if .ByKeys}} AND {{.ID}} {{keys}}{{end}}
  ORDER BY {{template "lockorder" .}} FOR NO KEY UPDATE)
UPDATE {{.Table}}
SET {{.Status}} = {{.Pending}}, {{.Token}} = NULL{{if .Attempts}}, {{.Attempts}} = GREATEST({{.Attempts}} - 1, 0){{end}}{{template "cleartime" .}}
    {{- if .Snooze}}, {{.RunAt}} = {{template "delayed" .}}{{end}}
WHERE {{template "locked" .ID}}`,

	// Operator actions take at most "limit" rows per statement, in no
	// particular order (the rows they change leave the set), through the
	// status indexes: the reap index (status, claimed_at) or, scoped, the
	// scope index for failed rows, the partial claim index for pending ones.
	Unpark: `
WITH cl_c AS {{template "materialized"}}(
  SELECT {{.ID}} FROM {{.Table}} WHERE {{.Status}} = {{.Failed}}{{template "filter" .}}
  LIMIT {{arg "limit"}} FOR UPDATE)
UPDATE {{.Table}}
SET {{.Status}} = {{.Pending}}, {{.Token}} = NULL{{template "cleartime" .}}
    {{- if .Error}}, {{.Error}} = NULL{{end}}{{if .RunAt}}, {{.RunAt}} = NULL{{end}}{{if and .Reset .Attempts}}, {{.Attempts}} = 0{{end}}
WHERE {{template "locked" .ID}} AND {{.Status}} = {{.Failed}}`,

	RetryNow: `
WITH cl_c AS {{template "materialized"}}(
  SELECT {{.ID}} FROM {{.Table}} WHERE {{.Status}} = {{.Pending}} AND {{template "future" .}}{{template "filter" .}}
  LIMIT {{arg "limit"}} FOR UPDATE)
UPDATE {{.Table}} SET {{.RunAt}} = NULL
WHERE {{template "locked" .ID}} AND {{.Status}} = {{.Pending}} AND {{template "future" .}}`,

	// List reads each set in the order of an index: failed rows (oldest
	// claim first) through the reap or scope index, scheduled rows through
	// the partial sched index.
	List: `
SELECT {{.ID}}, COALESCE({{.Token}}, ''), {{if .Attempts}}COALESCE({{.Attempts}}, 0)::bigint{{else}}0::bigint{{end}},
       COALESCE({{if .ClaimedAtPer}}GREATEST({{template "eage" (tc .ClaimedAt .ClaimedAtPer)}}, 0){{else}}{{template "age" .ClaimedAt}}{{end}}, -1),
       {{if .RunAt}}COALESCE(GREATEST({{if .RunAtPer}}{{template "eleft" (tc .RunAt .RunAtPer)}}{{else}}CAST(EXTRACT(EPOCH FROM ({{.RunAt}} - now())) * 1000000 AS bigint){{end}}, 0), 0){{else}}0::bigint{{end}},
       {{if .Error}}COALESCE({{.Error}}, ''){{else}}''{{end}}{{if .Worker}}, COALESCE({{.Worker}}, ''){{end}}
FROM {{.Table}}
{{- if eq .Set 0}}
WHERE {{.Status}} = {{.Failed}}{{template "filter" .}} ORDER BY {{.ClaimedAt}}
{{- else if eq .Set 1}}
WHERE {{.Status}} = {{.Processing}} AND {{.ClaimedAt}} <= {{if .ClaimedAtPer}}{{template "eago" (tc .ClaimedAt .ClaimedAtPer "older")}}{{else}}now() - ({{arg "older"}}::bigint * interval '1 microsecond'){{end}}{{template "filter" .}} ORDER BY {{.ClaimedAt}}
{{- else}}
WHERE {{.Status}} = {{.Pending}} AND {{template "future" .}}{{template "filter" .}} ORDER BY {{.RunAt}}
{{- end}}
LIMIT {{arg "limit"}}`,

	Reap: `
WITH cl_c AS {{template "materialized"}}(
  SELECT {{.ID}} FROM {{.Table}}
  WHERE {{.Status}} = {{.Processing}}
    AND {{.ClaimedAt}} < {{if .ClaimedAtPer}}{{template "eago" (tc .ClaimedAt .ClaimedAtPer "timeout")}}{{else}}now() - ({{arg "timeout"}}::bigint * interval '1 microsecond'){{end}}
    {{- if .Park}} AND COALESCE({{.Attempts}}, 0) >= {{template "maxatt" .}}{{else if .Below}} AND COALESCE({{.Attempts}}, 0) < {{arg "below"}}::bigint{{end}}
    {{- if .Scoped}}{{scope .Scope}}{{end}}
  ORDER BY {{.ClaimedAt}} LIMIT {{arg "limit"}}
  FOR UPDATE SKIP LOCKED)
UPDATE {{.Table}}
SET {{.Status}} = {{if .Park}}{{.Failed}}{{else}}{{.Pending}}{{end}}, {{.Token}} = NULL{{if not .Park}}{{template "cleartime" .}}{{end}}
WHERE {{template "locked" .ID}} AND {{.Status}} = {{.Processing}}`,

	Stats: `
SELECT COUNT(*) FILTER (WHERE {{.Status}} = {{.Pending}}),
       COUNT(*) FILTER (WHERE {{.Status}} = {{.Processing}}),
       COUNT(*) FILTER (WHERE {{.Status}} = {{.Done}}),
       {{if .Failed}}COUNT(*) FILTER (WHERE {{.Status}} = {{.Failed}}){{else}}0::bigint{{end}},
       COUNT(*),
       {{if .ClaimedAtPer}}GREATEST({{template "eage" (tc (printf "MIN(%s) FILTER (WHERE %s = %s)" .ClaimedAt .Status .Processing) .ClaimedAtPer)}}, 0)
       {{- else}}{{template "age" (printf "MIN(%s) FILTER (WHERE %s = %s)" .ClaimedAt .Status .Processing)}}{{end}},
       {{if and .CreatedAt .CreatedAtPer}}GREATEST({{template "eage" (tc (printf "MIN(%s) FILTER (WHERE %s = %s)" .CreatedAt .Status .Pending) .CreatedAtPer)}}, 0)
       {{- else if .CreatedAt}}{{template "age" (printf "MIN(%s) FILTER (WHERE %s = %s)" .CreatedAt .Status .Pending)}}{{else}}NULL::bigint{{end}}
FROM {{.Table}}{{if .Scoped}} WHERE TRUE{{scope .Scope}}{{end}}`,

	// Columns gives an enum column's labels in MySQL's enum('a','b') form,
	// and finds a primary key of one column through pg_index.
	Columns: `
SELECT c.column_name::text, COALESCE(c.character_maximum_length, 0)::bigint,
       c.data_type::text, COALESCE(c.datetime_precision, -1)::bigint, COALESCE(c.collation_name, '')::text, c.is_nullable = 'YES',
       COALESCE((SELECT 'enum(' || string_agg(quote_nullable(e.enumlabel::text), ',' ORDER BY e.enumsortorder) || ')'
                 FROM pg_catalog.pg_enum e
                 JOIN pg_catalog.pg_type t ON t.oid = e.enumtypid
                 JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
                 WHERE t.typname = c.udt_name AND n.nspname = c.udt_schema), '')::text,
       COALESCE((SELECT a.attname = c.column_name AND i.indnatts = 1
                 FROM pg_catalog.pg_index i
                 JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                 WHERE i.indisprimary AND i.indrelid = to_regclass(quote_ident(c.table_schema) || '.' || quote_ident(c.table_name))), false)
FROM information_schema.columns c
WHERE c.table_schema = COALESCE({{arg "schema"}}::text, current_schema()) AND c.table_name = {{arg "table"}}::text`,

	// IndexExists counts valid indexes apart: a CREATE INDEX CONCURRENTLY
	// that failed or was cancelled leaves an INVALID one, which no query
	// uses and which CREATE INDEX ... IF NOT EXISTS skips (DropIndex).
	IndexExists: `
SELECT COUNT(*) FILTER (WHERE i.indisvalid), COUNT(*)
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
JOIN pg_catalog.pg_class tc ON tc.oid = i.indrelid
JOIN pg_catalog.pg_namespace n ON n.oid = tc.relnamespace
WHERE n.nspname = COALESCE({{arg "schema"}}::text, current_schema())
  AND tc.relname = {{arg "table"}}::text AND ic.relname = {{arg "index"}}::text`,

	// Online builds indexes with CONCURRENTLY (store.IndexOptions.Online:
	// writes go on while it builds; never inside a transaction block).
	Indexes: store.IndexSQL{
		Claim: `CREATE INDEX {{template "concurrently" .}}IF NOT EXISTS {{.ClaimIndex}} ON {{.Table}} ({{range .Scope}}{{.}}, {{end}}({{template "order" .}}){{if .RunAt}}, ({{template "runat" .}}){{end}}) WHERE {{.Status}} = {{.Pending}}`,
		Token: `CREATE INDEX {{template "concurrently" .}}IF NOT EXISTS {{.TokenIndex}} ON {{.Table}} ({{.IndexCols}})`,
		Reap:  `CREATE INDEX {{template "concurrently" .}}IF NOT EXISTS {{.ReapIndex}} ON {{.Table}} ({{.IndexCols}})`,
		Scope: `CREATE INDEX {{template "concurrently" .}}IF NOT EXISTS {{.ScopeIndex}} ON {{.Table}} ({{.IndexCols}})`,
		Sched: `CREATE INDEX {{template "concurrently" .}}IF NOT EXISTS {{.SchedIndex}} ON {{.Table}} ({{.RunAt}}) WHERE {{.Status}} = {{.Pending}} AND {{.RunAt}} IS NOT NULL`,
	},
	DropIndex: `DROP INDEX {{template "concurrently" .}}IF EXISTS {{.IndexName}}`,

	Held: heldSQL,
}

// heldSQL is the held-transaction claim: FOR NO KEY UPDATE takes the
// weakest row lock that still conflicts with every other claim (FOR UPDATE
// SKIP LOCKED) and with writers' UPDATEs, while foreign keys that reference
// the row do not wait for it. PostgreSQL writes it as a tuple lock, not a
// new row version. The limits are set LOCAL, for this transaction only:
// idle in the transaction for the hold limit ends the session (a frozen or
// partitioned holder), and no statement or lock wait in it lasts longer.
var heldSQL = store.HeldSQL{
	Limit: `
SELECT set_config('idle_in_transaction_session_timeout', {{arg "hold_ms"}}, true),
       set_config('statement_timeout', {{arg "hold_ms"}}, true),
       set_config('lock_timeout', {{arg "hold_ms"}}, true)`,

	Claim: `
SELECT {{join .Returned}} FROM {{.Table}}
WHERE {{.Status}} = {{.Pending}}{{scope .Scope}}{{template "runnable" .}}{{if .From}} AND {{template "order" .}} > {{arg "from"}}{{end}}
ORDER BY {{template "order" .}} LIMIT {{arg "limit"}}
FOR NO KEY UPDATE SKIP LOCKED`,

	Read: `
SELECT {{join .Returned}} FROM {{.Table}} WHERE {{.ID}} {{keys}} ORDER BY {{.ID}}`,

	Attempts: `
SELECT {{.ID}}, {{if .Attempts}}COALESCE({{.Attempts}}, 0)::bigint{{else}}0::bigint{{end}} FROM {{.Table}} WHERE {{.ID}} {{keys}}`,

	// The acks are the store's (internal/store's heldAck).
}

// leaseSQL: every operation is one autocommit statement on the database
// clock. Expiries are strictly increasing, so a write always changes its row.
// Without an Owner column a lease is held by its stamp, the LockedAt value.
var leaseSQL = store.LeaseSQL{
	Acquire: `
UPDATE {{.Table}}
SET {{if .Owner}}{{.Owner}} = {{arg "owner"}}, {{end}}{{.LockedAt}} = {{template "locknow" .}}
    {{- if .ExpiresAt}}, {{.ExpiresAt}} = {{template "explater" .}}{{end}}
    {{- if .Fence}}, {{.Fence}} = COALESCE({{.Fence}}, 0) + 1{{end}}
WHERE {{.Key}} = {{arg "key"}}
  AND ({{if .Owner}}{{.Owner}} IS NULL OR {{end}}{{if .ExpiresAt}}{{.ExpiresAt}} IS NULL OR {{template "expgone" .}}{{else}}{{.LockedAt}} IS NULL OR {{.LockedAt}} < {{if .LockedAtPer}}{{template "eago" (tc .LockedAt .LockedAtPer "ttl" "slack")}}{{else}}now() - {{template "ttl"}} - {{template "slack"}}{{end}}{{end}})
RETURNING {{template "fence" .}}, {{template "expiry" .}}, {{template "stamp" .}}`,

	Insert: `
INSERT INTO {{.Table}} ({{.Key}}, {{.Owner}}, {{.LockedAt}}{{if .ExpiresAt}}, {{.ExpiresAt}}{{end}}{{if .Fence}}, {{.Fence}}{{end}})
VALUES ({{arg "key"}}, {{arg "owner"}}, {{template "locknow" .}}{{if .ExpiresAt}}, {{template "explater" .}}{{end}}{{if .Fence}}, 1{{end}})
ON CONFLICT ({{.Key}}) DO NOTHING
RETURNING {{template "fence" .}}, {{template "expiry" .}}, {{template "stamp" .}}`,

	Renew: `
UPDATE {{.Table}}
SET {{if .ExpiresAt -}}
      {{.LockedAt}} = {{template "locknow" .}}, {{.ExpiresAt}} = {{if .ExpiresAtPer}}GREATEST({{template "explater" .}}, COALESCE({{.ExpiresAt}}, 0)){{else}}GREATEST(now() + {{template "ttl"}}, {{.ExpiresAt}} + interval '1 microsecond'){{end}}
    {{- else if .LockedAtPer -}}
      {{.LockedAt}} = GREATEST({{template "locknow" .}}, COALESCE({{.LockedAt}}, 0))
    {{- else -}}
      {{.LockedAt}} = GREATEST(now(), {{.LockedAt}} + interval '1 microsecond')
    {{- end}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}
RETURNING {{template "fence" .}}, {{template "expiry" .}}, {{template "stamp" .}}`,

	Inspect: `
SELECT {{if .Owner}}{{.Owner}}{{else}}CAST({{template "stamp" .}} AS text){{end}}, {{template "fence" .}},
       {{if .ExpiresAt}}{{template "expus" .}}, {{template "expgone" .}}{{else}}{{template "expiry" .}}, COALESCE({{template "lockgone" .}}, false){{end}},
       {{if .TaskStatus}}CAST({{.TaskStatus}} AS text){{else}}NULL::text{{end}}
FROM {{.Table}} WHERE {{.Key}} = {{arg "key"}}`,

	// Held reads the expiry index in order (held leases only have an
	// expiry).
	// Without an ExpiresAt column it reads the leases in LockedAt order.
	Held: `{{if .ExpiresAt}}
SELECT {{.Key}}, {{if .Owner}}{{.Owner}}{{else}}CAST({{template "stamp" .}} AS text){{end}}, {{template "fence" .}},
       {{template "expus" .}}, GREATEST({{if .ExpiresAtPer}}{{template "eleft" (tc .ExpiresAt .ExpiresAtPer)}}{{else}}CAST(EXTRACT(EPOCH FROM ({{.ExpiresAt}} - now())) * 1000000 AS bigint){{end}}, 0),
       {{template "expgone" .}}
FROM {{.Table}} WHERE {{.ExpiresAt}} IS NOT NULL{{if .Owner}} AND {{.Owner}} IS NOT NULL{{end}}
ORDER BY {{.ExpiresAt}} LIMIT {{arg "limit"}}{{else}}
SELECT {{.Key}}, {{if .Owner}}{{.Owner}}{{else}}CAST({{template "stamp" .}} AS text){{end}}, {{template "fence" .}},
       {{template "expiry" .}}, GREATEST({{template "expiry" .}} - {{template "usnow"}}, 0),
       {{template "lockgone" .}}
FROM {{.Table}} WHERE {{.LockedAt}} IS NOT NULL{{if .Owner}} AND {{.Owner}} IS NOT NULL{{end}}
ORDER BY {{.LockedAt}} LIMIT {{arg "limit"}}{{end}}`,

	Reap: `
WITH cl_c AS {{template "materialized"}}(
  SELECT {{.Key}} FROM {{.Table}}
  WHERE {{.Owner}} IS NOT NULL AND {{template "expgone" .}}
  ORDER BY {{.ExpiresAt}} LIMIT {{arg "limit"}}
  FOR UPDATE SKIP LOCKED)
UPDATE {{.Table}} SET {{.Owner}} = NULL, {{.ExpiresAt}} = NULL
WHERE {{template "locked" .Key}} AND {{.Owner}} IS NOT NULL AND {{template "expgone" .}}`,

	Columns: claimSQL.Columns,
}

// scheduleSQL: the schedule statements are the store's, with this
// engine's clock in microseconds, its test of a live lease, and ON
// CONFLICT for a job row made twice. now() is the start of the
// transaction, so a claim's window is tested at its BEGIN.
var scheduleSQL = store.ScheduleSQL{
	Common: `
{{- define "usnow"}}CAST(EXTRACT(EPOCH FROM now()) * 1000000 AS bigint){{end}}
{{- define "live"}}{{.ExpiresAt}} >= now() - ({{arg "slack"}}::bigint * interval '1 microsecond'){{end}}
{{- define "keepfirst"}}ON CONFLICT ({{.Job}}) DO NOTHING{{end}}`,
	Columns: claimSQL.Columns,
}

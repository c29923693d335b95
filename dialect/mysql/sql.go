package mysql

import "github.com/claimlock/claimlock/internal/store"

// The statements below are text/template sources over store.ClaimNames and
// store.ClaimVariant, or store.LeaseNames (see dialect/postgres/sql.go for
// the conventions). The database clock is UTC_TIMESTAMP(6), whatever the
// session time_zone; times are read as integer microseconds since the epoch,
// so the dialect depends neither on the DSN's parseTime nor on its loc.
// MySQL has no UPDATE ... RETURNING: claims are marked and then read back by
// token, and lease writes are read back by key and owner.
//
// A time column holding integer unix time (the names' ...Per fields, "per"
// its unit in microseconds) is written as the clock's microseconds divided
// by its unit, rounded down for claim and lock times ("enow") and up for
// expiries and run-at times ("elater"), and compared with the clock's now
// minus a duration, divided and rounded down ("eago"): a stored time up to
// one unit early never makes a claim or lease look older than it is.

const common = `
{{- define "now"}}UTC_TIMESTAMP(6){{end}}
{{- define "usnow"}}TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)){{end}}
{{- define "enow"}}({{template "usnow"}} DIV {{.Per}}){{end}}
{{- define "eago"}}(({{template "usnow"}}{{range .Args}} - {{arg .}}{{end}}) DIV {{.Per}}){{end}}
{{- define "elater"}}(({{template "usnow"}}{{range .Args}} + {{arg .}}{{end}} + {{.Per}} - 1) DIV {{.Per}}){{end}}
{{- define "eus"}}({{.C}} * {{.Per}}){{end}}
{{- define "eage"}}({{template "usnow"}} - {{.C}} * {{.Per}}){{end}}
{{- define "eleft"}}({{.C}} * {{.Per}} - {{template "usnow"}}){{end}}
{{- define "claimnow"}}{{if .ClaimedAtPer}}{{template "enow" (tc .ClaimedAt .ClaimedAtPer)}}{{else}}UTC_TIMESTAMP(6){{end}}{{end}}
{{- define "future"}}{{.RunAt}} > {{if .RunAtPer}}{{template "enow" (tc .RunAt .RunAtPer)}}{{else}}UTC_TIMESTAMP(6){{end}}{{end}}
{{- define "locknow"}}{{if .LockedAtPer}}{{template "enow" (tc .LockedAt .LockedAtPer)}}{{else}}UTC_TIMESTAMP(6){{end}}{{end}}
{{- define "explater"}}{{if .ExpiresAtPer}}{{template "elater" (tc .ExpiresAt .ExpiresAtPer "ttl")}}{{else}}UTC_TIMESTAMP(6) + INTERVAL {{arg "ttl"}} MICROSECOND{{end}}{{end}}
{{- define "lockus"}}{{if .LockedAtPer}}{{template "eus" (tc .LockedAt .LockedAtPer)}}{{else}}{{template "us" .LockedAt}}{{end}}{{end}}
{{- define "lockexp"}}{{if .LockedAtPer}}({{.LockedAt}} * {{.LockedAtPer}} + {{arg "ttl"}}){{else}}TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {{.LockedAt}} + INTERVAL {{arg "ttl"}} MICROSECOND){{end}}{{end}}
{{- define "lockgone"}}{{.LockedAt}} < {{if .LockedAtPer}}{{template "eago" (tc .LockedAt .LockedAtPer "ttl" "slack")}}{{else}}UTC_TIMESTAMP(6) - INTERVAL {{arg "ttl"}} MICROSECOND - INTERVAL {{arg "slack"}} MICROSECOND{{end}}{{end}}
{{- define "expus"}}{{if .ExpiresAtPer}}{{template "eus" (tc .ExpiresAt .ExpiresAtPer)}}{{else}}{{template "us" .ExpiresAt}}{{end}}{{end}}
{{- define "expgone"}}{{.ExpiresAt}} < {{if .ExpiresAtPer}}{{template "eago" (tc .ExpiresAt .ExpiresAtPer "slack")}}{{else}}UTC_TIMESTAMP(6) - INTERVAL {{arg "slack"}} MICROSECOND{{end}}{{end}}
{{- define "maxatt"}}{{arg "max_attempts"}}{{end}}
{{- define "online"}}{{if .Online}} ALGORITHM=INPLACE LOCK=NONE{{end}}{{end}}
{{- define "us"}}TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {{.}}){{end}}
{{- define "held"}}{{if .Owner}}{{.Owner}} = {{arg "owner"}}{{else}}{{template "lockus" .}} = {{arg "stamp"}}{{end}}{{end}}
{{- define "free"}}{{if .Owner}}{{.Owner}} = NULL{{else}}{{.LockedAt}} = NULL{{end}}{{if .ExpiresAt}}, {{.ExpiresAt}} = NULL{{end}}{{end}}
{{- define "runnable"}}{{if .RunAt}} AND ({{.RunAt}} IS NULL OR {{.RunAt}} <= {{if .RunAtPer}}{{template "enow" (tc .RunAt .RunAtPer)}}{{else}}UTC_TIMESTAMP(6){{end}}){{end}}{{end}}
{{- define "delayed"}}{{if .RunAtPer}}{{template "elater" (tc .RunAt .RunAtPer "delay")}}{{else}}UTC_TIMESTAMP(6) + INTERVAL {{arg "delay"}} MICROSECOND{{end}}{{end}}
{{- define "filter"}}{{if .Scoped}}{{scope .Scope}}{{end}}{{if .ByKeys}} AND {{.ID}} {{keys}}{{end}}{{end}}
{{- define "until"}}('1970-01-01 00:00:00' + INTERVAL {{arg "hold"}} MICROSECOND){{end}}
{{- define "hold"}}{{if .ExpiresAtPer -}}
  {{.Owner}} = IF({{arg "hold"}} > {{template "usnow"}}, {{.Owner}}, NULL), {{.ExpiresAt}} = IF({{arg "hold"}} > {{template "usnow"}}, ({{arg "hold"}} + {{.ExpiresAtPer}} - 1) DIV {{.ExpiresAtPer}}, NULL)
  {{- else -}}
  {{.Owner}} = IF({{template "until"}} > UTC_TIMESTAMP(6), {{.Owner}}, NULL), {{.ExpiresAt}} = IF({{template "until"}} > UTC_TIMESTAMP(6), {{template "until"}}, NULL)
  {{- end}}{{end}}
{{- define "hint"}}{{if .Hint}} FORCE INDEX ({{.ClaimIndex}}){{end}}{{end}}
{{- define "keyhint"}}{{if .KeyHint}} FORCE INDEX (PRIMARY){{end}}{{end}}
{{- define "claimset"}}{{.Status}} = {{.Processing}}, {{.Token}} = {{arg "token"}}, {{.ClaimedAt}} = {{template "claimnow" .}}
  {{- if .Attempts}}, {{.Attempts}} = COALESCE({{.Attempts}}, 0) + 1{{end}}
  {{- if .Worker}}, {{.Worker}} = {{arg "worker"}}{{end}}{{end}}
{{- define "stale"}}{{.Status}} = {{.Processing}} AND {{.ClaimedAt}} < {{if .ClaimedAtPer}}{{template "eago" (tc .ClaimedAt .ClaimedAtPer "timeout")}}{{else}}UTC_TIMESTAMP(6) - INTERVAL {{arg "timeout"}} MICROSECOND{{end}}
  {{- if .Park}} AND COALESCE({{.Attempts}}, 0) >= {{template "maxatt" .}}{{else if .Below}} AND COALESCE({{.Attempts}}, 0) < {{arg "below"}}{{end}}
  {{- if .Scoped}}{{scope .Scope}}{{end}}{{end}}
{{- define "reapset"}}{{.Status}} = {{if .Park}}{{.Failed}}{{else}}{{.Pending}}{{end}}, {{.Token}} = NULL{{if not .Park}}{{template "cleartime" .}}{{end}}{{end}}
{{- define "undo"}}{{if .Attempts}}, {{.Attempts}} = GREATEST({{.Attempts}}, 1) - 1{{end}}{{end}}
`

// Claim statements of the claimer in claim.go (ClaimSQL's Mark,
// SkipLockedPick and SkipLockedMark). FORCE INDEX (Hint): MariaDB (10.11
// measured) does not pick the claim index for an UPDATE that changes one of
// its columns; it range-scans the reaper's (status, claimed_at) index and
// sorts every pending row, locking all of them (100k pending rows: ~90 ms
// per claim, and every concurrent claim waits). The hint gives a range scan
// of the claim index. The UPDATE orders by the claim index's own columns,
// (scope..., status, key), which for one scope and one status is key order:
// with a bare ORDER BY key MariaDB 10.11 sorts instead of reading the index
// in order whenever the connection's collation differs from the status
// column's (5,000 pending rows: 13 ms instead of 2 ms per claim). The SKIP
// LOCKED SELECT is the other way round: ORDER BY key reads the index in
// order there, and the long form sorts. From starts the claim above the
// rotating key cursor (internal/store/cursor.go); "after" is its key.
const (
	claimUpdate = `
UPDATE {{.Table}}{{template "hint" .}} SET {{template "claimset" .}}
WHERE {{.Status}} = {{.Pending}}{{scope .Scope}}{{if .From}} AND {{.ID}} > {{arg "after"}}{{end}}{{template "runnable" .}}
ORDER BY {{range .Scope}}{{.}}, {{end}}{{.Status}}, {{.ID}} LIMIT {{arg "limit"}}`

	claimSkipSelect = `
SELECT {{.ID}} FROM {{.Table}}{{template "hint" .}}
WHERE {{.Status}} = {{.Pending}}{{scope .Scope}}{{if .From}} AND {{.ID}} > {{arg "after"}}{{end}}{{template "runnable" .}}
ORDER BY {{.ID}} LIMIT {{arg "limit"}} FOR UPDATE SKIP LOCKED`

	claimSkipUpdate = `
UPDATE {{.Table}} SET {{template "claimset" .}} WHERE {{.Status}} = {{.Pending}} AND {{.ID}} {{keys}}`
)

var claimSQL = store.ClaimSQL{
	Common: common,
	// No RETURNING: the claimer (claim.go) marks rows, then reads them
	// back by token.
	Mark: claimUpdate, SkipLockedPick: claimSkipSelect, SkipLockedMark: claimSkipUpdate,
	ReadBack: `
SELECT {{join .Returned}} FROM {{.Table}} WHERE {{.Token}} = {{arg "token"}}{{if .ByKeys}} AND {{.ID}} {{keys}}{{end}} ORDER BY {{.ID}}`,

	// Every ack clears the token of each row it matches, so its affected
	// rows are matched rows whatever the DSN's clientFoundRows.
	//
	// The statements that find rows by a list of keys (Ack, AckLock and
	// Release of listed rows) name the primary key (KeyHint) once
	// VerifySchema found the key column to be the primary key. Without the hint
	// MariaDB 10.11 read a small table whole for an ack of ten rows (35
	// rows: a scan of the primary key rather than ten lookups), and an ack
	// in a caller's REPEATABLE READ transaction (AckTx) keeps a lock on
	// every row it reads until the caller commits: the dead worker's stale
	// rows too, which a sweep then skipped (TestReapBehindLiveBatch).
	// A deleting ack (Delete) is a multi-table DELETE, the form that takes
	// an index hint.
	Ack: `
{{- if .Delete}}
DELETE {{.Table}} FROM {{.Table}}{{template "keyhint" .}}
{{- else}}
UPDATE {{.Table}}{{template "keyhint" .}} SET {{.Status}} = {{.Target}}, {{.Token}} = NULL{{if .Undo}}{{template "undo" .}}{{end}}{{if eq .Target .Pending}}{{template "cleartime" .}}{{end}}{{template "ackmark" .}}
{{- end}}
WHERE {{.Token}} = {{arg "token"}} AND {{.ID}} {{keys}}`,

	// Archive and Purge move rows an ack has just marked done and holds
	// locked, by key.
	Archive: `
INSERT INTO {{.Archive}} SELECT * FROM {{.Table}}
WHERE {{.ID}} {{keys}} AND {{.Status}} = {{.Done}} AND {{.Token}} IS NULL`,

	Purge: `
DELETE FROM {{.Table}}
WHERE {{.ID}} {{keys}} AND {{.Status}} = {{.Done}} AND {{.Token}} IS NULL`,

	AckLock: `
SELECT {{.ID}}, {{or .Version "0"}}, {{or .Attempts "0"}} FROM {{.Table}}{{template "keyhint" .}}
WHERE {{.Token}} = {{arg "token"}} AND {{.ID}} {{keys}}
FOR UPDATE`,

	// A heartbeat on a DATETIME column without microseconds can round to
	// the old value, and MySQL reports such a row as unchanged; and UPDATE
	// has no RETURNING: the keys still held are read instead
	// (HeartbeatHeld), so that a batch loses only the rows missing.
	Heartbeat: `
UPDATE {{.Table}} SET {{.ClaimedAt}} = {{if .ClaimedAtPer}}{{template "claimnow" .}}{{else}}GREATEST(UTC_TIMESTAMP(6), COALESCE({{.ClaimedAt}} + INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6))){{end}}
WHERE {{.Token}} = {{arg "token"}} AND {{.Status}} = {{.Processing}}`,

	HeartbeatHeld: `
SELECT {{.ID}} FROM {{.Table}} WHERE {{.Token}} = {{arg "token"}} AND {{.Status}} = {{.Processing}}`,

	Release: `
UPDATE {{.Table}}{{if .ByKeys}}{{template "keyhint" .}}{{end}} SET {{.Status}} = {{.Pending}}, {{.Token}} = NULL{{template "undo" .}}{{template "cleartime" .}}{{if .Snooze}}, {{.RunAt}} = {{template "delayed" .}}{{end}}
WHERE {{.Token}} = {{arg "token"}} AND {{.Status}} = {{.Processing}}{{if .ByKeys}} AND {{.ID}} {{keys}}{{end}}`,

	// Operator actions take at most "limit" rows per statement, in no
	// particular order (the rows they change leave the set), through the
	// claim index (scope..., status, key) or the reap index (status,
	// claimed_at).
	Unpark: `
UPDATE {{.Table}}
SET {{.Status}} = {{.Pending}}, {{.Token}} = NULL{{template "cleartime" .}}
    {{- if .Error}}, {{.Error}} = NULL{{end}}{{if .RunAt}}, {{.RunAt}} = NULL{{end}}{{if and .Reset .Attempts}}, {{.Attempts}} = 0{{end}}
WHERE {{.Status}} = {{.Failed}}{{template "filter" .}}
LIMIT {{arg "limit"}}`,

	RetryNow: `
UPDATE {{.Table}} SET {{.RunAt}} = NULL
WHERE {{.Status}} = {{.Pending}} AND {{template "future" .}}{{template "filter" .}}
LIMIT {{arg "limit"}}`,

	List: `
SELECT {{.ID}}, COALESCE({{.Token}}, ''), {{if .Attempts}}COALESCE({{.Attempts}}, 0){{else}}0{{end}},
       COALESCE(GREATEST({{if .ClaimedAtPer}}{{template "eage" (tc .ClaimedAt .ClaimedAtPer)}}{{else}}TIMESTAMPDIFF(MICROSECOND, {{.ClaimedAt}}, UTC_TIMESTAMP(6)){{end}}, 0), -1),
       {{if .RunAt}}COALESCE(GREATEST({{if .RunAtPer}}{{template "eleft" (tc .RunAt .RunAtPer)}}{{else}}TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), {{.RunAt}}){{end}}, 0), 0){{else}}0{{end}},
       {{if .Error}}COALESCE({{.Error}}, ''){{else}}''{{end}}{{if .Worker}}, COALESCE({{.Worker}}, ''){{end}}
FROM {{.Table}}
{{- if eq .Set 0}}
WHERE {{.Status}} = {{.Failed}}{{template "filter" .}} ORDER BY {{.ClaimedAt}}
{{- else if eq .Set 1}}
WHERE {{.Status}} = {{.Processing}} AND {{.ClaimedAt}} <= {{if .ClaimedAtPer}}{{template "eago" (tc .ClaimedAt .ClaimedAtPer "older")}}{{else}}UTC_TIMESTAMP(6) - INTERVAL {{arg "older"}} MICROSECOND{{end}}{{template "filter" .}} ORDER BY {{.ClaimedAt}}
{{- else}}
WHERE {{.Status}} = {{.Pending}} AND {{template "future" .}}{{template "filter" .}} ORDER BY {{.RunAt}}
{{- end}}
LIMIT {{arg "limit"}}`,

	// Reaps take the oldest stale rows first, in the order of the reap
	// index (status, claimed_at, and the key InnoDB appends to it), written
	// out in full like the claim's: with ORDER BY key MariaDB 10.11 reads
	// every stale row and sorts them (a backlog of 100,000 stale rows: 350
	// ms per sweep instead of 3 ms, locking all of them), and with ORDER BY
	// claimed_at alone it still sorts when the connection's collation
	// differs from the status column's.
	// Reap is the form for servers without SKIP LOCKED (MySQL 5.7,
	// MariaDB before 10.6). Elsewhere a sweep locks the stale rows' keys with
	// SKIP LOCKED and updates those (ReapLock, ReapKeys): an UPDATE ... LIMIT
	// that meets a row another session has locked waits for it (50 s by
	// default, then 1205), so one locked row stopped every sweep.
	Reap: `
UPDATE {{.Table}} SET {{template "reapset" .}}
WHERE {{template "stale" .}}
ORDER BY {{.Status}}, {{.ClaimedAt}}, {{.ID}} LIMIT {{arg "limit"}}`,

	// The SELECT orders by claimed_at alone: unlike the UPDATE above it
	// then reads the reap index in order whatever the connection's
	// collation, and the long form sorts.
	ReapLock: `
SELECT {{.ID}} FROM {{.Table}}
WHERE {{template "stale" .}}
ORDER BY {{.ClaimedAt}} LIMIT {{arg "limit"}}
FOR UPDATE SKIP LOCKED`,

	// ReapKeys updates the rows ReapLock locked by their keys alone. With
	// the staleness test repeated here MariaDB 10.11 read them through the
	// reap index instead of the primary key once the table had a history
	// of done rows, and an UPDATE reading a range locks the record after
	// it: the live batch's (status, claimed_at) entry, which its ack or
	// heartbeat in flight holds. The sweep then waited for that lock (1205
	// after innodb_lock_wait_timeout) and returned none of the stale rows
	// (TestReapBehindLiveBatch). The test is not needed: ReapLock's locking
	// read found these rows stale in their latest version, and its locks
	// keep them so until this transaction ends.
	ReapKeys: `
UPDATE {{.Table}} SET {{template "reapset" .}}
WHERE {{.ID}} {{keys}}`,

	Stats: `
SELECT COALESCE(SUM({{.Status}} = {{.Pending}}), 0),
       COALESCE(SUM({{.Status}} = {{.Processing}}), 0),
       COALESCE(SUM({{.Status}} = {{.Done}}), 0),
       {{if .Failed}}COALESCE(SUM({{.Status}} = {{.Failed}}), 0){{else}}0{{end}},
       COUNT(*),
       {{if .ClaimedAtPer}}{{template "eage" (tc (printf "MIN(CASE WHEN %s = %s THEN %s END)" .Status .Processing .ClaimedAt) .ClaimedAtPer)}}
       {{- else}}TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN {{.Status}} = {{.Processing}} THEN {{.ClaimedAt}} END), UTC_TIMESTAMP(6)){{end}},
       {{if and .CreatedAt .CreatedAtPer}}{{template "eage" (tc (printf "MIN(CASE WHEN %s = %s THEN %s END)" .Status .Pending .CreatedAt) .CreatedAtPer)}}
       {{- else if .CreatedAt}}TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN {{.Status}} = {{.Pending}} THEN {{.CreatedAt}} END), UTC_TIMESTAMP(6)){{else}}NULL{{end}}
FROM {{.Table}}{{if .Scoped}} WHERE TRUE{{scope .Scope}}{{end}}`,

	// Columns reads the table's columns, and whether the primary key is
	// one column, by the table's name only: a subquery correlated with the
	// columns made MariaDB 10.11 read the catalog of every database (138
	// ms instead of 25 with 150 small databases on the server).
	Columns: `
SELECT c.column_name, COALESCE(c.character_maximum_length, 0), c.data_type, COALESCE(c.datetime_precision, -1),
       COALESCE(c.collation_name, ''), c.is_nullable = 'YES', c.column_type, c.column_key = 'PRI' AND pk.n = 1
FROM information_schema.columns c
CROSS JOIN (SELECT COUNT(*) AS n FROM information_schema.columns
            WHERE table_schema = COALESCE({{arg "schema"}}, DATABASE()) AND table_name = {{arg "table"}} AND column_key = 'PRI') pk
WHERE c.table_schema = COALESCE({{arg "schema"}}, DATABASE()) AND c.table_name = {{arg "table"}}`,

	IndexExists: `
SELECT COUNT(*), COUNT(*) FROM information_schema.statistics
WHERE table_schema = COALESCE({{arg "schema"}}, DATABASE()) AND table_name = {{arg "table"}} AND index_name = {{arg "index"}}`,

	// MySQL has no CREATE INDEX IF NOT EXISTS; ExecDDL skips an index that
	// exists already. No scope index: the claim index (scope..., status,
	// key) serves scoped Stats, and MariaDB 10.11 did not use a (scope...,
	// status, claimed_at) index where it would help: a scoped sweep over a
	// backlog still read its scope's processing rows through the claim
	// index and sorted them (to its UPDATE optimizer both ranges hold the
	// same rows), while the unhinted claim took the new index instead of
	// the claim index and sorted every pending row of the scope.
	//
	// Online builds with InnoDB's online DDL (store.IndexOptions.Online),
	// which fails rather than locking the table where it cannot build so.
	Indexes: store.IndexSQL{
		Claim: `CREATE INDEX {{.ClaimIndex}} ON {{.Table}} ({{.IndexCols}}){{template "online" .}}`,
		Token: `CREATE INDEX {{.TokenIndex}} ON {{.Table}} ({{.IndexCols}}){{template "online" .}}`,
		Reap:  `CREATE INDEX {{.ReapIndex}} ON {{.Table}} ({{.IndexCols}}){{template "online" .}}`,
		Sched: `CREATE INDEX {{.SchedIndex}} ON {{.Table}} ({{.IndexCols}}){{template "online" .}}`,
	},

	Held: heldSQL,
}

// leaseSQL: every write changes its row (a new owner, a later time, the
// fence), so one affected row means written on any DSN; renewals are
// decided by the read-back, not by affected rows.
var leaseSQL = store.LeaseSQL{
	Common: common,
	Acquire: `
UPDATE {{.Table}}
SET {{if .Owner}}{{.Owner}} = {{arg "owner"}}, {{end}}{{.LockedAt}} = {{template "locknow" .}}
    {{- if .ExpiresAt}}, {{.ExpiresAt}} = {{template "explater" .}}{{end}}
    {{- if .Fence}}, {{.Fence}} = COALESCE({{.Fence}}, 0) + 1{{end}}
WHERE {{.Key}} = {{arg "key"}}
  AND ({{if .Owner}}{{.Owner}} IS NULL OR {{end}}{{if .ExpiresAt}}{{.ExpiresAt}} IS NULL OR {{template "expgone" .}}
       {{- else}}{{.LockedAt}} IS NULL OR {{.LockedAt}} < {{if .LockedAtPer}}{{template "eago" (tc .LockedAt .LockedAtPer "ttl" "slack")}}{{else}}UTC_TIMESTAMP(6) - INTERVAL {{arg "ttl"}} MICROSECOND - INTERVAL {{arg "slack"}} MICROSECOND{{end}}{{end}})`,

	// A plain INSERT: a duplicate key means someone else created the row
	// first. INSERT ... ON DUPLICATE KEY UPDATE would report 1 affected row
	// for an untouched duplicate on a DSN with clientFoundRows=true.
	Insert: `
INSERT INTO {{.Table}} ({{.Key}}, {{.Owner}}, {{.LockedAt}}{{if .ExpiresAt}}, {{.ExpiresAt}}{{end}}{{if .Fence}}, {{.Fence}}{{end}})
VALUES ({{arg "key"}}, {{arg "owner"}}, {{template "locknow" .}}{{if .ExpiresAt}}, {{template "explater" .}}{{end}}{{if .Fence}}, 1{{end}})`,

	// Without an Owner column the read-back runs in the acquiring or
	// renewing transaction, which holds the row: see store.Leases.
	ReadBack: `
SELECT {{if .Fence}}COALESCE({{.Fence}}, 0){{else}}0{{end}},
       {{if .ExpiresAt}}{{template "expus" .}}{{else if .LockedAtPer}}({{.LockedAt}} * {{.LockedAtPer}} + {{arg "ttl"}}){{else}}TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {{.LockedAt}} + INTERVAL {{arg "ttl"}} MICROSECOND){{end}},
       {{template "lockus" .}}
FROM {{.Table}} WHERE {{.Key}} = {{arg "key"}}{{if .Owner}} AND {{.Owner}} = {{arg "owner"}}{{end}}`,

	Renew: `
UPDATE {{.Table}}
SET {{if .ExpiresAt -}}
      {{.LockedAt}} = {{template "locknow" .}},
      {{.ExpiresAt}} = {{if .ExpiresAtPer}}GREATEST({{template "explater" .}}, COALESCE({{.ExpiresAt}}, 0)){{else}}GREATEST(UTC_TIMESTAMP(6) + INTERVAL {{arg "ttl"}} MICROSECOND, COALESCE({{.ExpiresAt}} + INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6))){{end}}
    {{- else if .LockedAtPer -}}
      {{.LockedAt}} = GREATEST({{template "locknow" .}}, COALESCE({{.LockedAt}}, 0))
    {{- else -}}
      {{.LockedAt}} = GREATEST(UTC_TIMESTAMP(6), COALESCE({{.LockedAt}} + INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6)))
    {{- end}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}`,

	Inspect: `
SELECT {{if .Owner}}{{.Owner}}{{else}}CAST({{template "lockus" .}} AS CHAR){{end}}, {{if .Fence}}COALESCE({{.Fence}}, 0){{else}}0{{end}},
       {{if .ExpiresAt}}{{template "expus" .}}, {{template "expgone" .}}{{else}}{{template "lockexp" .}}, COALESCE({{template "lockgone" .}}, FALSE){{end}},
       {{if .TaskStatus}}CAST({{.TaskStatus}} AS CHAR){{else}}NULL{{end}}
FROM {{.Table}} WHERE {{.Key}} = {{arg "key"}}`,

	// Held reads the expiry index in order (held leases only have an
	// expiry; IS NOT NULL keeps the free ones, NULL and first in MySQL's
	// order, out of the range).
	// Without an ExpiresAt column it reads the leases in LockedAt order.
	Held: `{{if .ExpiresAt}}
SELECT {{.Key}}, {{if .Owner}}{{.Owner}}{{else}}CAST({{template "lockus" .}} AS CHAR){{end}}, {{if .Fence}}COALESCE({{.Fence}}, 0){{else}}0{{end}},
       {{template "expus" .}}, GREATEST({{if .ExpiresAtPer}}{{template "eleft" (tc .ExpiresAt .ExpiresAtPer)}}{{else}}TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), {{.ExpiresAt}}){{end}}, 0),
       {{template "expgone" .}}
FROM {{.Table}} WHERE {{.ExpiresAt}} IS NOT NULL{{if .Owner}} AND {{.Owner}} IS NOT NULL{{end}}
ORDER BY {{.ExpiresAt}} LIMIT {{arg "limit"}}{{else}}
SELECT {{.Key}}, {{if .Owner}}{{.Owner}}{{else}}CAST({{template "lockus" .}} AS CHAR){{end}}, {{if .Fence}}COALESCE({{.Fence}}, 0){{else}}0{{end}},
       {{template "lockexp" .}}, GREATEST({{template "lockexp" .}} - {{template "usnow"}}, 0),
       {{template "lockgone" .}}
FROM {{.Table}} WHERE {{.LockedAt}} IS NOT NULL{{if .Owner}} AND {{.Owner}} IS NOT NULL{{end}}
ORDER BY {{.LockedAt}} LIMIT {{arg "limit"}}{{end}}`,

	// The oldest expiries first, in the order of the expiry index.
	Reap: `
UPDATE {{.Table}} SET {{.Owner}} = NULL, {{.ExpiresAt}} = NULL
WHERE {{.Owner}} IS NOT NULL AND {{template "expgone" .}}
ORDER BY {{.ExpiresAt}}, {{.Key}} LIMIT {{arg "limit"}}`,

	Columns: claimSQL.Columns,
}

// heldSQL is the held-transaction claim (MariaDB 10.6+, MySQL 8.0.1+):
// InnoDB keeps the row locks of FOR UPDATE SKIP LOCKED in memory and writes
// nothing. The hold limit is set on the session, the only scope MySQL has:
// wait_timeout closes a connection idle for that long (a frozen or
// partitioned holder: the server rolls the transaction back), and lock
// waits in the transaction last no longer. Unlimit restores the server's
// defaults before COMMIT or ROLLBACK, so the connection goes back to the
// pool as it came. The claim reads the claim index in key order, as the
// SKIP LOCKED claim does, and always names it: a plan that sorts locks
// every row it reads before the LIMIT (MariaDB 10.11 chose the reap index
// and a sort, and a second holder found every pending row locked), so the
// held claim needs the recommended claim index and fails without it.
var heldSQL = store.HeldSQL{
	// A locking scan that meets a row another transaction locks checks
	// the lock and skips it, one row at a time: claims that started
	// together from one cursor skipped each other's rows all along
	// (docs/performance.md, "Held claims take turns").
	Turns: true,

	Limit: `SET SESSION wait_timeout = {{arg "hold_s"}}, innodb_lock_wait_timeout = {{arg "hold_s"}}`,

	Unlimit: `SET SESSION wait_timeout = @@GLOBAL.wait_timeout, innodb_lock_wait_timeout = @@GLOBAL.innodb_lock_wait_timeout`,

	Claim: `
SELECT {{join .Returned}} FROM {{.Table}} FORCE INDEX ({{.ClaimIndex}})
WHERE {{.Status}} = {{.Pending}}{{scope .Scope}}{{if .From}} AND {{.ID}} > {{arg "from"}}{{end}}{{template "runnable" .}}
ORDER BY {{.ID}} LIMIT {{arg "limit"}} FOR UPDATE SKIP LOCKED`,

	Read: `
SELECT {{join .Returned}} FROM {{.Table}} WHERE {{.ID}} {{keys}} ORDER BY {{.ID}}`,

	Attempts: `
SELECT {{.ID}}, {{if .Attempts}}COALESCE({{.Attempts}}, 0){{else}}0{{end}} FROM {{.Table}} WHERE {{.ID}} {{keys}}`,

	// The look reads the claim index as the claim does, without locks: a
	// locking scan from the lowest key locks and unlocks each
	// delete-marked entry it passes, the entries of the rows acked since
	// purge last ran, and after a drain every empty claim walked all of
	// them (half a second and more each at 100,000 rows, 16 at once).
	Look: `
SELECT {{.ID}} FROM {{.Table}} FORCE INDEX ({{.ClaimIndex}})
WHERE {{.Status}} = {{.Pending}}{{scope .Scope}}{{template "runnable" .}}
ORDER BY {{.ID}} LIMIT 1`,

	// The acks are the store's (internal/store's heldAck), naming the
	// primary key (KeyHint) as Ack does once VerifySchema found the key
	// column to be the primary key. Without the hint, an ack by delete of a
	// batch near a drain's end read the pending rows through the reap
	// index, status first, rather than its 100 keys, locking each row and
	// waiting for those other batches held (4,863 row locks in one): held
	// batches deadlocked and rolled back, 30 and 136 in two claimbench
	// runs at 16 workers. A deleting ack is a multi-table DELETE, the form
	// that takes an index hint.
	Ack: `
{{- if .Delete}}
DELETE {{.Table}} FROM {{.Table}}{{template "keyhint" .}} WHERE {{.ID}} {{keys}} AND {{.Status}} = {{.Pending}}
{{- else}}
UPDATE {{.Table}}{{template "keyhint" .}}
SET {{.Status}} = {{.Target}}
    {{- if and .Attempts (ne .Target .Done)}}, {{.Attempts}} = COALESCE({{.Attempts}}, 0) + 1{{end}}
    {{- template "ackmark" .}}
WHERE {{.ID}} {{keys}} AND {{.Status}} = {{.Pending}}
{{- end}}`,
}

// scheduleSQL: the schedule statements are the store's, with this
// engine's clock in microseconds, its test of a live lease, and an ON
// DUPLICATE KEY clause that leaves a job row made twice as it was.
var scheduleSQL = store.ScheduleSQL{
	Common: `
{{- define "usnow"}}TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)){{end}}
{{- define "live"}}{{.ExpiresAt}} >= UTC_TIMESTAMP(6) - INTERVAL {{arg "slack"}} MICROSECOND{{end}}
{{- define "keepfirst"}}ON DUPLICATE KEY UPDATE {{.Job}} = {{.Job}}{{end}}`,
	Columns: claimSQL.Columns,
}

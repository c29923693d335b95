package sqlite

import "github.com/claimlock/claimlock/internal/store"

// The statements below are text/template sources over store.ClaimNames and
// store.ClaimVariant, or store.LeaseNames (see dialect/postgres/sql.go for
// the conventions). Times are integer milliseconds since the Unix epoch from
// SQLite's own clock; ages and expiries are reported in microseconds. With
// ClaimTable.TextTimes the claimed-at and created-at columns hold SQLite's
// text dates instead ('YYYY-MM-DD HH:MM:SS.SSS', UTC), which compare in time
// order as text; with LeaseTable.TextTimes the lock and expiry columns do.
// "claimnow" is the time now as the table's time columns hold it.
//
// A column holding unix seconds (the names' ...Per fields: "1000", its
// unit in milliseconds; unix milliseconds are SQLite's own convention) is
// written as the clock's milliseconds divided by 1000, rounded down for
// claim and lock times ("enow") and up for expiries and run-at times
// ("elater"), and compared with the clock's now minus a duration, divided
// and rounded down ("eago"): a stored time up to a second early never makes
// a claim or lease look older than it is.

const common = `
{{- define "now"}}CAST(unixepoch('subsec') * 1000 AS INTEGER){{end}}
{{- define "maxatt"}}{{arg "max_attempts"}}{{end}}
{{- define "enow"}}({{template "now"}} / {{.Per}}){{end}}
{{- define "eago"}}(({{template "now"}}{{range .Args}} - {{arg .}}{{end}}) / {{.Per}}){{end}}
{{- define "elater"}}(({{template "now"}}{{range .Args}} + {{arg .}}{{end}} + {{.Per}} - 1) / {{.Per}}){{end}}
{{- define "cnow"}}{{if .ClaimedAtPer}}{{template "enow" (tc .ClaimedAt .ClaimedAtPer)}}{{else}}{{template "claimnow" .}}{{end}}{{end}}
{{- define "runnow"}}{{if .RunAtPer}}{{template "enow" (tc .RunAt .RunAtPer)}}{{else}}{{template "claimnow" .}}{{end}}{{end}}
{{- define "locknow"}}{{if .LockedAtPer}}{{template "enow" (tc .LockedAt .LockedAtPer)}}{{else}}{{template "claimnow" .}}{{end}}{{end}}
{{- define "expgone"}}{{.ExpiresAt}} < {{if .ExpiresAtPer}}{{template "eago" (tc .ExpiresAt .ExpiresAtPer "slack")}}{{else}}{{template "graced" .}}{{end}}{{end}}
{{- define "claimnow"}}{{if .TextTimes}}strftime('%Y-%m-%d %H:%M:%f', 'now'){{else}}{{template "now"}}{{end}}{{end}}
{{- define "agepre"}}{{if .TextTimes}}CAST((julianday('now') - julianday({{else}}({{template "now"}} - ({{end}}{{end}}
{{- define "agepost"}}{{if .TextTimes}})) * 86400000000 AS INTEGER){{else}})) * 1000{{end}}{{end}}
{{- define "runnable"}}{{if .RunAt}} AND ({{.RunAt}} IS NULL OR {{.RunAt}} <= {{template "runnow" .}}){{end}}{{end}}
{{- define "delayed"}}{{if .RunAtPer}}{{template "elater" (tc .RunAt .RunAtPer "delay")}}{{else if .TextTimes}}strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || ({{arg "delay"}} / 1000.0) || ' seconds'){{else}}{{template "now"}} + {{arg "delay"}}{{end}}{{end}}
{{- define "filter"}}{{if .Scoped}}{{scope .Scope}}{{end}}{{if .ByKeys}} AND {{.ID}} {{keys}}{{end}}{{end}}
{{- define "future"}}{{.RunAt}} > {{template "runnow" .}}{{end}}
{{- define "ms"}}CAST(ROUND(unixepoch({{.}}, 'subsec') * 1000) AS INTEGER){{end}}
{{- define "lockms"}}{{if .LockedAtPer}}({{.LockedAt}} * {{.LockedAtPer}}){{else if .TextTimes}}{{template "ms" .LockedAt}}{{else}}{{.LockedAt}}{{end}}{{end}}
{{- define "expms"}}{{if .ExpiresAtPer}}({{.ExpiresAt}} * {{.ExpiresAtPer}}){{else if .TextTimes}}{{template "ms" .ExpiresAt}}{{else}}{{.ExpiresAt}}{{end}}{{end}}
{{- define "later"}}{{if .ExpiresAtPer}}{{template "elater" (tc .ExpiresAt .ExpiresAtPer "ttl")}}{{else if .TextTimes}}strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || ({{arg "ttl"}} / 1000.0) || ' seconds'){{else}}{{template "now"}} + {{arg "ttl"}}{{end}}{{end}}
{{- define "graced"}}{{if .TextTimes}}strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || ({{arg "slack"}} / 1000.0) || ' seconds'){{else}}{{template "now"}} - {{arg "slack"}}{{end}}{{end}}
{{- define "held"}}{{if .Owner}}{{.Owner}} = {{arg "owner"}}{{else}}{{template "lockms" .}} = {{arg "stamp"}}{{end}}{{end}}
{{- define "free"}}{{if .Owner}}{{.Owner}} = NULL{{else}}{{.LockedAt}} = NULL{{end}}{{if .ExpiresAt}}, {{.ExpiresAt}} = NULL{{end}}{{end}}
{{- define "hold"}}{{.Owner}} = CASE WHEN {{arg "hold"}} > {{template "now"}} THEN {{.Owner}} END, {{.ExpiresAt}} = CASE WHEN {{arg "hold"}} > {{template "now"}} THEN
  {{- if .ExpiresAtPer}} ({{arg "hold"}} + {{.ExpiresAtPer}} - 1) / {{.ExpiresAtPer}}{{else if .TextTimes}} strftime('%Y-%m-%d %H:%M:%f', {{arg "hold"}} / 1000.0, 'unixepoch'){{else}} {{arg "hold"}}{{end}} END{{end}}
{{- define "fence"}}{{if .Fence}}COALESCE({{.Fence}}, 0){{else}}0{{end}}{{end}}
{{- define "expiry"}}{{if .ExpiresAt}}{{template "expms" .}} * 1000{{else}}({{template "lockms" .}} + {{arg "ttl"}}) * 1000{{end}}{{end}}
{{- define "expired"}}{{if .ExpiresAt}}{{.ExpiresAt}} IS NULL OR {{template "expgone" .}}
  {{- else}}{{.LockedAt}} IS NULL OR {{.LockedAt}} <
  {{- if .LockedAtPer}} {{template "eago" (tc .LockedAt .LockedAtPer "ttl" "slack")}}{{else if .TextTimes}} strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (({{arg "ttl"}} + {{arg "slack"}}) / 1000.0) || ' seconds'){{else}} {{template "now"}} - {{arg "ttl"}} - {{arg "slack"}}{{end}}{{end}}{{end}}
{{- define "lockgone"}}{{.LockedAt}} <
  {{- if .LockedAtPer}} {{template "eago" (tc .LockedAt .LockedAtPer "ttl" "slack")}}{{else if .TextTimes}} strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (({{arg "ttl"}} + {{arg "slack"}}) / 1000.0) || ' seconds'){{else}} {{template "now"}} - {{arg "ttl"}} - {{arg "slack"}}{{end}}{{end}}
{{- define "bumpexp"}}{{if .TextTimes}}strftime('%Y-%m-%d %H:%M:%f', {{.ExpiresAt}}, '+0.001 seconds'){{else}}{{.ExpiresAt}} + 1{{end}}{{end}}
{{- define "bumplock"}}{{if .TextTimes}}strftime('%Y-%m-%d %H:%M:%f', {{.LockedAt}}, '+0.001 seconds'){{else}}{{.LockedAt}} + 1{{end}}{{end}}
{{- define "stale"}}{{.Status}} = {{.Processing}} AND {{.ClaimedAt}} <
  {{- if .ClaimedAtPer}} {{template "eago" (tc .ClaimedAt .ClaimedAtPer "timeout")}}{{else if .TextTimes}} strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || ({{arg "timeout"}} / 1000.0) || ' seconds'){{else}} {{template "now"}} - {{arg "timeout"}}{{end}}
  {{- if .Park}} AND COALESCE({{.Attempts}}, 0) >= {{template "maxatt" .}}{{else if .Below}} AND COALESCE({{.Attempts}}, 0) < {{arg "below"}}{{end}}
  {{- if .Scoped}}{{scope .Scope}}{{end}}{{end}}
`

// claimSQL: SQLite has no UPDATE ... LIMIT in modernc's build, so claims
// and reaps bound their rows with a key subquery; SQLite runs each
// statement as one write transaction, so the subquery cannot be re-run
// against other rows. The key subquery takes the rows in rotating key order
// (the store's cursor, "after"): those above the cursor, then from the
// lowest key up to it.
var claimSQL = store.ClaimSQL{
	Common: common,
	Claim: `
UPDATE {{.Table}}
SET {{.Status}} = {{.Processing}}, {{.Token}} = {{arg "token"}}, {{.ClaimedAt}} = {{template "cnow" .}}
    {{- if .Attempts}}, {{.Attempts}} = COALESCE({{.Attempts}}, 0) + 1{{end}}
    {{- if .Worker}}, {{.Worker}} = {{arg "worker"}}{{end}}
WHERE {{.ID}} IN (
    SELECT {{.ID}} FROM (SELECT {{.ID}} FROM {{.Table}} WHERE {{.Status}} = {{.Pending}}{{scope .Scope}}{{template "runnable" .}} AND {{.ID}} > {{arg "after"}} ORDER BY {{.ID}} LIMIT {{arg "limit"}})
    UNION ALL
    SELECT {{.ID}} FROM (SELECT {{.ID}} FROM {{.Table}} WHERE {{.Status}} = {{.Pending}}{{scope .Scope}}{{template "runnable" .}} AND {{.ID}} <= {{arg "after"}} ORDER BY {{.ID}} LIMIT {{arg "limit"}})
    LIMIT {{arg "limit"}})
  AND {{.Status}} = {{.Pending}}
RETURNING {{join .Returned}}`,

	ReadBack: `
SELECT {{join .Returned}} FROM {{.Table}} WHERE {{.Token}} = {{arg "token"}}{{if .ByKeys}} AND {{.ID}} {{keys}}{{end}} ORDER BY {{.ID}}`,

	Ack: `
{{- if .Delete}}
DELETE FROM {{.Table}}
WHERE {{.Token}} = {{arg "token"}} AND {{.ID}} {{keys}}
RETURNING {{.ID}}, false
{{- else}}
UPDATE {{.Table}}
SET {{.Status}} = {{if .ParkAt}}CASE WHEN COALESCE({{.Attempts}}, 0) >= {{template "maxatt" .}} THEN {{.Failed}} ELSE {{.Pending}} END{{else}}{{.Target}}{{end}},
    {{.Token}} = NULL{{if and .Undo .Attempts}}, {{.Attempts}} = MAX({{.Attempts}} - 1, 0){{end}}
    {{- if eq .Target .Pending}}{{template "cleartime" .}}{{end}}
    {{- if and .ParkAt .ClearClaimedAt}}, {{.ClaimedAt}} = CASE WHEN COALESCE({{.Attempts}}, 0) >= {{template "maxatt" .}} THEN {{.ClaimedAt}} END{{end}}
    {{- template "ackmark" .}}
WHERE {{.Token}} = {{arg "token"}} AND {{.ID}} {{keys}}
RETURNING {{.ID}}, {{if .ParkAt}}{{.Status}} = {{.Failed}}{{else}}false{{end}}
{{- end}}`,

	// Archive and Purge move rows an ack has just marked done, in its
	// IMMEDIATE transaction.
	Archive: `
INSERT INTO {{.Archive}} SELECT * FROM {{.Table}}
WHERE {{.ID}} {{keys}} AND {{.Status}} = {{.Done}} AND {{.Token}} IS NULL`,

	Purge: `
DELETE FROM {{.Table}}
WHERE {{.ID}} {{keys}} AND {{.Status}} = {{.Done}} AND {{.Token}} IS NULL`,

	// No FOR UPDATE: the per-row ack runs in a BEGIN IMMEDIATE transaction,
	// which holds the database's write lock from its first statement.
	AckLock: `
SELECT {{.ID}}, {{or .Version "0"}}, {{or .Attempts "0"}} FROM {{.Table}}
WHERE {{.Token}} = {{arg "token"}} AND {{.ID}} {{keys}}`,

	Heartbeat: `
UPDATE {{.Table}} SET {{.ClaimedAt}} = {{if .ClaimedAtPer}}{{template "cnow" .}}{{else if .TextTimes -}}
  MAX(strftime('%Y-%m-%d %H:%M:%f', 'now'), strftime('%Y-%m-%d %H:%M:%f', {{.ClaimedAt}}, '+0.001 seconds'))
  {{- else}}MAX({{template "now"}}, {{.ClaimedAt}} + 1){{end}}
WHERE {{.Token}} = {{arg "token"}} AND {{.Status}} = {{.Processing}}
RETURNING {{.ID}}`,

	Release: `
UPDATE {{.Table}}
SET {{.Status}} = {{.Pending}}, {{.Token}} = NULL{{if .Attempts}}, {{.Attempts}} = MAX({{.Attempts}} - 1, 0){{end}}{{template "cleartime" .}}
    {{- if .Snooze}}, {{.RunAt}} = {{template "delayed" .}}{{end}}
WHERE {{.Token}} = {{arg "token"}} AND {{.Status}} = {{.Processing}}{{if .ByKeys}} AND {{.ID}} {{keys}}{{end}}`,

	// Operator actions take at most "limit" rows per statement (the rows
	// they change leave the set).
	Unpark: `
UPDATE {{.Table}}
SET {{.Status}} = {{.Pending}}, {{.Token}} = NULL{{template "cleartime" .}}
    {{- if .Error}}, {{.Error}} = NULL{{end}}{{if .RunAt}}, {{.RunAt}} = NULL{{end}}{{if and .Reset .Attempts}}, {{.Attempts}} = 0{{end}}
WHERE {{.ID}} IN (SELECT {{.ID}} FROM {{.Table}} WHERE {{.Status}} = {{.Failed}}{{template "filter" .}} LIMIT {{arg "limit"}})`,

	RetryNow: `
UPDATE {{.Table}} SET {{.RunAt}} = NULL
WHERE {{.ID}} IN (SELECT {{.ID}} FROM {{.Table}} WHERE {{.Status}} = {{.Pending}} AND {{template "future" .}}{{template "filter" .}} LIMIT {{arg "limit"}})`,

	List: `
SELECT {{.ID}}, COALESCE({{.Token}}, ''), {{if .Attempts}}COALESCE({{.Attempts}}, 0){{else}}0{{end}},
       COALESCE(MAX({{if .ClaimedAtPer}}({{template "now"}} - {{.ClaimedAt}} * {{.ClaimedAtPer}}) * 1000{{else}}{{template "agepre" .}}{{.ClaimedAt}}{{template "agepost" .}}{{end}}, 0), -1),
       {{if .RunAt}}COALESCE(MAX({{if .RunAtPer}}({{.RunAt}} * {{.RunAtPer}} - {{template "now"}}) * 1000{{else}}-{{template "agepre" .}}{{.RunAt}}{{template "agepost" .}}{{end}}, 0), 0){{else}}0{{end}},
       {{if .Error}}COALESCE({{.Error}}, ''){{else}}''{{end}}{{if .Worker}}, COALESCE({{.Worker}}, ''){{end}}
FROM {{.Table}}
{{- if eq .Set 0}}
WHERE {{.Status}} = {{.Failed}}{{template "filter" .}} ORDER BY {{.ClaimedAt}}
{{- else if eq .Set 1}}
WHERE {{.Status}} = {{.Processing}} AND {{.ClaimedAt}} <=
  {{- if .ClaimedAtPer}} {{template "eago" (tc .ClaimedAt .ClaimedAtPer "older")}}{{else if .TextTimes}} strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || ({{arg "older"}} / 1000.0) || ' seconds'){{else}} {{template "now"}} - {{arg "older"}}{{end}}
  {{- template "filter" .}} ORDER BY {{.ClaimedAt}}
{{- else}}
WHERE {{.Status}} = {{.Pending}} AND {{template "future" .}}
  {{- /* +col keeps SQLite on the sched index, in RunAt order, rather than the scope index and a sort */}}
  {{- if .Scoped}}{{range $i, $c := .Scope}} AND +{{$c}} = {{arg (printf "scope%d" $i)}}{{end}}{{end}} ORDER BY {{.RunAt}}
{{- end}}
LIMIT {{arg "limit"}}`,

	Reap: `
UPDATE {{.Table}}
SET {{.Status}} = {{if .Park}}{{.Failed}}{{else}}{{.Pending}}{{end}}, {{.Token}} = NULL{{if not .Park}}{{template "cleartime" .}}{{end}}
WHERE {{.ID}} IN (SELECT {{.ID}} FROM {{.Table}} WHERE {{template "stale" .}} ORDER BY {{.ClaimedAt}} LIMIT {{arg "limit"}})
  AND {{template "stale" .}}`,

	Stats: `
SELECT COALESCE(SUM({{.Status}} = {{.Pending}}), 0),
       COALESCE(SUM({{.Status}} = {{.Processing}}), 0),
       COALESCE(SUM({{.Status}} = {{.Done}}), 0),
       {{if .Failed}}COALESCE(SUM({{.Status}} = {{.Failed}}), 0){{else}}0{{end}},
       COUNT(*),
       {{if .ClaimedAtPer}}({{template "now"}} - MIN(CASE WHEN {{.Status}} = {{.Processing}} THEN {{.ClaimedAt}} END) * {{.ClaimedAtPer}}) * 1000
       {{- else}}{{template "agepre" .}}MIN(CASE WHEN {{.Status}} = {{.Processing}} THEN {{.ClaimedAt}} END){{template "agepost" .}}{{end}},
       {{if and .CreatedAt .CreatedAtPer}}({{template "now"}} - MIN(CASE WHEN {{.Status}} = {{.Pending}} THEN {{.CreatedAt}} END) * {{.CreatedAtPer}}) * 1000
       {{- else if .CreatedAt}}{{template "agepre" .}}MIN(CASE WHEN {{.Status}} = {{.Pending}} THEN {{.CreatedAt}} END){{template "agepost" .}}{{else}}NULL{{end}}
FROM {{.Table}}{{if .Scoped}} WHERE TRUE{{scope .Scope}}{{end}}`,

	// SQLite does not enforce declared lengths: every length reads 0. Times
	// are written as integer milliseconds whatever the declared type: a
	// precision of 3.
	Columns: `
SELECT name, 0, type, 3, '', "notnull" = 0 AND pk = 0, type,
       pk = 1 AND (SELECT COUNT(*) FROM pragma_table_info({{arg "table"}}, COALESCE({{arg "schema"}}, 'main')) WHERE pk > 0) = 1
FROM pragma_table_info({{arg "table"}}, COALESCE({{arg "schema"}}, 'main'))`,

	// SQLite has no online form of CREATE INDEX: Online renders the same
	// statements (store.IndexOptions.Online).
	IndexExists: `
SELECT COUNT(*), COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = {{arg "index"}}`,

	Indexes: store.IndexSQL{
		Claim: `CREATE INDEX IF NOT EXISTS {{.ClaimIndex}} ON {{.Table}} ({{.IndexCols}})`,
		Token: `CREATE INDEX IF NOT EXISTS {{.TokenIndex}} ON {{.Table}} ({{.IndexCols}})`,
		Reap:  `CREATE INDEX IF NOT EXISTS {{.ReapIndex}} ON {{.Table}} ({{.IndexCols}})`,
		Scope: `CREATE INDEX IF NOT EXISTS {{.ScopeIndex}} ON {{.Table}} ({{.IndexCols}})`,
		Sched: `CREATE INDEX IF NOT EXISTS {{.SchedIndex}} ON {{.Table}} ({{.IndexCols}})`,
	},
}

// leaseSQL: with LeaseTable.TextTimes the lock and expiry columns hold
// SQLite's text dates, written by strftime in milliseconds and compared as
// text (a whole-second date the application wrote compares in time order
// with them); stamps and expiries are read back as integer milliseconds
// ("lockms", "expms").
var leaseSQL = store.LeaseSQL{
	Common: common,
	Acquire: `
UPDATE {{.Table}}
SET {{if .Owner}}{{.Owner}} = {{arg "owner"}}, {{end}}{{.LockedAt}} = {{template "locknow" .}}
    {{- if .ExpiresAt}}, {{.ExpiresAt}} = {{template "later" .}}{{end}}
    {{- if .Fence}}, {{.Fence}} = COALESCE({{.Fence}}, 0) + 1{{end}}
WHERE {{.Key}} = {{arg "key"}} AND ({{if .Owner}}{{.Owner}} IS NULL OR {{end}}{{template "expired" .}})
RETURNING {{template "fence" .}}, {{template "expiry" .}}, {{template "lockms" .}}`,

	Insert: `
INSERT INTO {{.Table}} ({{.Key}}, {{.Owner}}, {{.LockedAt}}{{if .ExpiresAt}}, {{.ExpiresAt}}{{end}}{{if .Fence}}, {{.Fence}}{{end}})
VALUES ({{arg "key"}}, {{arg "owner"}}, {{template "locknow" .}}{{if .ExpiresAt}}, {{template "later" .}}{{end}}{{if .Fence}}, 1{{end}})
ON CONFLICT ({{.Key}}) DO NOTHING
RETURNING {{template "fence" .}}, {{template "expiry" .}}, {{template "lockms" .}}`,

	Renew: `
UPDATE {{.Table}}
SET {{if .ExpiresAt -}}
      {{.LockedAt}} = {{template "locknow" .}}, {{.ExpiresAt}} = {{if .ExpiresAtPer}}MAX({{template "later" .}}, COALESCE({{.ExpiresAt}}, 0)){{else}}MAX({{template "later" .}}, {{template "bumpexp" .}}){{end}}
    {{- else if .LockedAtPer -}}
      {{.LockedAt}} = MAX({{template "locknow" .}}, COALESCE({{.LockedAt}}, 0))
    {{- else -}}
      {{.LockedAt}} = MAX({{template "claimnow" .}}, {{template "bumplock" .}})
    {{- end}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}
RETURNING {{template "fence" .}}, {{template "expiry" .}}, {{template "lockms" .}}`,

	Inspect: `
SELECT {{if .Owner}}{{.Owner}}{{else}}CAST({{template "lockms" .}} AS TEXT){{end}}, {{template "fence" .}},
       {{if .ExpiresAt}}{{template "expms" .}} * 1000, {{template "expgone" .}}{{else}}{{template "expiry" .}}, COALESCE({{template "lockgone" .}}, false){{end}},
       {{if .TaskStatus}}CAST({{.TaskStatus}} AS TEXT){{else}}NULL{{end}}
FROM {{.Table}} WHERE {{.Key}} = {{arg "key"}}`,

	Held: `{{if .ExpiresAt}}
SELECT {{.Key}}, {{if .Owner}}{{.Owner}}{{else}}CAST({{template "lockms" .}} AS TEXT){{end}}, {{template "fence" .}},
       {{template "expms" .}} * 1000, MAX(({{template "expms" .}} - {{template "now"}}) * 1000, 0),
       {{template "expgone" .}}
FROM {{.Table}} WHERE {{.ExpiresAt}} IS NOT NULL{{if .Owner}} AND {{.Owner}} IS NOT NULL{{end}}
ORDER BY {{.ExpiresAt}} LIMIT {{arg "limit"}}{{else}}
SELECT {{.Key}}, {{if .Owner}}{{.Owner}}{{else}}CAST({{template "lockms" .}} AS TEXT){{end}}, {{template "fence" .}},
       {{template "expiry" .}}, MAX(({{template "lockms" .}} + {{arg "ttl"}} - {{template "now"}}) * 1000, 0),
       {{template "lockgone" .}}
FROM {{.Table}} WHERE {{.LockedAt}} IS NOT NULL{{if .Owner}} AND {{.Owner}} IS NOT NULL{{end}}
ORDER BY {{.LockedAt}} LIMIT {{arg "limit"}}{{end}}`,

	Reap: `
UPDATE {{.Table}} SET {{.Owner}} = NULL, {{.ExpiresAt}} = NULL
WHERE {{.Key}} IN (SELECT {{.Key}} FROM {{.Table}} WHERE {{.Owner}} IS NOT NULL AND {{template "expgone" .}} ORDER BY {{.ExpiresAt}} LIMIT {{arg "limit"}})
  AND {{.Owner}} IS NOT NULL AND {{template "expgone" .}}`,

	Columns: claimSQL.Columns,
}

// scheduleSQL: the schedule statements are the store's, with this
// engine's clock (milliseconds) in microseconds, its test of a live lease
// (expires_at holds milliseconds) and ON CONFLICT for a job row made twice.
var scheduleSQL = store.ScheduleSQL{
	Common: `
{{- define "usnow"}}(CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000){{end}}
{{- define "live"}}{{.ExpiresAt}} >= CAST(unixepoch('subsec') * 1000 AS INTEGER) - {{arg "slack"}}{{end}}
{{- define "keepfirst"}}ON CONFLICT ({{.Job}}) DO NOTHING{{end}}`,
	Columns: claimSQL.Columns,
}

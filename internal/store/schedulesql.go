package store

// ScheduleSQL are an engine's statements on the schedule tables, as
// text/template sources over [ScheduleNames] and [ScheduleVariant], with
// the engine's {{template "usnow"}} (the database clock in microseconds
// since the epoch), {{template "live" .}} (the jobs row's lease is
// unexpired by the database clock, allowing {{arg "slack"}}) and
// {{template "keepfirst" .}} (the clause that makes an INSERT of an
// existing key change nothing), defined in Common, which is prepended to
// each. Every engine writes the statements the same way: the store's
// (genericScheduleSQL) fill in those an engine leaves empty, so an engine
// supplies Common and Columns. Which statements a store renders is the
// table in schedulestmts.go.
type ScheduleSQL struct {
	Common string
	// Register makes the row of "job" if it has none: not paused, fence 0,
	// its cursor the database's now.
	Register string
	// State returns the cursor, the paused flag and the database's now of
	// "job".
	State string
	// Advance moves the cursor of "job" from "prev" to "fire", only while
	// the database's now is in ["win_from", "win_to") and, for a run
	// (ScheduleVariant.Run), the job is not paused.
	Advance string
	// MarkLost sets every running run of "job" whose token is not the
	// owner of the job's live lease to lost, with "error".
	MarkLost string
	// Insert adds the run of "job" at "fire" as running under "token" and
	// "fence", or (ScheduleVariant.Skip) the skipped range ["fire",
	// "until"), by "worker", with "error".
	Insert string
	// Finish sets the running run of "job" at "fire" held by "token" to
	// "status" with "error".
	Finish string
	// Pause sets the paused flag of "job" to "flag".
	Pause string
	// Run returns the status and token of the run of "job" at "fire".
	Run string
	// History returns the runs of "job" before "fire", newest first, at
	// most "limit": fire, until, status, worker, fence, started, finished,
	// error.
	History string
	// Jobs returns every job: name, paused flag, cursor and the database's
	// now.
	Jobs string
	// Cutoff returns the fire time of the run "offset" places below the
	// newest of "job".
	Cutoff string
	// Prune deletes the runs of "job" before "fire" that are not running.
	Prune string
	// Columns is the catalog query of [ClaimSQL.Columns].
	Columns string
}

// ScheduleNames are what schedule templates see of the tables: the quoted
// tables and columns, and status literals.
type ScheduleNames struct {
	Jobs, Runs string
	// Columns of both tables (Job and Fence are in both).
	Job, Owner, ExpiresAt, Fence, Paused, Cursor                   string
	FireAt, Until, Status, Token, Worker, Started, Finished, Error string
	// Status literals.
	Running, Lost, Skipped string
}

// ScheduleVariant is what a schedule statement is rendered for besides the
// tables.
type ScheduleVariant struct {
	// Run: Advance for a run (the job must not be paused), Insert of a
	// run.
	Run bool
	// Skip: Insert of a skipped range, or Advance that records only
	// skipped fire times.
	Skip bool
	// WhilePaused: Advance that records the fire times of a paused job
	// (it must still be paused).
	WhilePaused bool
}

// genericScheduleSQL are the schedule statements every engine writes the
// same way (see [ScheduleSQL]).
var genericScheduleSQL = ScheduleSQL{
	Register: `
INSERT INTO {{.Jobs}} ({{.Job}}, {{.Fence}}, {{.Paused}}, {{.Cursor}})
VALUES ({{arg "job"}}, 0, 0, {{template "usnow"}}) {{template "keepfirst" .}}`,

	State: `
SELECT {{.Cursor}}, {{.Paused}}, {{template "usnow"}} FROM {{.Jobs}} WHERE {{.Job}} = {{arg "job"}}`,

	// The window is tested on the database clock, in the statement that
	// moves the cursor: a claim of a fire time can only commit inside it,
	// and a record of it as missed only after it, whatever the clocks of
	// the hosts that try.
	Advance: `
UPDATE {{.Jobs}} SET {{.Cursor}} = {{arg "fire"}}
WHERE {{.Job}} = {{arg "job"}} AND {{.Cursor}} = {{arg "prev"}}{{if .Run}} AND {{.Paused}} = 0{{else if .WhilePaused}} AND {{.Paused}} <> 0{{end}}
  AND {{template "usnow"}} >= {{arg "win_from"}} AND {{template "usnow"}} < {{arg "win_to"}}`,

	// A running run whose token does not own the job's live lease has
	// lost it: its holder's local deadline has passed, so it stopped (or
	// was killed) before anyone else could take the lease.
	MarkLost: `
UPDATE {{.Runs}} SET {{.Status}} = {{.Lost}}, {{.Finished}} = {{template "usnow"}}, {{.Error}} = {{arg "error"}}
WHERE {{.Job}} = {{arg "job"}} AND {{.Status}} = {{.Running}}
  AND {{.Token}} <> COALESCE((SELECT {{.Owner}} FROM {{.Jobs}} WHERE {{.Job}} = {{arg "job"}} AND {{template "live" .}}), '')`,

	Insert: `
INSERT INTO {{.Runs}} ({{.Job}}, {{.FireAt}}, {{.Until}}, {{.Status}}, {{.Token}}, {{.Fence}}, {{.Worker}}, {{.Started}}, {{.Finished}}, {{.Error}})
{{- if .Skip}}
VALUES ({{arg "job"}}, {{arg "fire"}}, {{arg "until"}}, {{.Skipped}}, NULL, NULL, {{arg "worker"}}, {{template "usnow"}}, {{template "usnow"}}, {{arg "error"}})
{{- else}}
VALUES ({{arg "job"}}, {{arg "fire"}}, NULL, {{.Running}}, {{arg "token"}}, {{arg "fence"}}, {{arg "worker"}}, {{template "usnow"}}, NULL, NULL)
{{- end}}`,

	Finish: `
UPDATE {{.Runs}} SET {{.Status}} = {{arg "status"}}, {{.Finished}} = {{template "usnow"}}, {{.Error}} = {{arg "error"}}
WHERE {{.Job}} = {{arg "job"}} AND {{.FireAt}} = {{arg "fire"}} AND {{.Token}} = {{arg "token"}} AND {{.Status}} = {{.Running}}`,

	Pause: `
UPDATE {{.Jobs}} SET {{.Paused}} = {{arg "flag"}} WHERE {{.Job}} = {{arg "job"}}`,

	Run: `
SELECT {{.Status}}, COALESCE({{.Token}}, '') FROM {{.Runs}} WHERE {{.Job}} = {{arg "job"}} AND {{.FireAt}} = {{arg "fire"}}`,

	// History and Cutoff read the primary key (job, fire_us) in order.
	History: `
SELECT {{.FireAt}}, {{.Until}}, {{.Status}}, COALESCE({{.Worker}}, ''), COALESCE({{.Fence}}, 0), {{.Started}}, {{.Finished}}, COALESCE({{.Error}}, '')
FROM {{.Runs}} WHERE {{.Job}} = {{arg "job"}} AND {{.FireAt}} < {{arg "fire"}}
ORDER BY {{.FireAt}} DESC LIMIT {{arg "limit"}}`,

	Jobs: `
SELECT {{.Job}}, {{.Paused}}, {{.Cursor}}, {{template "usnow"}} FROM {{.Jobs}} ORDER BY {{.Job}}`,

	Cutoff: `
SELECT {{.FireAt}} FROM {{.Runs}} WHERE {{.Job}} = {{arg "job"}} ORDER BY {{.FireAt}} DESC LIMIT 1 OFFSET {{arg "offset"}}`,

	Prune: `
DELETE FROM {{.Runs}} WHERE {{.Job}} = {{arg "job"}} AND {{.FireAt}} < {{arg "fire"}} AND {{.Status}} <> {{.Running}}`,
}

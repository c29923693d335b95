// Command claimctl is claimlock's operator tool: it shows what a claim table
// and its leases are doing and acts on them, through the same dialects the
// library uses (identifiers are validated and quoted by the dialect; values
// travel as placeholders; claimctl builds no SQL of its own).
//
// Usage:
//
//	claimctl COMMAND [flags]
//
// Commands that read:
//
//	stats      rows by status and the oldest pending and processing ages, for
//	           each -scope given (or the whole table)
//	stuck      rows processing for longer than -older (default 5m), oldest
//	           first, with token, worker (with a -worker column) and age on
//	           the database clock
//	parked     parked (failed) rows with their attempts and stored error
//	scheduled  pending rows waiting for a future run-at (needs -run-at)
//	backlog    a coalescer's backlog (-coalesce): dirty keys, the age of the
//	           oldest unfolded change, keys by status, parked keys with
//	           their error
//	leases     held leases, soonest expiry first (or the lease of each -key):
//	           holder, fence, lock time, expiry, remaining TTL
//	pauses     the paused tables and scopes of the pause table (-pause-table)
//	ddl        the SQL to paste into a migration: columns the claim table
//	           lacks (or CREATE TABLE when it does not exist), the missing
//	           recommended indexes (all with -all-indexes), a coalescer's
//	           tables (-coalesce: coalesce.CreateTablesDDL), and the lease
//	           table (CREATE TABLE for a key table, columns to add to a task
//	           table), and the pause table (-pause-table)
//
// Commands that change rows (each asks for confirmation on standard input
// unless -yes is given):
//
//	unpark         return parked rows (all in -scope, or -ids) to pending;
//	               -reset-attempts gives them fresh attempts; with
//	               -lease-done it warns when the scope's task is finished
//	retry-now      make rows waiting for a future run-at claimable now
//	reap           run one reaper sweep: stale rows (processing longer than
//	               -older) back to pending, parked at -max-attempts
//	force-release  free the lease of -key whoever holds it
//	pause          pause claims of each -scope (the whole table with
//	               -all-scopes) in the pause table; -reason, -by
//	resume         end those pauses
//
// serve runs an operator's web page (see the README's "Status page"): the
// counts of each -scope over time, stuck, parked and scheduled rows and the
// held leases, refreshed in place. It listens on 127.0.0.1:8080 (-listen)
// and is read-only unless an action token is set (-action-token or
// CLAIMCTL_ACTION_TOKEN); with one, an operator who logs in can unpark,
// retry now and force-release, and with -pause-table pause and resume a
// page's scope, each after a confirmation.
//
// The claim table is described by flags (-table, -id, -status, -token,
// -claimed-at, -attempts, -run-at, -error, -created-at, -scope-cols,
// -statuses, ...) or by a JSON file (-config), whose fields are the flags'
// names; flags given on the command line override the file. -coalesce
// makes the claim table a coalescer's keys table (package coalesce),
// described by the library from the coalescer's table names
// (-coalesce-changes, -coalesce-keys, -coalesce-sources, default
// coalesce's; validated by package coalesce), so that every claim table
// command and the status page work on its keys, and backlog on the
// coalescer. The lease
// table is described the same way: -lease-table, and -lease-kind for its
// shape (key: a key table of tasklock.CreateTable, the default; task: a
// task table with an owner column, tasklock.TaskTable; task-no-owner: a
// task table with only a lock time, tasklock.TaskTableNoOwner), whose
// column names the -lease-key, -lease-owner, -lease-locked-at,
// -lease-expires-at, -lease-fence and -lease-status flags override ("-"
// for an optional column the table lacks), so that every lease table the
// library accepts can be described. -pause-table names the pause table of
// package claim's Pauses (default claimlock_pauses for pause, resume and
// pauses; serve shows pauses only when it is given). -driver is postgres,
// mysql or sqlite; -dsn is the data source name (or the CLAIMCTL_DSN environment variable,
// which keeps passwords out of the process list). Output is a human table;
// -json prints JSON for scripts.
//
// A lease's state is absent (no row has the key), free, held, expired
// (past its expiry, neither taken again nor reaped) or locked. In a table
// without an expiry column each holder's TTL is its own: -lease-ttl gives
// the holders' TTL, and a lease then expires at its lock time plus it, on
// the database clock; without it a lease is locked since its lock time, its
// expiry unknown. Times are shown in RFC 3339 (UTC), whatever the column
// holds. The config file's fields take what their flags take, spelled as
// on the command line ("0,1,2,3") or as JSON values ([0,1,2,3], 300, true).
//
// Before it reads or changes anything, claimctl checks the table and the
// configured columns against the database catalog, so a wrong name is
// reported and nothing changes.
//
// Exit codes:
//
//	0  success
//	1  the operation failed (a database error while reading or acting)
//	2  usage: unknown command, bad flag or value, unreadable config file
//	3  schema: the table or a configured column does not match the database
//	4  connection: the database could not be reached or is not supported
//	5  refused: an action was not confirmed (nothing changed)
//
// Errors are one line on standard error, prefixed "claimctl: "; an error in
// the command line itself (no or an unknown command, a flag the command
// does not take, a bad flag value) is followed by the usage. claimctl -h
// and claimctl help list the commands; claimctl COMMAND -h and claimctl
// help COMMAND print what a command does and its flags.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

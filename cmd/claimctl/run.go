package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// command is one claimctl command.
type command struct {
	name string
	// summary is its line in the command list; about says what it does,
	// for its help.
	summary, about string
	// tables are the table descriptions it reads; flags are its own
	// flags.
	tables tableSet
	flags  []string
	run    func(ctx context.Context, e *env) error
	// untimed commands run until interrupted: -timeout bounds their
	// connection and each database call, not the whole command.
	untimed bool
}

// tableSet says which table descriptions a command reads.
type tableSet int

const (
	claimTable tableSet = 1 << iota
	leaseTable
	// coalesceTables are a coalescer's (-coalesce) without the claim
	// table's column flags.
	coalesceTables
	// pauseTables is the pause table (-pause-table).
	pauseTables
)

// env is what a command works with.
type env struct {
	o   *options
	d   dialect.Dialect
	db  *sql.DB // d's database, for package coalesce
	in  *bufio.Reader
	out io.Writer
}

var commands = []command{
	{
		name: "stats", summary: "rows by status and oldest ages, per -scope", tables: claimTable, flags: []string{"scope"},
		about: "Rows by status (pending, processing, done, failed, other) and the ages of the oldest pending row\n" +
			"(by its creation time: needs -created-at) and of the oldest processing row, on the database clock,\n" +
			"for each -scope given, or for the whole table.",
		run: cmdStats,
	},
	{
		name: "stuck", summary: "rows processing for longer than -older", tables: claimTable, flags: []string{"scope", "older", "limit"},
		about: "Rows of the -scope processing for longer than -older, oldest first, with their token, the worker\n" +
			"that claimed them (from the -worker column; unknown without one), attempts and the time since\n" +
			"their claim or last heartbeat on the database clock.",
		run: cmdStuck,
	},
	{
		name: "parked", summary: "parked rows with attempts and error", tables: claimTable, flags: []string{"scope", "limit"},
		about: "Parked (failed) rows of the -scope with their attempts, the time since their last claim and\n" +
			"their stored error (needs -error).",
		run: cmdParked,
	},
	{
		name: "scheduled", summary: "pending rows waiting for a future run-at", tables: claimTable, flags: []string{"scope", "limit"},
		about: "Pending rows of the -scope waiting for a run-at in the future (needs -run-at), soonest first.",
		run:   cmdScheduled,
	},
	{
		name: "backlog", summary: "a coalescer's backlog and parked keys (-coalesce)", tables: coalesceTables, flags: []string{"limit"},
		about: "A coalescer's backlog (package coalesce; needs -coalesce): its dirty keys, the age of its oldest\n" +
			"unfolded change on the database clock (parked keys' changes left out), its keys by status, and\n" +
			"its parked keys with their attempts and the error of their last fold. Unpark them with\n" +
			"unpark -coalesce once the fold can succeed.",
		run: cmdBacklog,
	},
	{
		name: "leases", summary: "held leases, soonest expiry first (or the lease of each -key)", tables: leaseTable, flags: []string{"key", "limit"},
		about: "Leases of the lease table: every held one, soonest expiry first (oldest lock first in a table\n" +
			"without an expiry column), with the time left on the database clock, or the lease of each -key\n" +
			"given: state (absent, free, held, expired, or locked when the table has no expiry column and\n" +
			"-lease-ttl is not given), holder, fence, lock time and expiry, in RFC 3339 on the database clock.\n" +
			"Without an expiry column a lease expires at its lock time plus -lease-ttl, the holders' TTL.",
		run: cmdLeases,
	},
	{
		name: "unpark", summary: "return parked rows to pending", tables: claimTable | leaseTable, flags: []string{"scope", "ids", "reset-attempts", "yes"},
		about: "Return parked rows (every one of the -scope, or those of -ids) to pending; -reset-attempts gives\n" +
			"them fresh attempts. With -lease-done (and the lease table, the tasks' table), it warns when the\n" +
			"-scope's task is finished or has no row: nothing would claim the rows again. Asks for confirmation\n" +
			"unless -yes.",
		run: cmdUnpark,
	},
	{
		name: "retry-now", summary: "make rows waiting for their run-at claimable now", tables: claimTable, flags: []string{"scope", "ids", "yes"},
		about: "Make pending rows of the -scope (or those of -ids) that wait for a future run-at claimable now\n" +
			"(needs -run-at). Asks for confirmation unless -yes.",
		run: cmdRetryNow,
	},
	{
		name: "reap", summary: "run one reaper sweep", tables: claimTable, flags: []string{"scope", "all-scopes", "older", "max-attempts", "yes"},
		about: "Run one reaper sweep: rows processing for longer than -older go back to pending (those with\n" +
			"-max-attempts attempts or more are parked), in the -scope or in every scope with -all-scopes.\n" +
			"Their workers are presumed dead. Asks for confirmation unless -yes.",
		run: cmdReap,
	},
	{
		name: "force-release", summary: "free the lease of -key whoever holds it", tables: leaseTable, flags: []string{"key", "yes"},
		about: "Free the lease of one -key whoever holds it. A live holder keeps working until its next renewal\n" +
			"fails. Asks for confirmation unless -yes.",
		run: cmdForceRelease,
	},
	{
		name: "pause", summary: "pause claims of a -scope (or the whole table)", tables: claimTable | pauseTables,
		flags: []string{"scope", "all-scopes", "reason", "by", "yes"},
		about: "Pause claims of each -scope given, or of the whole table with -all-scopes (or when it has no scope\n" +
			"columns), in the pause table (-pause-table, default " + claim.DefaultPauseTable + "; create it with ddl -pause-table).\n" +
			"Claimers configured with that PauseTable take no rows of a paused scope once their PauseRefresh\n" +
			"has passed; rows already claimed finish. The pause survives restarts. -reason and -by are kept\n" +
			"with it. Asks for confirmation unless -yes.",
		run: cmdPause,
	},
	{
		name: "resume", summary: "end the pause of a -scope (or of the whole table)", tables: claimTable | pauseTables,
		flags: []string{"scope", "all-scopes", "yes"},
		about: "End the pause of each -scope given, or the pause of the whole table with -all-scopes (or when it\n" +
			"has no scope columns). A pause of the whole table and a pause of one scope are separate: resuming\n" +
			"one leaves the other. Asks for confirmation unless -yes.",
		run: cmdResume,
	},
	{
		name: "pauses", summary: "the paused tables and scopes", tables: pauseTables, flags: []string{"limit"},
		about: "The pauses of the pause table (-pause-table, default " + claim.DefaultPauseTable + "): claim table, scope\n" +
			"(or every scope), when it was paused and how long ago on the database clock, by whom and why.",
		run: cmdPauses,
	},
	{
		name: "ddl", summary: "print the SQL for a migration", tables: claimTable | leaseTable | pauseTables, flags: []string{"all-indexes"},
		about: "Print the SQL a migration needs on the connected engine: the columns the claim table lacks (or\n" +
			"CREATE TABLE when it does not exist), its missing recommended indexes (all with -all-indexes),\n" +
			"a coalescer's three tables (-coalesce: CREATE TABLE IF NOT EXISTS and their indexes)\n" +
			"the lease table (CREATE TABLE for a key table, the columns a task table lacks) and the pause\n" +
			"table (-pause-table: CREATE TABLE IF NOT EXISTS).",
		run: cmdDDL,
	},
	{
		name: "serve", summary: "serve a status page (read-only unless an action token is set)", tables: claimTable | leaseTable | pauseTables,
		flags: []string{"listen", "action-token", "interval", "scope", "key", "older", "limit"},
		about: serveAbout, run: cmdServe, untimed: true,
	},
}

// run is claimctl's main logic: it returns the exit code and writes the
// output to stdout, and to stderr one line per error (followed by the
// usage, for a usage error of the command line).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := runErr(ctx, args, stdin, stdout)
	if err == nil {
		return exitOK
	}
	code := exitFailed
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	fmt.Fprintf(stderr, "claimctl: %s\n", oneLine(err.Error()))
	if ee != nil && ee.usage != "" {
		fmt.Fprintf(stderr, "\n%s", ee.usage)
	}
	return code
}

func runErr(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return withUsage(usageErr("no command given"), usage())
	}
	switch args[0] {
	case "-h", "-help", "--help":
		_, err := fmt.Fprint(stdout, usage())
		return err
	case "help":
		if len(args) == 1 {
			_, err := fmt.Fprint(stdout, usage())
			return err
		}
		cmd := lookup(args[1])
		if cmd == nil || len(args) > 2 {
			return withUsage(usageErr("help: want one command, got %q", strings.Join(args[1:], " ")), usage())
		}
		_, err := fmt.Fprint(stdout, cmd.help())
		return err
	}
	cmd := lookup(args[0])
	if cmd == nil {
		return withUsage(usageErr("unknown command %q", args[0]), usage())
	}
	o, err := parseOptions(cmd.name, args[1:])
	if errors.Is(err, errHelp) {
		_, err := fmt.Fprint(stdout, cmd.help())
		return err
	}
	if err != nil {
		return inCommand(cmd.name, err)
	}
	untimed := ctx
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	d, db, closeFn, err := connect(ctx, o)
	if err != nil {
		return inCommand(cmd.name, err)
	}
	defer closeFn()
	if cmd.untimed {
		ctx = untimed
	}
	return inCommand(cmd.name, cmd.run(ctx, &env{o: o, d: d, db: db, in: bufio.NewReader(stdin), out: stdout}))
}

// inCommand names the command in err's message. The command is
// claimctl's; an error of the library then names its package and
// operation ("reap: zombie: sweep jobs: <cause>").
func inCommand(name string, err error) error {
	if err == nil {
		return nil
	}
	return &commandError{name: name, err: err}
}

// commandError is an error of a command, named in its message.
type commandError struct {
	name string
	err  error
}

func (e *commandError) Error() string { return e.name + ": " + e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }

// lookup returns the command called name, nil if there is none.
func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// usage is claimctl's help: its usage line and the commands.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: claimctl COMMAND -driver postgres|mysql|sqlite -dsn DSN (-config FILE | -table T ... | -lease-table T ...) [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-14s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun claimctl COMMAND -h (or claimctl help COMMAND) for what a command does and its flags.\n")
	b.WriteString("exit codes: 0 ok, 1 failed, 2 usage, 3 schema mismatch, 4 cannot connect, 5 not confirmed\n")
	return b.String()
}

// confirm asks the operator to confirm what, unless -yes was given; a
// refusal (or no answer) is an exitRefused error.
func (e *env) confirm(what string) error {
	if e.o.Yes {
		return nil
	}
	fmt.Fprintf(e.out, "%s\nProceed? [y/N] ", what)
	line, _ := e.in.ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	fmt.Fprintln(e.out)
	return &exitError{code: exitRefused, err: errNotConfirmed}
}

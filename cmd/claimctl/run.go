package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/claimlock/claimlock/dialect"
)

// command is one claimctl command.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env) error
}

// env is what a command works with.
type env struct {
	o   *options
	d   dialect.Dialect
	in  *bufio.Reader
	out io.Writer
}

var commands = []command{
	{"stats", "rows by status and oldest ages, per -scope", cmdStats},
	{"stuck", "rows processing for longer than -older", cmdStuck},
	{"parked", "parked rows with attempts and error", cmdParked},
	{"scheduled", "pending rows waiting for a future run-at", cmdScheduled},
	{"leases", "held leases, soonest expiry first (or the lease of each -key)", cmdLeases},
	{"unpark", "return parked rows to pending", cmdUnpark},
	{"retry-now", "make rows waiting for their run-at claimable now", cmdRetryNow},
	{"reap", "run one reaper sweep", cmdReap},
	{"force-release", "free the lease of -key whoever holds it", cmdForceRelease},
	{"ddl", "print the SQL for a migration", cmdDDL},
}

// run is claimctl's main logic: it returns the exit code and writes the
// output to stdout and one line per error to stderr.
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
	return code
}

func runErr(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "help" {
		fmt.Fprint(stdout, usage())
		if len(args) == 0 {
			return usageErr("no command given")
		}
		return nil
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == args[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		return usageErr("unknown command %q (run claimctl help)", args[0])
	}
	o, err := parseOptions(cmd.name, args[1:])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	d, closeFn, err := connect(ctx, o)
	if err != nil {
		return err
	}
	defer closeFn()
	return cmd.run(ctx, &env{o: o, d: d, in: bufio.NewReader(stdin), out: stdout})
}

func usage() string {
	var b strings.Builder
	b.WriteString("usage: claimctl COMMAND -driver postgres|mysql|sqlite -dsn DSN (-config FILE | -table T ...) [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-14s %s\n", c.name, c.summary)
	}
	b.WriteString("\nexit codes: 0 ok, 1 failed, 2 usage, 3 schema mismatch, 4 cannot connect, 5 not confirmed\n")
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
	return &exitError{exitRefused, errNotConfirmed}
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
)

// Flag groups: the flags every command takes, those describing the claim
// table, those naming a coalescer's tables and those describing the lease
// table. A command's own flags are
// listed with it (see commands).
var (
	commonFlags = []string{"config", "driver", "dsn", "json", "timeout"}
	claimFlags  = []string{
		"table", "id", "id-kind", "status", "token", "claimed-at", "attempts", "version", "created-at", "run-at",
		"error", "worker", "text-times", "claimed-at-format", "created-at-format", "run-at-format", "clear-claimed-at", "scope-cols", "statuses", "int-statuses", "scope-text",
	}
	// coalesceFlags point at a coalescer's tables instead: its keys table
	// is then the claim table.
	coalesceFlags = []string{"coalesce", "coalesce-changes", "coalesce-keys", "coalesce-sources"}
	leaseFlags    = []string{
		"lease-table", "lease-kind", "lease-key", "lease-key-kind", "lease-key-len", "lease-owner", "lease-status",
		"lease-locked-at", "lease-expires-at", "lease-fence", "lease-locked-at-format", "lease-expires-at-format", "lease-ttl", "lease-done",
	}
	pauseFlags = []string{"pause-table"}
)

// defineFlags defines every flag of claimctl on fs, bound to o. A
// backquoted word in a usage names the flag's value in the help.
func defineFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.Config, "config", "", "JSON `file` with the connection and table descriptions (keys are flag names; flags override it)")
	fs.StringVar(&o.Driver, "driver", "", "database `driver`: postgres, mysql or sqlite")
	fs.StringVar(&o.DSN, "dsn", "", "data source `name` (default $CLAIMCTL_DSN)")
	fs.BoolVar(&o.JSON, "json", false, "print JSON")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "bound on the whole command")

	fs.StringVar(&o.Table, "table", "", "claim `table`")
	fs.StringVar(&o.ID, "id", "", "key `column` (default id)")
	fs.StringVar(&o.IDKind, "id-kind", "", "key `type`: int (default) or text")
	fs.StringVar(&o.Status, "status", "", "status `column` (default status)")
	fs.StringVar(&o.Token, "token", "", "token `column` (default token)")
	fs.StringVar(&o.ClaimedAt, "claimed-at", "", "claim time `column` (default claimed_at)")
	fs.StringVar(&o.Attempts, "attempts", "", "attempts `column` (optional)")
	fs.StringVar(&o.Version, "version", "", "version `column` (optional)")
	fs.StringVar(&o.CreatedAt, "created-at", "", "creation time `column` (optional)")
	fs.StringVar(&o.RunAt, "run-at", "", "run-at `column` (optional)")
	fs.StringVar(&o.Error, "error", "", "error `column` (optional)")
	fs.StringVar(&o.Worker, "worker", "", "worker `column` (optional): the worker of each row's claim, shown by stuck and the status page")
	fs.BoolVar(&o.TextTimes, "text-times", false, "SQLite: times stored as text")
	fs.StringVar(&o.ClaimedAtFmt, "claimed-at-format", "", "how the claim time column holds a time: native (a date-time type, the default), unix-seconds or unix-millis (an integer `format`)")
	fs.StringVar(&o.CreatedAtFmt, "created-at-format", "", "the creation time column's `format`, as -claimed-at-format")
	fs.StringVar(&o.RunAtFmt, "run-at-format", "", "the run-at column's `format`, as -claimed-at-format")
	fs.BoolVar(&o.ClearClaimedAt, "clear-claimed-at", false, "the table clears the claim time of pending rows")
	fs.Var(listFlag{&o.ScopeCols}, "scope-cols", "scope `columns`, comma-separated")
	fs.Var(listFlag{&o.Statuses}, "statuses", "pending,processing,done[,failed] status `values` (default PENDING,PROCESSING,DONE,FAILED)")
	fs.BoolVar(&o.IntStatuses, "int-statuses", false, "status values are integers")
	fs.BoolVar(&o.ScopeText, "scope-text", false, "pass scope values as text even when they look like integers")
	fs.BoolVar(&o.Coalesce, "coalesce", false, "the claim table is a coalescer's keys table (package coalesce), described by the library: give no -table")
	fs.StringVar(&o.CoalesceChanges, "coalesce-changes", "", "the coalescer's changes `table` (default "+coalesce.DefaultChangesTable+")")
	fs.StringVar(&o.CoalesceKeys, "coalesce-keys", "", "the coalescer's keys `table` (default "+coalesce.DefaultKeysTable+")")
	fs.StringVar(&o.CoalesceSources, "coalesce-sources", "", "the coalescer's sources `table` (default "+coalesce.DefaultSourcesTable+")")

	fs.StringVar(&o.LeaseTable, "lease-table", "", "lease `table`")
	fs.StringVar(&o.LeaseKind, "lease-kind", "", "the lease table's `kind`, whose columns the other -lease-* flags override: key (a key table of tasklock.CreateTable, the default), task (a task table with an owner column) or task-no-owner (a task table with only a lock time)")
	fs.StringVar(&o.LeaseKey, "lease-key", "", "key `column` (key: lease_key; task: id)")
	fs.StringVar(&o.LeaseKeyKind, "lease-key-kind", "", "key `type`: int or text (key: text; task: int)")
	fs.IntVar(&o.LeaseKeyLen, "lease-key-len", 0, "`length` of a text key column (default 255)")
	fs.StringVar(&o.LeaseOwner, "lease-owner", "", "owner `column` (key: owner; task: lock_owner; - for none)")
	fs.StringVar(&o.LeaseStatus, "lease-status", "", "task status `column` (task-no-owner: status; - for none)")
	fs.StringVar(&o.LeaseLockedAt, "lease-locked-at", "", "lock time `column` (default lock_at)")
	fs.StringVar(&o.LeaseExpiresAt, "lease-expires-at", "", "expiry `column` (key: expires_at; - for none)")
	fs.StringVar(&o.LeaseFence, "lease-fence", "", "fence `column` (key: fence; - for none)")
	fs.StringVar(&o.LeaseLockedFmt, "lease-locked-at-format", "", "the lock time column's `format`, as -claimed-at-format")
	fs.StringVar(&o.LeaseExpFmt, "lease-expires-at-format", "", "the expiry column's `format`, as -claimed-at-format")
	fs.Var(listFlag{&o.LeaseDone}, "lease-done", "the lease table's status `values` (-lease-status) that mean a task is finished, comma-separated: unpark warns when the -scope's task has one")
	fs.Var(ttlFlag{&o.LeaseTTL}, "lease-ttl", "the holders' `TTL` (a duration, or whole seconds), by which the expiry of a lease in a table without an expiry column is reckoned")

	fs.StringVar(&o.PauseTable, "pause-table", "", "the pause `table` (package claim's Pauses; pause, resume and pauses default to "+claim.DefaultPauseTable+")")

	fs.Var(repeatFlag{&o.Scopes}, "scope", "scope `values`, comma-separated in -scope-cols order (repeatable)")
	fs.Var(repeatFlag{&o.Keys}, "key", "lease `key` (repeatable)")
	fs.StringVar(&o.IDs, "ids", "", "row `keys`, comma-separated (default: every row of the scope)")
	fs.DurationVar(&o.Older, "older", 5*time.Minute, "rows processing for longer than this `duration`")
	fs.IntVar(&o.Limit, "limit", defaultLimit, "most `rows` listed")
	fs.IntVar(&o.MaxAttempts, "max-attempts", 0, "park stale rows whose attempts reached `n` (needs -attempts)")
	fs.BoolVar(&o.AllScopes, "all-scopes", false, "sweep (reap), pause or resume every scope: the whole table (default: the -scope given)")
	fs.StringVar(&o.Reason, "reason", "", "why the scope is paused (`text`, kept with the pause)")
	fs.StringVar(&o.By, "by", "", "who pauses (`name`, kept with the pause; default $USER)")
	fs.BoolVar(&o.ResetAttempts, "reset-attempts", false, "reset attempts to zero")
	fs.BoolVar(&o.AllIndexes, "all-indexes", false, "print every recommended index, not only the missing ones")
	fs.BoolVar(&o.Yes, "yes", false, "do not ask for confirmation")
	defineServeFlags(fs, &o.Serve)
}

// flagGroup is a titled set of a command's flags, for its help.
type flagGroup struct {
	title string
	names []string
}

// flagGroups returns the flags cmd takes, in the groups its help shows.
func (c *command) flagGroups() []flagGroup {
	groups := []flagGroup{{"flags", c.flags}}
	if c.tables&claimTable != 0 {
		groups = append(groups, flagGroup{"claim table", claimFlags})
	}
	if c.tables&(claimTable|coalesceTables) != 0 {
		groups = append(groups, flagGroup{"coalescer tables (the keys table is the claim table)", coalesceFlags})
	}
	if c.tables&leaseTable != 0 {
		groups = append(groups, flagGroup{"lease table", leaseFlags})
	}
	if c.tables&pauseTables != 0 {
		groups = append(groups, flagGroup{"pause table", pauseFlags})
	}
	return append(groups, flagGroup{"connection and output", commonFlags})
}

// flagSet returns the flag set of cmd bound to o: only the flags cmd
// takes. Its output is discarded: claimctl prints errors and help itself.
func (c *command) flagSet(o *options) *flag.FlagSet {
	all := flag.NewFlagSet("claimctl", flag.ContinueOnError)
	defineFlags(all, o)
	fs := flag.NewFlagSet("claimctl "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, g := range c.flagGroups() {
		for _, name := range g.names {
			f := all.Lookup(name)
			fs.Var(f.Value, f.Name, f.Usage)
		}
	}
	return fs
}

// help is cmd's help: its usage line, what it does, and its flags.
func (c *command) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: claimctl %s [flags]\n\n%s\n", c.name, c.about)
	all := c.flagSet(&options{})
	for _, g := range c.flagGroups() {
		if len(g.names) == 0 {
			continue
		}
		part := flag.NewFlagSet(g.title, flag.ContinueOnError)
		for _, name := range g.names {
			f := all.Lookup(name)
			part.Var(f.Value, f.Name, f.Usage)
		}
		part.SetOutput(&b)
		fmt.Fprintf(&b, "\n%s:\n", g.title)
		part.PrintDefaults()
	}
	return b.String()
}

// errHelp is parseOptions' answer to -h and -help: the caller prints the
// command's help and succeeds.
var errHelp = errors.New("help requested")

// parseOptions reads the flags of command name (and the config file they
// name). -h or -help returns errHelp; a flag the command does not take, a
// bad value or a stray argument is a usage error carrying the command's
// help.
func parseOptions(name string, args []string) (*options, error) {
	cmd := lookup(name)
	if cmd == nil {
		return nil, withUsage(usageErr("unknown command %q", name), usage())
	}
	o := &options{}
	fs := cmd.flagSet(o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, withUsage(usageErr("%v", err), cmd.help())
	}
	if fs.NArg() > 0 {
		return nil, withUsage(usageErr("unexpected argument %q (flags come after the command)", fs.Arg(0)), cmd.help())
	}
	if o.Config != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if err := o.loadFile(set); err != nil {
			return nil, err
		}
	}
	if o.DSN == "" {
		o.DSN = os.Getenv("CLAIMCTL_DSN")
	}
	if o.Limit < 1 || o.Limit > claim.MaxListLimit {
		return nil, usageErr("-limit %d is outside 1..%d", o.Limit, claim.MaxListLimit)
	}
	if o.Timeout <= 0 {
		return nil, usageErr("-timeout must be positive")
	}
	return o, nil
}

// listFlag is a comma-separated list.
type listFlag struct{ p *[]string }

func (l listFlag) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l listFlag) Set(s string) error {
	*l.p = nil
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l.p = append(*l.p, v)
		}
	}
	return nil
}

// repeatFlag collects every use of a flag.
type repeatFlag struct{ p *[]string }

func (r repeatFlag) String() string {
	if r.p == nil {
		return ""
	}
	return strings.Join(*r.p, " ")
}

func (r repeatFlag) Set(s string) error {
	*r.p = append(*r.p, s)
	return nil
}

// ttlFlag is a positive duration: Go's spelling ("90s", "5m") or a whole
// number of seconds ("300"), as a PHP task table's TTL is often written.
type ttlFlag struct{ p *time.Duration }

func (f ttlFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return ""
	}
	return f.p.String()
}

func (f ttlFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.ParseInt(s, 10, 64)
		if nerr != nil || n > int64(math.MaxInt64/time.Second) {
			return fmt.Errorf("want a duration (5m) or whole seconds (300), got %q", s)
		}
		d = time.Duration(n) * time.Second
	}
	if d <= 0 {
		return fmt.Errorf("must be positive, got %q", s)
	}
	*f.p = d
	return nil
}

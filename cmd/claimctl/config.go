package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

// Exit codes (see the package documentation).
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitSchema   = 3
	exitConnect  = 4
	exitRefused  = 5
	defaultLimit = 50
)

// exitError is an error with its exit code and, for a usage error of the
// command line, the usage to print after it.
type exitError struct {
	code  int
	err   error
	usage string
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// withUsage attaches the usage to print after a usage error.
func withUsage(err error, usage string) error {
	var ee *exitError
	if errors.As(err, &ee) {
		ee.usage = usage
	}
	return err
}

// options are every flag; the JSON config file uses the same names.
type options struct {
	Config string `json:"-"`
	Driver string `json:"driver"`
	DSN    string `json:"dsn"`

	Table          string   `json:"table"`
	ID             string   `json:"id"`
	IDKind         string   `json:"id-kind"`
	Status         string   `json:"status"`
	Token          string   `json:"token"`
	ClaimedAt      string   `json:"claimed-at"`
	Attempts       string   `json:"attempts"`
	Version        string   `json:"version"`
	CreatedAt      string   `json:"created-at"`
	RunAt          string   `json:"run-at"`
	Error          string   `json:"error"`
	Worker         string   `json:"worker"`
	TextTimes      bool     `json:"text-times"`
	ClaimedAtFmt   string   `json:"claimed-at-format"`
	CreatedAtFmt   string   `json:"created-at-format"`
	RunAtFmt       string   `json:"run-at-format"`
	ClearClaimedAt bool     `json:"clear-claimed-at"`
	ScopeCols      []string `json:"scope-cols"`
	Statuses       []string `json:"statuses"`
	IntStatuses    bool     `json:"int-statuses"`
	ScopeText      bool     `json:"scope-text"`

	// Coalesce says the claim table is a coalescer's keys table (package
	// coalesce), described by the library from the coalescer's table
	// names; its three tables are named by the other fields (default
	// coalesce's).
	Coalesce        bool   `json:"coalesce"`
	CoalesceChanges string `json:"coalesce-changes"`
	CoalesceKeys    string `json:"coalesce-keys"`
	CoalesceSources string `json:"coalesce-sources"`

	LeaseTable     string `json:"lease-table"`
	LeaseKind      string `json:"lease-kind"`
	LeaseKey       string `json:"lease-key"`
	LeaseKeyKind   string `json:"lease-key-kind"`
	LeaseKeyLen    int    `json:"lease-key-len"`
	LeaseOwner     string `json:"lease-owner"`
	LeaseStatus    string `json:"lease-status"`
	LeaseLockedAt  string `json:"lease-locked-at"`
	LeaseExpiresAt string `json:"lease-expires-at"`
	LeaseFence     string `json:"lease-fence"`
	LeaseLockedFmt string `json:"lease-locked-at-format"`
	LeaseExpFmt    string `json:"lease-expires-at-format"`
	// LeaseTTL is the holders' TTL, by which the expiry of a lease in a
	// table without an expiry column is reckoned.
	LeaseTTL time.Duration `json:"lease-ttl"`
	// LeaseDone are the values of the lease table's status column that
	// mean a task is finished.
	LeaseDone []string `json:"lease-done"`

	// PauseTable is the pause table (claim.Pauses); "" means claim's
	// default for the pause commands, and no pauses shown by serve.
	PauseTable string `json:"pause-table"`

	// Per command, never from the file.
	Scopes        []string      `json:"-"`
	Keys          []string      `json:"-"`
	IDs           string        `json:"-"`
	Older         time.Duration `json:"-"`
	Limit         int           `json:"-"`
	MaxAttempts   int           `json:"-"`
	AllScopes     bool          `json:"-"`
	ResetAttempts bool          `json:"-"`
	AllIndexes    bool          `json:"-"`
	Reason        string        `json:"-"`
	By            string        `json:"-"`
	JSON          bool          `json:"-"`
	Yes           bool          `json:"-"`
	Timeout       time.Duration `json:"-"`
	Serve         serveOptions  `json:"-"`
}

// loadFile fills the options the command line did not set from the JSON
// config file. Each field takes what its flag takes, in the flag's
// spelling (a string, "0,1,2,3" for a list) or as JSON spells the value (a
// number, a boolean, an array for a list): the value goes through the
// flag's own parser, so the file and the command line cannot disagree.
func (o *options) loadFile(set map[string]bool) error {
	data, err := os.ReadFile(o.Config)
	if err != nil {
		return usageErr("config: %v", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return usageErr("config %s: %v", o.Config, err)
	}
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	parsed := *o
	defineFlags(fs, o) // binds the flags to o, resetting o to their defaults
	*o = parsed
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !fileField[name] {
			return usageErr("config %s: unknown field %q", o.Config, name)
		}
		if set[name] {
			continue // the command line overrides the file
		}
		f := fs.Lookup(name)
		_, isList := f.Value.(listFlag)
		v, err := flagText(raw[name], isList)
		if err != nil {
			return usageErr("config %s: %q: %v", o.Config, name, err)
		}
		if err := f.Value.Set(v); err != nil {
			return usageErr("config %s: %q: invalid value %q: %v", o.Config, name, v, err)
		}
	}
	return nil
}

// fileField holds the names of the flags the config file may set: those
// of the options with a JSON name.
var fileField = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(options{})
	for i := range t.NumField() {
		if name := t.Field(i).Tag.Get("json"); name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}()

// flagText returns a config value as the command line would spell it: a
// string as it is, a number or boolean as its JSON text, and, for a list
// flag, an array of strings and numbers joined with commas.
func flagText(raw json.RawMessage, isList bool) (string, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	scalar := func(v any) (string, bool) {
		switch x := v.(type) {
		case string:
			return x, true
		case json.Number:
			return x.String(), true
		case bool:
			return strconv.FormatBool(x), true
		}
		return "", false
	}
	if s, ok := scalar(v); ok {
		return s, nil
	}
	arr, ok := v.([]any)
	if !ok || !isList {
		want := "a string, number or boolean"
		if isList {
			want += ", or an array of them"
		}
		return "", fmt.Errorf("want %s, got %s", want, strings.TrimSpace(string(raw)))
	}
	parts := make([]string, len(arr))
	for i, e := range arr {
		s, ok := scalar(e)
		if !ok || strings.Contains(s, ",") {
			return "", fmt.Errorf("element %d: want a string or number without a comma", i)
		}
		parts[i] = s
	}
	return strings.Join(parts, ","), nil
}

// claimTable builds the claim table description, validated; errors are
// usage errors naming the flag.
func (o *options) claimTable() (dialect.ClaimTable, error) {
	if o.Coalesce {
		return o.coalesceKeys()
	}
	if o.Table == "" {
		return dialect.ClaimTable{}, usageErr("-table is required (or -coalesce for a coalescer's keys table)")
	}
	t := dialect.ClaimTable{
		Table: o.Table, ID: o.ID, Status: o.Status, Token: o.Token, ClaimedAt: o.ClaimedAt,
		Attempts: o.Attempts, Version: o.Version, CreatedAt: o.CreatedAt, RunAt: o.RunAt, Error: o.Error,
		Worker: o.Worker, TextTimes: o.TextTimes, ClearClaimedAt: o.ClearClaimedAt, Scope: o.ScopeCols,
	}
	for _, tf := range []struct {
		flag string
		v    string
		dst  *dialect.TimeFormat
	}{{"-claimed-at-format", o.ClaimedAtFmt, &t.ClaimedAtFormat}, {"-created-at-format", o.CreatedAtFmt, &t.CreatedAtFormat}, {"-run-at-format", o.RunAtFmt, &t.RunAtFormat}} {
		f, err := timeFormat(tf.flag, tf.v)
		if err != nil {
			return t, err
		}
		*tf.dst = f
	}
	switch o.IDKind {
	case "", "int":
	case "text":
		t.IDKind = dialect.IDText
	default:
		return t, usageErr("-id-kind %q: want int or text", o.IDKind)
	}
	if len(o.Statuses) > 0 {
		if len(o.Statuses) < 3 || len(o.Statuses) > 4 {
			return t, usageErr("-statuses: want pending,processing,done[,failed], got %d value(s)", len(o.Statuses))
		}
		dst := []*dialect.Status{&t.Pending, &t.Processing, &t.Done, &t.Failed}
		for i, v := range o.Statuses {
			if o.IntStatuses {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return t, usageErr("-statuses: %q is not an integer", v)
				}
				*dst[i] = dialect.StatusInt(n)
			} else {
				*dst[i] = dialect.StatusString(v)
			}
		}
	}
	t = t.WithDefaults()
	if err := t.Validate(); err != nil {
		return t, usageErr("table description: %v", err)
	}
	return t, nil
}

// hasClaimTable says whether a claim table is described: -table, or a
// coalescer's keys table (-coalesce).
func (o *options) hasClaimTable() bool { return o.Table != "" || o.Coalesce }

// coalesceConfig returns the coalescer's table names, validated by package
// coalesce. The -coalesce-* flags need -coalesce; -table and the claim
// table's column flags do not go with it (the library describes the keys
// table).
func (o *options) coalesceConfig() (coalesce.Config, error) {
	cfg := coalesce.Config{ChangesTable: o.CoalesceChanges, KeysTable: o.CoalesceKeys, SourcesTable: o.CoalesceSources}
	if !o.Coalesce {
		if o.CoalesceChanges != "" || o.CoalesceKeys != "" || o.CoalesceSources != "" {
			return cfg, usageErr("-coalesce-changes, -coalesce-keys and -coalesce-sources need -coalesce")
		}
		return cfg, usageErr("-coalesce is required: the command reads a coalescer's tables")
	}
	if o.Table != "" {
		return cfg, usageErr("-table and -coalesce: give one (with -coalesce the claim table is the coalescer's keys table, -coalesce-keys)")
	}
	described := o.ID != "" || o.IDKind != "" || o.Status != "" || o.Token != "" || o.ClaimedAt != "" || o.Attempts != "" ||
		o.Version != "" || o.CreatedAt != "" || o.RunAt != "" || o.Error != "" || o.Worker != "" || o.TextTimes || o.ClaimedAtFmt != "" ||
		o.CreatedAtFmt != "" || o.RunAtFmt != "" || o.ClearClaimedAt || len(o.ScopeCols) > 0 || len(o.Statuses) > 0 || o.IntStatuses
	if described {
		return cfg, usageErr("-coalesce: the library describes the keys table; drop the claim table's column flags (-id, -status, -error, ...)")
	}
	if _, err := coalesce.KeysTable(cfg); err != nil {
		return cfg, usageErr("coalescer tables: %v", err)
	}
	return cfg, nil
}

// coalesceKeys describes the coalescer's keys table as package coalesce
// does.
func (o *options) coalesceKeys() (dialect.ClaimTable, error) {
	cfg, err := o.coalesceConfig()
	if err != nil {
		return dialect.ClaimTable{}, err
	}
	t, err := coalesce.KeysTable(cfg)
	if err != nil {
		return t, usageErr("coalescer tables: %v", err)
	}
	return t, nil
}

// scopeValues parses the -scope values: one list per flag use, each with
// one value per scope column. Integers pass as int64 unless -scope-text.
func (o *options) scopeValues(spec dialect.ClaimTable) ([][]any, error) {
	if len(o.Scopes) > 0 && len(spec.Scope) == 0 {
		return nil, usageErr("-scope given, but the table has no scope columns (-scope-cols)")
	}
	var out [][]any
	for _, s := range o.Scopes {
		parts := strings.Split(s, ",")
		if len(parts) != len(spec.Scope) {
			return nil, usageErr("-scope %q: %d value(s) for %d scope column(s) (-scope-cols %s)", s, len(parts), len(spec.Scope), strings.Join(spec.Scope, ","))
		}
		vals := make([]any, len(parts))
		for i, p := range parts {
			p = strings.TrimSpace(p)
			if n, err := strconv.ParseInt(p, 10, 64); err == nil && !o.ScopeText {
				vals[i] = n
			} else {
				vals[i] = p
			}
		}
		out = append(out, vals)
	}
	return out, nil
}

// oneScope returns the single scope a row command works on: the -scope
// given, or none for an unscoped table.
func (o *options) oneScope(spec dialect.ClaimTable) ([]any, error) {
	all, err := o.scopeValues(spec)
	if err != nil {
		return nil, err
	}
	switch {
	case len(all) > 1:
		return nil, usageErr("give one -scope for this command")
	case len(all) == 1:
		return all[0], nil
	case len(spec.Scope) > 0:
		return nil, usageErr("-scope is required: the table has scope column(s) %s", strings.Join(spec.Scope, ","))
	}
	return nil, nil
}

// ids parses -ids for spec's key type.
func (o *options) ids(spec dialect.ClaimTable) ([]any, error) {
	if o.IDs == "" {
		return nil, nil
	}
	var out []any
	for _, p := range strings.Split(o.IDs, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if spec.IDKind == dialect.IDText {
			out = append(out, p)
			continue
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, usageErr("-ids: %q is not an integer key", p)
		}
		out = append(out, n)
	}
	if len(out) > claim.MaxRowIDs {
		return nil, usageErr("-ids: %d keys; at most %d", len(out), claim.MaxRowIDs)
	}
	return out, nil
}

// claimConfig is the claim configuration of spec for scope values.
func claimConfig(spec dialect.ClaimTable, scope []any) claim.Config {
	return claim.Config{ClaimTable: spec, ScopeValues: scope}
}

// leaseKinds are the lease table shapes -lease-kind names: the library's
// own descriptions, whose columns the -lease-* flags then override.
var leaseKinds = map[string]func(table string) dialect.LeaseTable{
	"key":           tasklock.KeyTable,
	"task":          tasklock.TaskTable,
	"task-no-owner": tasklock.TaskTableNoOwner,
}

// noColumn as a column flag's value says the table has no such column.
const noColumn = "-"

// leaseTable builds the lease table description: the shape -lease-kind
// names, with the columns the -lease-* flags give ("-" for an optional
// column the table lacks), validated.
func (o *options) leaseTable() (dialect.LeaseTable, error) {
	if o.LeaseTable == "" {
		return dialect.LeaseTable{}, usageErr("-lease-table is required")
	}
	kind := o.LeaseKind
	if kind == "" {
		kind = "key"
	}
	shape, ok := leaseKinds[kind]
	if !ok {
		return dialect.LeaseTable{}, usageErr("-lease-kind %q: want key, task or task-no-owner", o.LeaseKind)
	}
	t := shape(o.LeaseTable)
	for _, c := range []struct {
		flag     string
		dst      *string
		v        string
		optional bool
	}{
		{"-lease-key", &t.Key, o.LeaseKey, false},
		{"-lease-owner", &t.Owner, o.LeaseOwner, true},
		{"-lease-status", &t.Status, o.LeaseStatus, true},
		{"-lease-locked-at", &t.LockedAt, o.LeaseLockedAt, false},
		{"-lease-expires-at", &t.ExpiresAt, o.LeaseExpiresAt, true},
		{"-lease-fence", &t.Fence, o.LeaseFence, true},
	} {
		switch {
		case c.v == "":
		case c.v != noColumn:
			*c.dst = c.v
		case c.optional:
			*c.dst = ""
		default:
			return t, usageErr("%s: the lease table needs this column; %q names none", c.flag, noColumn)
		}
	}
	switch o.LeaseKeyKind {
	case "":
	case "int":
		t.KeyKind = dialect.IDInt
	case "text":
		t.KeyKind = dialect.IDText
	default:
		return t, usageErr("-lease-key-kind %q: want int or text", o.LeaseKeyKind)
	}
	var err error
	if t.LockedAtFormat, err = timeFormat("-lease-locked-at-format", o.LeaseLockedFmt); err != nil {
		return t, err
	}
	if t.ExpiresAtFormat, err = timeFormat("-lease-expires-at-format", o.LeaseExpFmt); err != nil {
		return t, err
	}
	if o.LeaseKeyLen < 0 {
		return t, usageErr("-lease-key-len %d: must not be negative", o.LeaseKeyLen)
	}
	if o.LeaseKeyLen > 0 {
		t.KeyMaxLen = o.LeaseKeyLen
	}
	if err := t.Validate(); err != nil {
		return t, usageErr("lease table description: %v", err)
	}
	if len(o.LeaseDone) > 0 && t.Status == "" {
		return t, usageErr("-lease-done needs the lease table's status column (-lease-status)")
	}
	return t, nil
}

// timeFormat parses a -...-format flag: native (the default),
// unix-seconds or unix-millis.
func timeFormat(flag, v string) (dialect.TimeFormat, error) {
	switch v {
	case "", "native":
		return dialect.TimeNative, nil
	case "unix-seconds":
		return dialect.UnixSeconds, nil
	case "unix-millis":
		return dialect.UnixMillis, nil
	}
	return 0, usageErr("%s %q: want native, unix-seconds or unix-millis", flag, v)
}

// leaseKey converts a -key to the lease table's key type.
func leaseKey(t dialect.LeaseTable, k string) (any, error) {
	if t.KeyKind == dialect.IDText {
		return k, nil
	}
	n, err := strconv.ParseInt(k, 10, 64)
	if err != nil {
		return nil, usageErr("-key %q: the lease table has integer keys", k)
	}
	return n, nil
}

var errNotConfirmed = errors.New("not confirmed; nothing changed (use -yes to skip the question)")

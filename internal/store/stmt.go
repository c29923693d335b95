package store

import (
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// A Stmt is one statement rendered from an engine's template: its SQL text
// with the engine's placeholders, and what each placeholder takes, in
// order. Engines write values as {{arg "name"}} (and the scope conditions
// and key lists through {{scope}} and {{keys}}), so the order of a
// statement's arguments is read from its text and can never disagree with
// it; a name that is not one of [Args]' fails the render, so a typo fails
// when the store is built, not when the statement first runs.
type Stmt struct {
	SQL string
	// names are the placeholders' names, in order (for the golden files).
	names []string
	// binds take each placeholder's value from a call's Args; nil for an
	// expanded key list.
	binds []binder
	// expand is true when the key list is rendered as one placeholder per
	// key (keysMarker) rather than one array value.
	expand bool
}

// Args are the values a statement may take, by the names engines use in
// their templates (see binders).
type Args struct {
	Token       string        // "token"
	AckToken    string        // "ack_token": the ack's token in an ack+claim statement
	Owner       string        // "owner"
	Limit       int           // "limit"
	MaxAttempts int           // "max_attempts"
	Below       int64         // "below": attempts a returned row has fewer of
	Timeout     time.Duration // "timeout", in the engine's time unit (at least 1); "older", the same rounded up (0 stays 0)
	TTL         time.Duration // "ttl", in the engine's time unit
	Slack       time.Duration // "slack", in the engine's time unit (may be 0)
	Stamp       int64         // "stamp": a lease's LockedAt as an integer
	Hold        time.Time     // "hold": a time on the database clock, in the engine's time unit since the Unix epoch, rounded up
	Status      any           // "status": a status value
	Key         any           // "key" (a lease key)
	From        int64         // "from" (a key cursor)
	After       any           // "after": a claim's rotating key cursor (int64 or string)
	Scope       []any         // {{scope}}: "scope0", "scope1", ...
	Keys        []any         // {{keys}}: normalised keys
	Versions    []int64       // "versions" (array engines only)
	Schema      any           // "schema": a schema name, or nil for the current one
	Table       string        // "table": an unquoted table name (catalog queries)
	Index       string        // "index": an unquoted index name (catalog queries)
	Delay       time.Duration // "delay", in the engine's time unit (0 stays 0)
	Error       string        // "error": a failure's text ("" binds NULL)
	HoldLimit   time.Duration // "hold_ms": whole milliseconds as text (PostgreSQL settings); "hold_s": whole seconds; both rounded up, at least 1

	// Scheduled runs (times in microseconds since the Unix epoch).
	Job     string // "job": a scheduled job's name
	Fire    int64  // "fire": a fire time
	Prev    int64  // "prev": a job's cursor as read
	Until   int64  // "until": the end of a skipped range (exclusive)
	WinFrom int64  // "win_from": the earliest database now a claim may commit at
	WinTo   int64  // "win_to": the database now a claim must commit before
	Fence   int64  // "fence": a run's fencing token
	Worker  string // "worker": who runs or records
	Flag    int64  // "flag": a 0/1 flag
	Offset  int64  // "offset": rows to pass over
}

// binder takes one placeholder's value from a call's Args; u is the
// engine's time unit.
type binder func(u Unit, a *Args) any

// binders are the names {{arg "name"}} accepts, and how each takes its
// value. {{scope}} and {{keys}} bind "scopeN" and "keys" themselves.
var binders = map[string]binder{
	"token":        func(_ Unit, a *Args) any { return a.Token },
	"ack_token":    func(_ Unit, a *Args) any { return a.AckToken },
	"owner":        func(_ Unit, a *Args) any { return a.Owner },
	"limit":        func(_ Unit, a *Args) any { return int64(a.Limit) },
	"max_attempts": func(_ Unit, a *Args) any { return int64(a.MaxAttempts) },
	"below":        func(_ Unit, a *Args) any { return a.Below },
	"timeout":      func(u Unit, a *Args) any { return u.convert(a.Timeout) },
	"older":        func(u Unit, a *Args) any { return u.ceil(a.Timeout) },
	"ttl":          func(u Unit, a *Args) any { return u.convert(a.TTL) },
	"slack":        func(u Unit, a *Args) any { return u.ceil(a.Slack) },
	"delay":        func(u Unit, a *Args) any { return u.ceil(a.Delay) },
	"stamp":        func(_ Unit, a *Args) any { return a.Stamp },
	"hold":         func(u Unit, a *Args) any { return u.epoch(a.Hold) },
	"status":       func(_ Unit, a *Args) any { return a.Status },
	"key":          func(_ Unit, a *Args) any { return a.Key },
	"from":         func(_ Unit, a *Args) any { return a.From },
	"after":        func(_ Unit, a *Args) any { return a.After },
	"versions":     func(_ Unit, a *Args) any { return a.Versions },
	"schema":       func(_ Unit, a *Args) any { return a.Schema },
	"table":        func(_ Unit, a *Args) any { return a.Table },
	"index":        func(_ Unit, a *Args) any { return a.Index },
	"hold_ms": func(_ Unit, a *Args) any {
		return strconv.FormatInt(max(int64((a.HoldLimit+time.Millisecond-1)/time.Millisecond), 1), 10)
	},
	"hold_s": func(_ Unit, a *Args) any { return max(int64((a.HoldLimit+time.Second-1)/time.Second), 1) },
	"error": func(_ Unit, a *Args) any {
		if a.Error == "" {
			return nil
		}
		return a.Error
	},
	// Scheduled runs.
	"job":      func(_ Unit, a *Args) any { return a.Job },
	"fire":     func(_ Unit, a *Args) any { return a.Fire },
	"prev":     func(_ Unit, a *Args) any { return a.Prev },
	"until":    func(_ Unit, a *Args) any { return a.Until },
	"win_from": func(_ Unit, a *Args) any { return a.WinFrom },
	"win_to":   func(_ Unit, a *Args) any { return a.WinTo },
	"fence":    func(_ Unit, a *Args) any { return a.Fence },
	"worker":   func(_ Unit, a *Args) any { return a.Worker },
	"flag":     func(_ Unit, a *Args) any { return a.Flag },
	"offset":   func(_ Unit, a *Args) any { return a.Offset },
}

// scopeBinder binds the i-th scope value.
func scopeBinder(i int) binder { return func(_ Unit, a *Args) any { return a.Scope[i] } }

// keysBinder binds a key list as one typed array.
func keysBinder(_ Unit, a *Args) any { return typedKeys(a.Keys) }

// keysMarker stands in a rendered statement for the placeholders of an
// expanded key list; Bind replaces it with as many placeholders as keys.
const keysMarker = "\x00keys\x00"

// Unit is the integer unit an engine's time arithmetic takes durations in.
type Unit int

// The time units of durations passed to statements.
const (
	Microseconds Unit = iota
	Milliseconds
)

// convert returns d in u, at least 1 (a positive duration never rounds to an
// empty interval).
func (u Unit) convert(d time.Duration) int64 {
	n := d.Microseconds()
	if u == Milliseconds {
		n = d.Milliseconds()
	}
	return max(n, 1)
}

// ceil returns d in u, rounded up (zero stays zero).
func (u Unit) ceil(d time.Duration) int64 {
	step := time.Microsecond
	if u == Milliseconds {
		step = time.Millisecond
	}
	return int64((d + step - 1) / step)
}

// epoch returns t as an integer count of u since the Unix epoch, rounded
// up: a hold read back early would let a key go early.
func (u Unit) epoch(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Sub(time.UnixMicro(us)) > 0 {
		us++
	}
	if u == Milliseconds {
		return (us + 999) / 1000 // the times of interest are after 1970
	}
	return us
}

// Dialect is how an engine writes placeholders and key lists.
type Dialect struct {
	// Dollar numbers placeholders $1, $2, ... (PostgreSQL); otherwise ?.
	Dollar bool
	// ArrayKeys passes a key list as one array value rendered by
	// KeysIntArray / KeysTextArray (for example "= ANY(%s::bigint[])", with
	// %s the placeholder); otherwise {{keys}} renders IN (?, ?, ...).
	ArrayKeys                   bool
	KeysIntArray, KeysTextArray string
	// TimeUnit is the unit of "timeout" and "ttl" values.
	TimeUnit Unit
}

// render executes one engine template with data and returns the statement.
// textKeys selects the text-array form of {{keys}}. A placeholder name that
// is not in binders fails the render.
func (d Dialect) render(name, src string, data any, textKeys bool) (Stmt, error) {
	var st Stmt
	ph := func(arg string, b binder) string {
		st.names = append(st.names, arg)
		st.binds = append(st.binds, b)
		if d.Dollar {
			return "$" + strconv.Itoa(len(st.names))
		}
		return "?"
	}
	funcs := template.FuncMap{
		"arg": func(arg string) (string, error) {
			if b, ok := binders[arg]; ok {
				return ph(arg, b), nil
			}
			if i, err := strconv.Atoi(strings.TrimPrefix(arg, "scope")); err == nil && i >= 0 && "scope"+strconv.Itoa(i) == arg {
				return ph(arg, scopeBinder(i)), nil // a scope value, for a template that writes its own scope condition
			}
			return "", fmt.Errorf("unknown placeholder name %q", arg)
		},
		// scope renders " AND a = ? AND b = ?" for the quoted scope columns.
		"scope": func(cols []string) string {
			var b strings.Builder
			for i, c := range cols {
				fmt.Fprintf(&b, " AND %s = %s", c, ph("scope"+strconv.Itoa(i), scopeBinder(i)))
			}
			return b.String()
		},
		// keys renders the condition "IN (...)" (or "= ANY(...)") on a key
		// list.
		"keys": func() string {
			if d.ArrayKeys {
				f := d.KeysIntArray
				if textKeys {
					f = d.KeysTextArray
				}
				return fmt.Sprintf(f, ph("keys", keysBinder))
			}
			st.names = append(st.names, "keys")
			st.binds = append(st.binds, nil)
			st.expand = true
			return "IN (" + keysMarker + ")"
		},
		"join": func(cols []string) string { return strings.Join(cols, ", ") },
		// tc packs a time column, its Names...Per and placeholder names
		// for one of the engine's time fragments.
		"tc": func(col, per string, args ...string) timeArg { return timeArg{C: col, Per: per, Args: args} },
	}
	t, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(src)
	if err != nil {
		return Stmt{}, fmt.Errorf("statement %s: %w", name, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return Stmt{}, fmt.Errorf("statement %s: %w", name, err)
	}
	st.SQL = strings.Join(strings.Fields(b.String()), " ")
	if st.expand && d.Dollar {
		return Stmt{}, fmt.Errorf("statement %s: an expanded key list needs ? placeholders", name)
	}
	return st, nil
}

// Names returns the names of the statement's placeholders, in order.
func (s Stmt) Names() []string { return s.names }

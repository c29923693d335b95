package store

import (
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// A Stmt is one statement rendered from an engine's template: its SQL text
// with the engine's placeholders, and the names of the values those
// placeholders take, in order. Engines write values as {{arg "name"}} (and
// the scope conditions and key lists through {{scope}} and {{keys}}), so
// the order of a statement's arguments is read from its text and can never
// disagree with it.
type Stmt struct {
	SQL  string
	args []string
	// expand is true when the key list is rendered as one placeholder per
	// key (keysMarker) rather than one array value.
	expand bool
}

// Args are the values a statement may take, by the names engines use in
// their templates.
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
	Scope       []any         // {{scope}}
	Keys        []any         // {{keys}}: normalised keys
	Versions    []int64       // "versions" (array engines only)
	Schema      any           // "schema": a schema name, or nil for the current one
	Table       string        // "table": an unquoted table name (catalog queries)
	Index       string        // "index": an unquoted index name (catalog queries)
	Delay       time.Duration // "delay", in the engine's time unit (0 stays 0)
	Error       string        // "error": a failure's text ("" binds NULL)
}

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
// textKeys selects the text-array form of {{keys}}.
func (d Dialect) render(name, src string, data any, textKeys bool) (Stmt, error) {
	var st Stmt
	ph := func(arg string) string {
		st.args = append(st.args, arg)
		if d.Dollar {
			return "$" + strconv.Itoa(len(st.args))
		}
		return "?"
	}
	funcs := template.FuncMap{
		"arg": ph,
		// scope renders " AND a = ? AND b = ?" for the quoted scope columns.
		"scope": func(cols []string) string {
			var b strings.Builder
			for i, c := range cols {
				fmt.Fprintf(&b, " AND %s = %s", c, ph("scope"+strconv.Itoa(i)))
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
				return fmt.Sprintf(f, ph("keys"))
			}
			st.args = append(st.args, "keys")
			st.expand = true
			return "IN (" + keysMarker + ")"
		},
		"join": func(cols []string) string { return strings.Join(cols, ", ") },
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

// Bind returns the statement's SQL and its arguments taken from a, in the
// order of its placeholders.
func (s Stmt) Bind(d Dialect, a *Args) (string, []any) {
	q := s.SQL
	out := make([]any, 0, len(s.args)+len(a.Keys))
	for _, name := range s.args {
		switch name {
		case "token":
			out = append(out, a.Token)
		case "ack_token":
			out = append(out, a.AckToken)
		case "owner":
			out = append(out, a.Owner)
		case "limit":
			out = append(out, int64(a.Limit))
		case "max_attempts":
			out = append(out, int64(a.MaxAttempts))
		case "below":
			out = append(out, a.Below)
		case "timeout":
			out = append(out, d.TimeUnit.convert(a.Timeout))
		case "ttl":
			out = append(out, d.TimeUnit.convert(a.TTL))
		case "stamp":
			out = append(out, a.Stamp)
		case "hold":
			out = append(out, d.TimeUnit.epoch(a.Hold))
		case "status":
			out = append(out, a.Status)
		case "slack":
			out = append(out, d.TimeUnit.ceil(a.Slack))
		case "key":
			out = append(out, a.Key)
		case "from":
			out = append(out, a.From)
		case "versions":
			out = append(out, a.Versions)
		case "schema":
			out = append(out, a.Schema)
		case "table":
			out = append(out, a.Table)
		case "index":
			out = append(out, a.Index)
		case "delay":
			out = append(out, d.TimeUnit.ceil(a.Delay))
		case "older":
			out = append(out, d.TimeUnit.ceil(a.Timeout))
		case "error":
			if a.Error == "" {
				out = append(out, nil)
			} else {
				out = append(out, a.Error)
			}
		case "keys":
			if s.expand {
				out = append(out, a.Keys...)
				q = strings.Replace(q, keysMarker, placeholders(len(a.Keys)), 1)
			} else {
				out = append(out, typedKeys(a.Keys))
			}
		default: // scopeN
			i, _ := strconv.Atoi(strings.TrimPrefix(name, "scope"))
			out = append(out, a.Scope[i])
		}
	}
	return q, out
}

// placeholders renders n question marks separated by commas.
func placeholders(n int) string {
	if n == 0 {
		return "NULL" // IN (NULL) matches nothing
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// typedKeys turns normalised keys into one typed slice, []int64 or
// []string, for engines that take a key list as an array.
func typedKeys(keys []any) any {
	if len(keys) > 0 {
		if _, ok := keys[0].(string); ok {
			out := make([]string, len(keys))
			for i, k := range keys {
				out[i] = k.(string)
			}
			return out
		}
	}
	out := make([]int64, len(keys))
	for i, k := range keys {
		out[i] = k.(int64)
	}
	return out
}

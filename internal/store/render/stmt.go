package render

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"text/template"
)

// A Stmt is one statement rendered from an engine's template: its SQL text
// with the engine's placeholders, and what each placeholder takes, in
// order.
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

// Names returns the names of the statement's placeholders, in order.
func (s Stmt) Names() []string { return s.names }

// Style is how an engine writes placeholders, key lists and durations.
type Style struct {
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

// keysMarker stands in a rendered statement for the placeholders of an
// expanded key list; Bind replaces it with as many placeholders as keys.
const keysMarker = "\x00keys\x00"

// timeArg is what {{tc}} passes to an engine's time fragments: a quoted
// time column, its ...Per value (how many of the engine's time units make
// one of the column's; "" for the engine's own convention), and
// placeholder names.
type timeArg struct {
	C, Per string
	Args   []string
}

// Render executes one engine template with data and returns the statement.
// textKeys selects the text-array form of {{keys}}. A placeholder name that
// is not one of Args' fails the render, as does a field data lacks.
func (d Style) Render(name, src string, data any, textKeys bool) (Stmt, error) {
	var st Stmt
	base, err := parsed(src)
	if err != nil {
		return Stmt{}, fmt.Errorf("statement %s: %w", name, err)
	}
	// The clone shares base's parse trees, which executing never changes,
	// and takes this render's functions, which write into st.
	t, err := base.Clone()
	if err != nil {
		return Stmt{}, fmt.Errorf("statement %s: %w", name, err)
	}
	t.Funcs(d.funcs(&st, textKeys))
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

// templates holds each template source parsed once, by source text (a
// *template.Template, or the error that parsing it returned). The sources
// are the engines' statement templates, a fixed set, and every store of
// every table renders them again: parsing them anew each time was most of
// the cost of building a store.
var templates sync.Map

// parsed returns src parsed, from templates or parsed now (under the name
// "statement": Render's errors say which statement). Parsing only checks
// that the functions exist; each render sets its own with Funcs on a clone.
func parsed(src string) (*template.Template, error) {
	type entry struct {
		t   *template.Template
		err error
	}
	if e, ok := templates.Load(src); ok {
		return e.(entry).t, e.(entry).err
	}
	t, err := template.New("statement").Funcs(Style{}.funcs(&Stmt{}, false)).Option("missingkey=error").Parse(src)
	e, _ := templates.LoadOrStore(src, entry{t, err})
	return e.(entry).t, e.(entry).err
}

// funcs are the template functions of one render into st.
func (d Style) funcs(st *Stmt, textKeys bool) template.FuncMap {
	ph := func(arg string, b binder) string {
		st.names = append(st.names, arg)
		st.binds = append(st.binds, b)
		if d.Dollar {
			return "$" + strconv.Itoa(len(st.names))
		}
		return "?"
	}
	return template.FuncMap{
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
		// tc packs a time column, its ...Per value and placeholder names
		// for one of the engine's time fragments.
		"tc": func(col, per string, args ...string) timeArg { return timeArg{C: col, Per: per, Args: args} },
	}
}

// Bind returns the statement's SQL and its arguments taken from a, in the
// order of its placeholders.
func (s Stmt) Bind(d Style, a *Args) (string, []any) {
	q := s.SQL
	out := make([]any, 0, len(s.binds)+len(a.Keys))
	for _, b := range s.binds {
		if b != nil {
			out = append(out, b(d.TimeUnit, a))
			continue
		}
		out = append(out, a.Keys...) // the expanded key list
		q = strings.Replace(q, keysMarker, placeholders(len(a.Keys)), 1)
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

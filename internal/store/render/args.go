package render

import (
	"strconv"
	"time"
)

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

	// Pauses.
	PauseScope string // "pause_scope": a paused scope's text ("" for a whole table)
	Reason     string // "reason": why a scope is paused ("" binds NULL)
	By         string // "by": who paused it ("" binds NULL)
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
	// Pauses.
	"pause_scope": func(_ Unit, a *Args) any { return a.PauseScope },
	"reason":      func(_ Unit, a *Args) any { return nullIfEmpty(a.Reason) },
	"by":          func(_ Unit, a *Args) any { return nullIfEmpty(a.By) },
}

// nullIfEmpty binds "" as NULL.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// scopeBinder binds the i-th scope value.
func scopeBinder(i int) binder { return func(_ Unit, a *Args) any { return a.Scope[i] } }

// keysBinder binds a key list as one typed array.
func keysBinder(_ Unit, a *Args) any { return typedKeys(a.Keys) }

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

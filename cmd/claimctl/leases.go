package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

// unknownTTL is the TTL the locker of a lease table without an expiry
// column is built with when -lease-ttl is not given: it reads no expiry by
// it (the lock time is the expiry it reports minus it), so any will do.
const unknownTTL = time.Minute

// leaseTTL is the TTL claimctl reckons expiries by: the holders' TTL from
// -lease-ttl, which a table without an expiry column needs (known false
// without it; a table with one keeps each lease's own).
func (o *options) leaseTTL(lt dialect.LeaseTable) (ttl time.Duration, known bool) {
	if o.LeaseTTL > 0 {
		return o.LeaseTTL, true
	}
	return unknownTTL, lt.ExpiresAt != ""
}

// locker builds and verifies the lease table's locker, with the TTL of
// leaseTTL.
func (e *env) locker(ctx context.Context) (dialect.LeaseTable, *tasklock.Locker, error) {
	lt, err := e.o.leaseTable()
	if err != nil {
		return lt, nil, err
	}
	ttl, _ := e.o.leaseTTL(lt)
	k, err := tasklock.New(e.d, tasklock.Config{Table: lt, TTL: ttl})
	if err != nil {
		return lt, nil, usageErr("lease table description: %v", err)
	}
	if err := k.Verify(ctx); err != nil {
		return lt, nil, schemaErr(err)
	}
	return lt, k, nil
}

// keys converts the -key values to lt's key type and checks them.
func (e *env) keys(lt dialect.LeaseTable, k *tasklock.Locker) ([]any, error) {
	out := make([]any, len(e.o.Keys))
	for i, s := range e.o.Keys {
		key, err := leaseKey(lt, s)
		if err != nil {
			return nil, err
		}
		if err := k.CheckKey(key); err != nil {
			return nil, usageErr("-key %q: %v", s, err)
		}
		out[i] = key
	}
	return out, nil
}

// leaseOut is one lease as claimctl shows it. Times are on the database
// clock.
type leaseOut struct {
	Key   any    `json:"key"`
	State string `json:"state"`
	// Owner is the owner token, or, in a table without an owner column,
	// the stamp (the lock time as an integer) that identifies the holder.
	Owner string `json:"owner,omitempty"`
	// Holder is who holds the lease as far as the table knows: the owner
	// column's value, or "unknown" without one.
	Holder string `json:"holder,omitempty"`
	Fence  int64  `json:"fence"`
	// LockedAt is the lock time (the time of the stamp), for a table
	// without an expiry column.
	LockedAt *time.Time `json:"locked_at,omitempty"`
	// ExpiresAt is the expiry: the expiry column's, or the lock time plus
	// TTLSeconds (-lease-ttl); none when the TTL is unknown.
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	TTLSeconds float64    `json:"ttl_seconds,omitempty"`
	// RemainingSeconds is the time left until ExpiresAt: on the database
	// clock when DBClock is set (listing every holder), else ExpiresAt
	// minus this machine's clock, an estimate off by the skew between the
	// two.
	RemainingSeconds float64 `json:"remaining_seconds"`
	DBClock          bool    `json:"remaining_on_db_clock"`
	// Note says what is unknown (the TTL, the holder).
	Note string `json:"note,omitempty"`
}

// Notes of a lease.
const (
	noteNoTTL   = "the table has no expiry column and no -lease-ttl was given: expiry unknown"
	unknownHold = "unknown (no owner column)"
)

// leaseFrom is the lease of key in lt as st says: absent (no row), free,
// held, expired (past its expiry, neither taken again nor reaped), or, in
// a table without an expiry column and without -lease-ttl, locked (the
// holders' TTL, hence whether it passed, unknown). remaining is the time
// left on the database clock when dbClock, else unknown.
func (o *options) leaseFrom(lt dialect.LeaseTable, key any, st tasklock.State, remaining time.Duration, dbClock bool) leaseOut {
	l := leaseOut{Key: key, Owner: st.Owner, Fence: st.Fence}
	switch {
	case !st.Exists:
		l.State = "absent"
		return l
	case st.Owner == "":
		l.State = "free"
		return l
	}
	l.Holder = st.Owner
	if lt.Owner == "" {
		l.Holder = unknownHold
	}
	ttl, known := o.leaseTTL(lt)
	exp := st.ExpiresAt.UTC()
	if exp.IsZero() {
		// An owner without an expiry or lock time (written by hand): an
		// acquisition takes such a lease.
		l.State, l.Note = "expired", "no expiry or lock time: an acquisition takes it"
		return l
	}
	if lt.ExpiresAt == "" {
		// The library reckons the expiry as the lock time plus the
		// locker's TTL: the lock time is what comes before it.
		at := exp.Add(-ttl)
		l.LockedAt = &at
		if !known {
			l.State, l.Note = "locked", noteNoTTL
			return l
		}
		l.TTLSeconds = seconds(ttl)
	}
	l.ExpiresAt = &exp
	l.State = "held"
	if st.Expired {
		l.State = "expired"
		return l
	}
	if dbClock {
		l.RemainingSeconds, l.DBClock = seconds(remaining), true
	} else {
		l.RemainingSeconds = max(seconds(time.Until(exp)), 0)
	}
	return l
}

// inspect reads the lease of key in lt (see leaseFrom).
func (o *options) inspect(ctx context.Context, lt dialect.LeaseTable, k *tasklock.Locker, key any) (leaseOut, error) {
	st, err := k.Inspect(ctx, key)
	if err != nil {
		return leaseOut{}, err
	}
	return o.leaseFrom(lt, key, st, 0, false), nil
}

// holders lists up to limit leases of lt that have a holder (see
// leaseFrom), soonest expiry (or, without an expiry column, oldest lock)
// first, with the time left on the database clock.
func (o *options) holders(ctx context.Context, lt dialect.LeaseTable, k *tasklock.Locker, limit int) ([]leaseOut, error) {
	held, err := k.Held(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]leaseOut, len(held))
	for i, h := range held {
		out[i] = o.leaseFrom(lt, h.Key, h.State, h.Remaining, true)
	}
	return out, nil
}

// timeText formats a time on the database clock for people: RFC 3339 in
// UTC, to the millisecond.
func timeText(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func cmdLeases(ctx context.Context, e *env) error {
	lt, k, err := e.locker(ctx)
	if err != nil {
		return err
	}
	keys, err := e.keys(lt, k)
	if err != nil {
		return err
	}
	var out []leaseOut
	if len(keys) == 0 {
		// Every lease with a holder, with the time left on the database
		// clock.
		if out, err = e.o.holders(ctx, lt, k, e.o.Limit); err != nil {
			return err
		}
	}
	for _, key := range keys {
		l, err := e.o.inspect(ctx, lt, k, key)
		if err != nil {
			return err
		}
		out = append(out, l)
	}
	if e.o.JSON {
		if out == nil {
			out = []leaseOut{}
		}
		return printJSON(e.out, out)
	}
	var cells [][]string
	noTTL := false
	for _, l := range out {
		holder, remaining := l.Holder, "-"
		if holder == "" {
			holder = "-"
		}
		if l.State == "held" {
			remaining = age(time.Duration(l.RemainingSeconds * float64(time.Second)))
			if !l.DBClock {
				remaining = "~" + remaining
			}
		}
		noTTL = noTTL || l.Note == noteNoTTL
		cells = append(cells, []string{fmt.Sprint(l.Key), l.State, holder, strconv.FormatInt(l.Fence, 10), timeText(l.LockedAt), timeText(l.ExpiresAt), remaining})
	}
	if err := printTable(e.out, []string{"KEY", "STATE", "HOLDER", "FENCE", "LOCKED AT", "EXPIRES AT", "REMAINING"}, cells); err != nil {
		return err
	}
	if len(keys) == 0 && len(out) == e.o.Limit {
		fmt.Fprintf(e.out, "(first %d leases; raise -limit for more)\n", e.o.Limit)
	}
	fmt.Fprintln(e.out, leaseNotes(lt, noTTL))
	return nil
}

// leaseNotes is the line under a list of leases: the clock its times are
// on, how expiries are reckoned and what the table cannot say.
func leaseNotes(lt dialect.LeaseTable, noTTL bool) string {
	var notes []string
	notes = append(notes, "times are UTC on the database clock")
	if lt.ExpiresAt == "" {
		if noTTL {
			notes = append(notes, "no expiry column: an expiry is the lock time plus the holders' TTL; give it with -lease-ttl")
		} else {
			notes = append(notes, "no expiry column: an expiry is the lock time plus -lease-ttl")
		}
	}
	if lt.Owner == "" {
		notes = append(notes, "no owner column: a holder is known by its lock time only")
	}
	return "(" + strings.Join(notes, "; ") + ")"
}

func cmdForceRelease(ctx context.Context, e *env) error {
	lt, k, err := e.locker(ctx)
	if err != nil {
		return err
	}
	if len(e.o.Keys) != 1 {
		return usageErr("give exactly one -key")
	}
	keys, err := e.keys(lt, k)
	if err != nil {
		return err
	}
	key := keys[0]
	l, err := e.o.inspect(ctx, lt, k, key)
	if err != nil {
		return err
	}
	if l.State == "absent" || l.State == "free" {
		return e.report(actionResult{Action: "force-release", Table: lt.Table}, fmt.Sprintf("lease %v is %s; nothing changed", key, l.State))
	}
	q := fmt.Sprintf("Force-release lease %v of %s, %s by owner %s (fence %d). A live holder keeps working until its next renewal fails: do this only when fences guard its writes or the holder is dead.",
		key, lt.Table, l.State, l.Owner, l.Fence)
	if lt.Owner == "" {
		// The holder is known by its stamp, the lock time it wrote; on a
		// whole-second column a new holder in the same second gets the
		// same stamp, and the old one would renew and release its lease.
		q = fmt.Sprintf("Force-release lease %v of %s, %s since %s (stamp %s, fence %d). The table has no owner column: a live holder keeps working, and on a lock time of whole seconds it can take over the stamp of the next holder: do this only when the holder is dead.",
			key, lt.Table, l.State, timeText(l.LockedAt), l.Owner, l.Fence)
	}
	if err := e.confirm(q); err != nil {
		return err
	}
	ok, err := k.ForceRelease(ctx, key)
	if err != nil {
		return err
	}
	n := int64(0)
	msg := fmt.Sprintf("lease %v was freed meanwhile; nothing changed", key)
	if ok {
		n, msg = 1, fmt.Sprintf("released lease %v (was fence %d, owner %s)", key, l.Fence, l.Owner)
	}
	return e.report(actionResult{Action: "force-release", Table: lt.Table, Rows: n}, msg)
}

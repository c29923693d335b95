package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

// locker builds and verifies the lease table's locker.
func (e *env) locker(ctx context.Context) (dialect.LeaseTable, *tasklock.Locker, error) {
	lt, err := e.o.leaseTable()
	if err != nil {
		return lt, nil, err
	}
	k, err := tasklock.New(e.d, tasklock.Config{Table: lt, TTL: time.Minute})
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

// leaseOut is one lease as claimctl shows it.
type leaseOut struct {
	Key   any    `json:"key"`
	State string `json:"state"`
	Owner string `json:"owner,omitempty"`
	Fence int64  `json:"fence"`
	// ExpiresAt is on the database clock.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// RemainingSeconds is the time left until ExpiresAt: on the database
	// clock when DBClock is set (listing every holder), else ExpiresAt
	// minus this machine's clock, an estimate off by the skew between the
	// two.
	RemainingSeconds float64 `json:"remaining_seconds"`
	DBClock          bool    `json:"remaining_on_db_clock"`
}

// inspect reads the lease of key in lt. Its state is absent (no row),
// free, held, expired (past its expiry, neither taken again nor reaped), or,
// in a table without an expiry column, locked: a holder's TTL is its own,
// so whether it has passed is unknown.
func inspect(ctx context.Context, lt dialect.LeaseTable, k *tasklock.Locker, key any) (leaseOut, error) {
	st, err := k.Inspect(ctx, key)
	if err != nil {
		return leaseOut{}, err
	}
	l := leaseOut{Key: key, Owner: st.Owner, Fence: st.Fence}
	switch {
	case !st.Exists:
		l.State = "absent"
	case st.Owner == "":
		l.State = "free"
	case lt.ExpiresAt == "":
		l.State = "locked"
	case st.Expired:
		l.State = "expired"
	default:
		l.State = "held"
	}
	if !st.ExpiresAt.IsZero() {
		t := st.ExpiresAt.UTC()
		l.ExpiresAt = &t
		if l.State == "held" {
			l.RemainingSeconds = max(seconds(time.Until(t)), 0)
		}
	}
	return l, nil
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
		// Every held lease, soonest expiry first, with the time left on
		// the database clock.
		holders, err := k.Held(ctx, e.o.Limit)
		if errors.Is(err, dialect.ErrNotSupported) {
			return usageErr("the lease table has no expiry column to list holders by; give each lease with -key (repeatable)")
		}
		if err != nil {
			return err
		}
		for _, h := range holders {
			t := h.ExpiresAt.UTC()
			l := leaseOut{Key: h.Key, State: "held", Owner: h.Owner, Fence: h.Fence, ExpiresAt: &t, RemainingSeconds: seconds(h.Remaining), DBClock: true}
			if h.Expired {
				l.State = "expired"
			}
			out = append(out, l)
		}
	}
	for _, key := range keys {
		l, err := inspect(ctx, lt, k, key)
		if err != nil {
			return err
		}
		out = append(out, l)
	}
	if e.o.JSON {
		return printJSON(e.out, out)
	}
	var cells [][]string
	for _, l := range out {
		owner, expires, remaining := l.Owner, "-", "-"
		if owner == "" {
			owner = "-"
		}
		if l.ExpiresAt != nil {
			expires = l.ExpiresAt.Format("2006-01-02 15:04:05.000 MST")
		}
		if l.State == "held" {
			remaining = age(time.Duration(l.RemainingSeconds * float64(time.Second)))
			if !l.DBClock {
				remaining = "~" + remaining
			}
		}
		cells = append(cells, []string{fmt.Sprint(l.Key), l.State, owner, strconv.FormatInt(l.Fence, 10), expires, remaining})
	}
	return printTable(e.out, []string{"KEY", "STATE", "OWNER", "FENCE", "EXPIRES AT (DB CLOCK)", "REMAINING"}, cells)
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
	l, err := inspect(ctx, lt, k, key)
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
		q = fmt.Sprintf("Force-release lease %v of %s, %s with stamp %s (fence %d). The table has no owner column: a live holder keeps working, and on a lock time of whole seconds it can take over the stamp of the next holder: do this only when the holder is dead.",
			key, lt.Table, l.State, l.Owner, l.Fence)
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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// summary is the outcome of one run.
type summary struct {
	Mode     string `json:"mode"`
	Driver   string `json:"driver"`
	Writers  int    `json:"writers"`
	Flushers int    `json:"flushers"`
	Users    int    `json:"users"`

	// Events are the distinct events sent; Accepted those recorded (each
	// once); DuplicatesIgnored the resends that were recognised.
	Events            int64 `json:"events"`
	Accepted          int64 `json:"accepted"`
	DuplicatesIgnored int64 `json:"duplicates_ignored"`
	HotEvents         int64 `json:"hot_events"`

	// StateWrites are the writes of state rows (per the rows' counters).
	StateWrites    int64 `json:"state_writes"`
	HotStateWrites int64 `json:"hot_state_writes"`
	// Requeues are folds whose key went back to pending because changes
	// arrived during the fold (the coalescer's OpFold events).
	Requeues int64 `json:"requeues"`
	// Retries are naive mode's transactions re-run after a deadlock or
	// busy error (the coalescer's own retries are not counted).
	Retries int64 `json:"retries"`

	WriteSeconds       float64 `json:"write_seconds"`
	TotalSeconds       float64 `json:"total_seconds"`
	AcceptedPerSec     float64 `json:"accepted_per_sec"`
	StateWritesPerSec  float64 `json:"state_writes_per_sec"`
	CoalescingRatio    float64 `json:"coalescing_ratio"`
	HotCoalescingRatio float64 `json:"hot_coalescing_ratio"`
	// HotP50Ms and HotP99Ms are the latencies of one write call of the hot
	// user as a client sees it (the row-lock queue shows here in naive
	// mode); P50Ms and P99Ms those of the other users.
	HotP50Ms float64 `json:"hot_p50_ms"`
	HotP99Ms float64 `json:"hot_p99_ms"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	// PersistP50Ms and PersistP99Ms are the times from an event's first
	// send until its delta was committed in its user's state row (naive
	// mode: the write itself; coalesce: until a flush folded it), over all
	// users; BacklogMaxMs is the longest, the oldest the backlog of
	// unfolded events got.
	PersistP50Ms float64 `json:"persist_p50_ms"`
	PersistP99Ms float64 `json:"persist_p99_ms"`
	BacklogMaxMs float64 `json:"backlog_max_ms"`

	// LockWaits and LockWaitMs are the lock waits of the run on the
	// server's own account, and their time summed over sessions
	// (LockWaitsBy says how they were measured; empty on SQLite, whose
	// waits for its one writer are Retries).
	LockWaits   int64   `json:"lock_waits"`
	LockWaitMs  float64 `json:"lock_wait_ms"`
	LockWaitsBy string  `json:"lock_waits_by,omitempty"`

	HotTotal    int64  `json:"hot_total"`
	HotExpected int64  `json:"hot_expected"`
	Verified    bool   `json:"verified"`
	Problem     string `json:"problem,omitempty"`
}

type userFold struct{ count, sum int64 }

// verify compares the database with the workload: every event was recorded
// exactly once (naive mode: in ss_events; the others: in the coalescer's
// changes table, each folded, no key left dirty or parked), and every
// user's state row holds the sum of its events' deltas. It fills the
// state-write counts and sets Verified or Problem.
func (a *app) verify(ctx context.Context, evs []event, s *summary) error {
	want := map[string]*userFold{}
	resends := int64(0)
	for u := int64(1); u <= int64(a.o.users); u++ {
		want[userKey(u)] = &userFold{}
	}
	for _, e := range evs {
		f := want[userKey(e.User)]
		f.count++
		f.sum += e.Delta
		if e.Resend {
			resends++
		}
	}
	hot := userKey(hotUser)
	s.HotEvents, s.HotExpected = want[hot].count, want[hot].sum

	recorded, unfolded, err := a.recorded(ctx)
	if err != nil {
		return err
	}
	state := map[string]*userFold{} // count holds the state row's writes
	rows, err := a.db.SQL.QueryContext(ctx, a.sq.statePerKey)
	if err != nil {
		return err
	}
	for rows.Next() {
		var k string
		var f userFold
		if err := rows.Scan(&k, &f.sum, &f.count); err != nil {
			rows.Close()
			return err
		}
		state[k] = &f
		s.StateWrites += f.count
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if f := state[hot]; f != nil {
		s.HotTotal, s.HotStateWrites = f.sum, f.count
	}
	var dirty, parked int64
	if a.o.mode != "naive" {
		st, err := a.flusher.Claimer().Stats(ctx)
		if err != nil {
			return err
		}
		dirty, parked = st.Pending+st.Processing, st.Failed
	}

	problem := func() string {
		if s.Accepted != s.Events {
			return fmt.Sprintf("accepted %d writes for %d distinct events", s.Accepted, s.Events)
		}
		if s.DuplicatesIgnored != resends {
			return fmt.Sprintf("ignored %d resends of %d", s.DuplicatesIgnored, resends)
		}
		if unfolded != 0 {
			return fmt.Sprintf("%d accepted events were never folded into the state", unfolded)
		}
		if dirty != 0 || parked != 0 {
			return fmt.Sprintf("users left dirty: %d, parked: %d", dirty, parked)
		}
		for k, in := range recorded {
			if want[k] == nil {
				return fmt.Sprintf("user %s: %d events recorded, none sent", k, in.count)
			}
		}
		for u := int64(1); u <= int64(a.o.users); u++ {
			k := userKey(u)
			w, in, got := want[k], recorded[k], state[k]
			if in == nil {
				in = &userFold{}
			}
			if *in != *w {
				return fmt.Sprintf("user %s: %d events recorded (sum %d), %d sent (sum %d)", k, in.count, in.sum, w.count, w.sum)
			}
			if got == nil && w.count == 0 {
				continue // no events, no state row
			}
			if got == nil {
				return fmt.Sprintf("user %s: no state row", k)
			}
			if got.sum != w.sum {
				return fmt.Sprintf("user %s: state total %d, the sum of its accepted events is %d", k, got.sum, w.sum)
			}
		}
		return ""
	}()
	s.Problem, s.Verified = problem, problem == ""
	return nil
}

// recorded returns the events recorded per user (count and sum of deltas)
// and how many of them were not folded into the state: naive mode's
// ss_events (applied as they were recorded), or the coalescer's changes.
func (a *app) recorded(ctx context.Context) (map[string]*userFold, int64, error) {
	got := map[string]*userFold{}
	if a.o.mode == "naive" {
		rows, err := a.db.SQL.QueryContext(ctx, a.sq.eventsPerKey)
		if err != nil {
			return nil, 0, err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			var f userFold
			if err := rows.Scan(&k, &f.count, &f.sum); err != nil {
				return nil, 0, err
			}
			got[k] = &f
		}
		return got, 0, rows.Err()
	}
	rows, err := a.db.SQL.QueryContext(ctx, a.sq.changes)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var unfolded int64
	for rows.Next() {
		var k, id string
		var payload []byte
		var open bool
		if err := rows.Scan(&k, &id, &payload, &open); err != nil {
			return nil, 0, err
		}
		d, err := strconv.ParseInt(string(payload), 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("change %s: payload %q: %w", id, payload, err)
		}
		f := got[k]
		if f == nil {
			f = &userFold{}
			got[k] = f
		}
		f.count++
		f.sum += d
		if open {
			unfolded++
		}
	}
	return got, unfolded, rows.Err()
}

func (s summary) writeJSON(w io.Writer) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func (s summary) writeText(w io.Writer) {
	fmt.Fprintf(w, "statesync: mode=%s driver=%s writers=%d flushers=%d users=%d\n", s.Mode, s.Driver, s.Writers, s.Flushers, s.Users)
	fmt.Fprintf(w, "events:             %d distinct (%d for the hot user), %d resent\n", s.Events, s.HotEvents, s.DuplicatesIgnored)
	fmt.Fprintf(w, "accepted:           %d (duplicates ignored: %d)\n", s.Accepted, s.DuplicatesIgnored)
	fmt.Fprintf(w, "accepted writes/s:  %.0f\n", s.AcceptedPerSec)
	fmt.Fprintf(w, "write latency:      hot user p50 %.2f ms, p99 %.2f ms; others p50 %.2f ms, p99 %.2f ms\n", s.HotP50Ms, s.HotP99Ms, s.P50Ms, s.P99Ms)
	fmt.Fprintf(w, "until persisted:    p50 %.2f ms, p99 %.2f ms; oldest backlog %.2f ms\n", s.PersistP50Ms, s.PersistP99Ms, s.BacklogMaxMs)
	fmt.Fprintf(w, "state writes:       %d (hot user: %d), %.0f/s\n", s.StateWrites, s.HotStateWrites, s.StateWritesPerSec)
	fmt.Fprintf(w, "coalescing ratio:   %.1f events per state write (hot user: %.1f)\n", s.CoalescingRatio, s.HotCoalescingRatio)
	fmt.Fprintf(w, "requeues:           %d\n", s.Requeues)
	fmt.Fprintf(w, "retries:            %d\n", s.Retries)
	if s.LockWaitsBy != "" {
		fmt.Fprintf(w, "lock waits:         %d, %.0f ms in all (%s)\n", s.LockWaits, s.LockWaitMs, s.LockWaitsBy)
	}
	fmt.Fprintf(w, "hot user total:     %d (expected %d)\n", s.HotTotal, s.HotExpected)
	fmt.Fprintf(w, "elapsed:            %.2fs writing, %.2fs until folded\n", s.WriteSeconds, s.TotalSeconds)
	fmt.Fprintf(w, "verified: %t\n", s.Verified)
	if !s.Verified {
		fmt.Fprintf(w, "problem: %s\n", s.Problem)
	}
}

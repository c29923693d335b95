package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	// Requeues are flushed users whose version moved during the flush;
	// EmptyFlushes the flushes that then found nothing left to fold.
	Requeues     int64 `json:"requeues"`
	EmptyFlushes int64 `json:"empty_flushes"`
	// DirtyWrites are the writes that marked a user dirty (a compare-and-set
	// that matched); DirtyConflicts the ones that found the row changed.
	DirtyWrites    int64 `json:"dirty_writes"`
	DirtyConflicts int64 `json:"dirty_conflicts"`
	// Retries are the program's own transactions re-run after a deadlock
	// or busy error (the library's retries of its claims and acks are not
	// counted).
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

type userFold struct{ count, sum, maxSeq int64 }

// verify compares the database with the workload: the intake holds each
// event exactly once, every event was folded, and every state row equals the
// fold of its user's events (total and last seq). It fills the state-write
// counts and sets Verified or Problem.
func (a *app) verify(ctx context.Context, evs []event, s *summary) error {
	want := map[int64]*userFold{}
	resends := int64(0)
	for u := int64(1); u <= int64(a.o.users); u++ {
		want[u] = &userFold{}
	}
	for _, e := range evs {
		f := want[e.User]
		f.count++
		f.sum += e.Delta
		f.maxSeq = max(f.maxSeq, e.Seq)
		if e.Resend {
			resends++
		}
	}
	s.HotEvents, s.HotExpected = want[hotUser].count, want[hotUser].sum

	db := a.db.SQL
	intake := map[int64]*userFold{}
	rows, err := db.QueryContext(ctx, a.sq.eventsPerUser)
	if err != nil {
		return err
	}
	for rows.Next() {
		var u int64
		var f userFold
		if err := rows.Scan(&u, &f.count, &f.sum, &f.maxSeq); err != nil {
			rows.Close()
			return err
		}
		intake[u] = &f
	}
	if err := rows.Close(); err != nil {
		return err
	}
	state := map[int64]*userFold{} // count holds the state row's writes
	rows, err = db.QueryContext(ctx, a.sq.statePerUser)
	if err != nil {
		return err
	}
	for rows.Next() {
		var u int64
		var f userFold
		if err := rows.Scan(&u, &f.sum, &f.maxSeq, &f.count); err != nil {
			rows.Close()
			return err
		}
		state[u] = &f
		s.StateWrites += f.count
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if f := state[hotUser]; f != nil {
		s.HotTotal, s.HotStateWrites = f.sum, f.count
	}
	var unapplied int64
	if err := db.QueryRowContext(ctx, a.sq.unapplied).Scan(&unapplied); err != nil {
		return err
	}
	st, err := a.claimer.Stats(ctx)
	if err != nil {
		return err
	}

	problem := func() string {
		if s.Accepted != s.Events {
			return fmt.Sprintf("accepted %d writes for %d distinct events", s.Accepted, s.Events)
		}
		if s.DuplicatesIgnored != resends {
			return fmt.Sprintf("ignored %d resends of %d", s.DuplicatesIgnored, resends)
		}
		if unapplied != 0 {
			return fmt.Sprintf("%d accepted events were never folded into the state", unapplied)
		}
		if st.Pending != 0 || st.Processing != 0 {
			return fmt.Sprintf("users left dirty: %d pending, %d processing", st.Pending, st.Processing)
		}
		for u := int64(1); u <= int64(a.o.users); u++ {
			w, in, got := want[u], intake[u], state[u]
			if in == nil {
				in = &userFold{}
			}
			if *in != *w {
				return fmt.Sprintf("user %d: intake holds %d events (sum %d, max seq %d), sent %d (sum %d, max seq %d)",
					u, in.count, in.sum, in.maxSeq, w.count, w.sum, w.maxSeq)
			}
			if got == nil {
				return fmt.Sprintf("user %d: no state row", u)
			}
			if got.sum != w.sum || got.maxSeq != w.maxSeq {
				return fmt.Sprintf("user %d: state total %d last seq %d, fold of accepted events is %d and %d",
					u, got.sum, got.maxSeq, w.sum, w.maxSeq)
			}
		}
		return ""
	}()
	s.Problem, s.Verified = problem, problem == ""
	return nil
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
	fmt.Fprintf(w, "requeues:           %d (empty flushes: %d)\n", s.Requeues, s.EmptyFlushes)
	if s.Mode != "naive" {
		fmt.Fprintf(w, "dirty-row writes:   %d (conflicts: %d)\n", s.DirtyWrites, s.DirtyConflicts)
	}
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

// Package await waits, in tests, for work that advances step by step (a
// drain of rows, a fleet finishing a task) and fails as soon as it stops
// advancing, saying what was awaited and what was last seen: a guarantee
// that breaks (a row retried forever, a lock never released) then fails
// the test in seconds, not at a generous fixed timeout or the package's.
// It is for tests only.
package await

import (
	"testing"
	"time"
)

// State is what one poll saw.
type State struct {
	// Done ends the wait.
	Done bool
	// Progress is a count that grows while the work advances, and only
	// then: rows in a final state, say, not rows that changed status (a
	// row retried forever changes status without end).
	Progress int64
	// Seen describes the state for the failure message.
	Seen string
}

// pollEvery is the pause between polls.
const pollEvery = 10 * time.Millisecond

// Progress polls until a poll reports Done. It fails t (t.Fatalf, so it
// must run on the test's goroutine) when the poll's Progress has not grown
// for stall, when limit has passed since the start (zero: no limit
// besides stall), or at once when poll returns an error; the message names
// what was awaited, the last state seen, and how long the wait had run.
func Progress(t testing.TB, what string, stall, limit time.Duration, poll func() (State, error)) {
	t.Helper()
	start := time.Now()
	advanced := start
	var best int64
	first := true
	for {
		st, err := poll()
		now := time.Now()
		if err != nil {
			t.Fatalf("waiting for %s: after %v: %v (last seen: %s)", what, now.Sub(start).Round(time.Millisecond), err, st.Seen)
		}
		if st.Done {
			return
		}
		if first || st.Progress > best {
			best, advanced, first = st.Progress, now, false
		}
		switch {
		case now.Sub(advanced) > stall:
			t.Fatalf("waiting for %s: no progress for %v (progress %d, reached %v after the start); last seen: %s",
				what, stall, best, advanced.Sub(start).Round(time.Millisecond), st.Seen)
		case limit > 0 && now.Sub(start) > limit:
			t.Fatalf("waiting for %s: not done after %v, though still progressing (progress %d); last seen: %s",
				what, limit, best, st.Seen)
		}
		time.Sleep(pollEvery)
	}
}

// Until polls cond until it reports done, failing t (t.Fatalf) after limit
// with what was awaited and what cond last described: for a wait that has
// no steps to count, bounded by what the test expects (a lease's TTL and a
// few seconds, say), not by a generous minute.
func Until(t testing.TB, what string, limit time.Duration, cond func() (done bool, seen string)) {
	t.Helper()
	start := time.Now()
	for {
		done, seen := cond()
		if done {
			return
		}
		if time.Since(start) > limit {
			t.Fatalf("waiting for %s: not done after %v; last seen: %s", what, limit, seen)
		}
		time.Sleep(pollEvery)
	}
}

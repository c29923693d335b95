// Package schedtest holds what the tests of package schedule and of its
// scheduler adapters (contrib/gocron, contrib/robfigcron) share: reading a
// job's history and accounting for every fire time in it, skewed
// schedules and clocks, and child processes that report JSON events.
package schedtest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/schedule"
)

// History reads a job's whole history, oldest first.
func History(t testing.TB, s *schedule.Scheduler, job string) []schedule.Record {
	t.Helper()
	var out []schedule.Record
	before := time.Time{}
	for {
		recs, err := s.History(context.Background(), job, before, 1000)
		require.NoError(t, err)
		out = append(out, recs...)
		if len(recs) < 1000 {
			break
		}
		before = recs[len(recs)-1].FireTime
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FireTime.Before(out[j].FireTime) })
	return out
}

// Accounting is how a job's fire times in a span were recorded.
type Accounting struct {
	// Fires counts the schedule's fire times in the span.
	Fires int
	// Runs counts run records in the span (lost and failed included),
	// Skipped skipped ranges.
	Runs, Skipped, Lost, Failed int
	// Uncovered are fire times with no record; Twice those with more than
	// one.
	Uncovered, Twice []time.Time
}

// String summarises a.
func (a Accounting) String() string {
	return fmt.Sprintf("fires=%d runs=%d skipped-ranges=%d lost=%d failed=%d uncovered=%d twice=%d",
		a.Fires, a.Runs, a.Skipped, a.Lost, a.Failed, len(a.Uncovered), len(a.Twice))
}

// Account checks every fire time of sched in [from, to] against recs: each
// must be covered by exactly one record, a run at it or a skipped range
// holding it.
func Account(recs []schedule.Record, sched schedule.Schedule, from, to time.Time) Accounting {
	var a Accounting
	cover := map[int64]int{}
	for _, r := range recs {
		if r.Status == schedule.Skipped {
			for f := r.FireTime; f.Before(r.Until); f = sched.Next(f) {
				cover[f.UnixMicro()]++
			}
			continue
		}
		cover[r.FireTime.UnixMicro()]++
	}
	for f := sched.Next(from.Add(-time.Microsecond)); !f.After(to); f = sched.Next(f) {
		a.Fires++
		switch cover[f.UnixMicro()] {
		case 0:
			a.Uncovered = append(a.Uncovered, f)
		case 1:
		default:
			a.Twice = append(a.Twice, f)
		}
	}
	for _, r := range recs {
		if r.FireTime.Before(from) || r.FireTime.After(to) {
			continue
		}
		switch r.Status {
		case schedule.Skipped:
			a.Skipped++
		case schedule.Lost:
			a.Lost++
			a.Runs++
		case schedule.Failed:
			a.Failed++
			a.Runs++
		default:
			a.Runs++
		}
	}
	return a
}

// Span returns the fire times a history covers: from its first record's
// fire time to its last one's, or the end of the last skipped range.
func Span(recs []schedule.Record) (from, to time.Time) {
	last := recs[len(recs)-1]
	to = last.FireTime
	if last.Status == schedule.Skipped {
		to = last.Until.Add(-time.Microsecond)
	}
	return recs[0].FireTime, to
}

// AccountAll accounts for the whole span of a history.
func AccountAll(recs []schedule.Record, sched schedule.Schedule) Accounting {
	from, to := Span(recs)
	return Account(recs, sched, from, to)
}

// Skewed returns s as a scheduler on a host whose clock is ahead by skew
// sees it: it asks s at its own (skewed) time and sleeps until the answer
// on its own clock, so its ticks come skew early in real time (late for a
// negative skew). It has the method set of robfig/cron's cron.Schedule.
func Skewed(s schedule.Schedule, skew time.Duration) schedule.Schedule {
	return skewed{s, skew}
}

type skewed struct {
	s    schedule.Schedule
	skew time.Duration
}

// Next implements schedule.Schedule.
func (k skewed) Next(t time.Time) time.Time {
	n := k.s.Next(t.Add(k.skew))
	if n.IsZero() {
		return n
	}
	return n.Add(-k.skew)
}

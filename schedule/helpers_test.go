package schedule_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/schedule"
)

// forEachEngine runs fn as a parallel subtest per engine, on a fresh
// database with the schedule tables.
func forEachEngine(t *testing.T, fn func(t *testing.T, c *testengine.Conn)) {
	t.Helper()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			c := testengine.Open(t, e, 0)
			require.NoError(t, schedule.CreateTables(context.Background(), c.Dialect, "", ""))
			fn(t, c)
		})
	}
}

// history reads a job's whole history, oldest first.
func history(t testing.TB, s *schedule.Scheduler, job string) []schedule.Record {
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

// accounting is how a job's fire times between two instants were
// recorded.
type accounting struct {
	fires            int // fire times in the span
	runs, skipped    int // by records
	lost, failed     int
	byStatus         map[schedule.Status]int
	uncovered, twice []time.Time
}

func (a accounting) String() string {
	return fmt.Sprintf("fires=%d runs=%d skipped=%d lost=%d failed=%d uncovered=%d twice=%d", a.fires, a.runs, a.skipped, a.lost, a.failed, len(a.uncovered), len(a.twice))
}

// account checks that every fire time of sched in [from, to] is covered
// by exactly one record: a run at it, or a skipped range holding it.
func account(recs []schedule.Record, sched schedule.Schedule, from, to time.Time) accounting {
	a := accounting{byStatus: map[schedule.Status]int{}}
	cover := map[int64]int{}
	for _, r := range recs {
		a.byStatus[r.Status]++
		if r.Status == schedule.Skipped {
			for f := r.FireTime; f.Before(r.Until); f = sched.Next(f) {
				cover[f.UnixMicro()]++
			}
			continue
		}
		cover[r.FireTime.UnixMicro()]++
	}
	for f := sched.Next(from.Add(-time.Microsecond)); !f.After(to); f = sched.Next(f) {
		a.fires++
		switch cover[f.UnixMicro()] {
		case 0:
			a.uncovered = append(a.uncovered, f)
		case 1:
		default:
			a.twice = append(a.twice, f)
		}
	}
	for _, r := range recs {
		if r.FireTime.Before(from) || r.FireTime.After(to) {
			continue
		}
		switch r.Status {
		case schedule.Skipped:
			a.skipped++
		case schedule.Lost:
			a.lost++
			a.runs++
		case schedule.Failed:
			a.failed++
			a.runs++
		default:
			a.runs++
		}
	}
	return a
}

// span returns the fire times a history covers: from its first record's
// fire time to its last one's, or the end of the last skipped range.
func span(recs []schedule.Record) (from, to time.Time) {
	last := recs[len(recs)-1]
	to = last.FireTime
	if last.Status == schedule.Skipped {
		to = last.Until.Add(-time.Microsecond)
	}
	return recs[0].FireTime, to
}

// accountAll accounts for the whole span of a history.
func accountAll(recs []schedule.Record, sched schedule.Schedule) accounting {
	from, to := span(recs)
	return account(recs, sched, from, to)
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

type engine struct {
	name string
	// args returns -driver/-dsn for a fresh database.
	args func(t *testing.T) []string
}

func engines() []engine {
	return []engine{
		{"sqlite", func(t *testing.T) []string { return []string{"-driver", "sqlite", "-dsn", dbtest.SQLitePath(t)} }},
		{"postgres", func(t *testing.T) []string { return []string{"-driver", "postgres", "-dsn", dbtest.PostgresDSN(t)} }},
		{"mysql", func(t *testing.T) []string { return []string{"-driver", "mysql", "-dsn", dbtest.MySQLDSN(t)} }},
	}
}

// smallEvents is the number of distinct events of the small workload.
const smallEvents = 600

// small is a workload that runs in about a second per mode and engine:
// a hot user with half the events, and a tenth of the events sent twice.
var small = []string{"-quiet", "-json", "-events", "600", "-writers", "8", "-users", "5", "-hot", "0.5", "-dup", "0.1", "-flushers", "2", "-linger", "2ms"}

// resends is the number of events of the small workload sent twice.
func resends(t *testing.T) int64 {
	o, err := parseFlags(small, io.Discard)
	require.NoError(t, err)
	var n int64
	for _, e := range generate(o) {
		if e.Resend {
			n++
		}
	}
	require.Positive(t, n)
	return n
}

func runJSON(t *testing.T, args ...string) summary {
	t.Helper()
	var out bytes.Buffer
	start := time.Now()
	require.NoError(t, run(context.Background(), args, &out, io.Discard))
	var s summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &s), out.String())
	t.Logf("%s %s in %v: %s", s.Driver, s.Mode, time.Since(start).Round(time.Millisecond), out.String())
	return s
}

// TestModesAreExact runs both modes on every engine: each ends with every
// user's state equal to the fold of its accepted events, counted once;
// resent events are recognised and ignored; naive writes the state once per
// event, coalesce far less often.
func TestModesAreExact(t *testing.T) {
	t.Parallel()
	dups := resends(t)
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db := e.args(t)

			n := runJSON(t, append(append([]string{}, db...), append(small, "-mode", "naive")...)...)
			require.True(t, n.Verified, n.Problem)
			require.EqualValues(t, smallEvents, n.Accepted)
			require.Equal(t, dups, n.DuplicatesIgnored)
			require.EqualValues(t, smallEvents, n.StateWrites, "naive writes the state row once per accepted event")
			require.Equal(t, n.HotExpected, n.HotTotal)
			require.Positive(t, n.HotEvents)

			// The same database again: setup empties the tables.
			c := runJSON(t, append(append([]string{}, db...), append(small, "-mode", "coalesce")...)...)
			require.True(t, c.Verified, c.Problem)
			require.EqualValues(t, smallEvents, c.Accepted)
			require.Equal(t, dups, c.DuplicatesIgnored)
			require.Equal(t, c.HotExpected, c.HotTotal)
			require.Equal(t, n.HotTotal, c.HotTotal)
			require.Greater(t, c.CoalescingRatio, 1.0, "a state write folds several events")
			require.Less(t, c.StateWrites, c.Accepted)

			// Queued without coalescing: the same queue, one state write
			// per event.
			q := runJSON(t, append(append([]string{}, db...), append(small, "-mode", "queued")...)...)
			require.True(t, q.Verified, q.Problem)
			require.EqualValues(t, smallEvents, q.Accepted)
			require.Equal(t, n.HotTotal, q.HotTotal)
			require.EqualValues(t, smallEvents, q.StateWrites, "queued writes the state row once per event")

			// Batches of seven events (AcceptBatch): the same outcomes.
			b := runJSON(t, append(append([]string{}, db...), append(small, "-mode", "coalesce", "-accept-batch", "7")...)...)
			require.True(t, b.Verified, b.Problem)
			require.EqualValues(t, smallEvents, b.Accepted)
			require.Equal(t, dups, b.DuplicatesIgnored)
			require.Equal(t, n.HotTotal, b.HotTotal)
			require.Less(t, b.StateWrites, b.Accepted)

			// Lock waits are measured on the servers: MariaDB counts them
			// (server-wide, so other tests only add), and eight writers
			// of one hot row wait for each other in naive mode.
			for _, r := range []summary{n, c, q, b} {
				require.Equal(t, e.name != "sqlite", r.LockWaitsBy != "", r.Mode)
			}
			if e.name == "mysql" {
				require.Positive(t, n.LockWaits, "naive writers of one hot row wait for its lock")
				require.Positive(t, n.LockWaitMs)
			}

			// Every mode measured each event's time until persisted.
			for _, r := range []summary{n, c, q, b} {
				require.Positive(t, r.PersistP50Ms, r.Mode)
				require.GreaterOrEqual(t, r.PersistP99Ms, r.PersistP50Ms, r.Mode)
				require.GreaterOrEqual(t, r.BacklogMaxMs, r.PersistP99Ms, r.Mode)
			}
		})
	}
}

// TestSteadyRate: with -rate the writers send at that rate, so the writing
// lasts the events over the rate, and the run still verifies.
func TestSteadyRate(t *testing.T) {
	t.Parallel()
	s := runJSON(t, "-quiet", "-json", "-events", "200", "-writers", "8", "-users", "5", "-rate", "500", "-linger", "2ms")
	require.True(t, s.Verified, s.Problem)
	require.EqualValues(t, 200, s.Accepted)
	require.GreaterOrEqual(t, s.WriteSeconds, 199.0/500, "200 events at 500/s take at least 0.398 s to send")
	require.LessOrEqual(t, s.AcceptedPerSec, 500*1.05)
}

// TestCompare runs -compare -accept-batch 5 on SQLite, small: twelve
// verified runs (naive, queued, coalesce and batch-5 under each workload),
// one line each.
func TestCompare(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-dsn", dbtest.SQLitePath(t), "-compare", "-events", "150", "-writers", "4", "-dup", "0.1", "-accept-batch", "5"}, &out, io.Discard))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 13, out.String())
	require.Equal(t, 3, strings.Count(out.String(), " batch-5 "), out.String())
	for _, l := range lines[1:] {
		require.True(t, strings.HasSuffix(l, "true"), l)
	}
	for _, w := range []string{"one hot user", "100 hot users", "uniform"} {
		require.Contains(t, out.String(), w)
	}
}

// TestVerifyDetectsWrongState proves the verification is not vacuous: after
// a good run, a state row changed behind the program's back, an event left
// unfolded, or an event recorded twice each fail it.
func TestVerifyDetectsWrongState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, err := parseFlags(append([]string{"-dsn", dbtest.SQLitePath(t)}, small...), io.Discard)
	require.NoError(t, err)
	a, err := open(ctx, o)
	require.NoError(t, err)
	defer a.close()
	require.NoError(t, a.setup(ctx))
	s, err := a.simulate(ctx, io.Discard)
	require.NoError(t, err)
	require.True(t, s.Verified, s.Problem)
	evs := generate(o)

	db, q, p := a.db.SQL, a.db.Q, a.db.Ph
	tamper := func(stmt string, args ...any) {
		t.Helper()
		_, err := db.ExecContext(ctx, stmt, args...)
		require.NoError(t, err)
	}
	fresh := func() summary {
		return summary{Events: s.Events, Accepted: s.Accepted, DuplicatesIgnored: s.DuplicatesIgnored}
	}
	check := func(want string) {
		t.Helper()
		v := fresh()
		require.NoError(t, a.verify(ctx, evs, &v))
		require.False(t, v.Verified)
		require.Contains(t, v.Problem, want)
	}
	good := func() {
		t.Helper()
		v := fresh()
		require.NoError(t, a.verify(ctx, evs, &v))
		require.True(t, v.Verified, v.Problem)
	}

	// The hot user's total off by one.
	tamper(fmt.Sprintf("UPDATE %s SET %s = %s + 1 WHERE %s = %s", q(stateTable), q("total"), q("total"), q("state_key"), p(1)), userKey(hotUser))
	check("user 1: state total")
	tamper(fmt.Sprintf("UPDATE %s SET %s = %s - 1 WHERE %s = %s", q(stateTable), q("total"), q("total"), q("state_key"), p(1)), userKey(hotUser))
	good()

	// An event left unfolded.
	var folded any
	require.NoError(t, db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", q("folded_at"), q(changesTable), q("event_id"), p(1)), eventID(1)).Scan(&folded))
	tamper(fmt.Sprintf("UPDATE %s SET %s = NULL WHERE %s = %s", q(changesTable), q("folded_at"), q("event_id"), p(1)), eventID(1))
	check("1 accepted events were never folded")
	tamper(fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s = %s", q(changesTable), q("folded_at"), p(1), q("event_id"), p(2)), folded, eventID(1))
	good()

	// An event recorded (and folded) twice, under another id.
	e := evs[0]
	_, err = a.co.Accept(ctx, coalesce.Change{Key: userKey(e.User), EventID: "again", Payload: []byte(strconv.FormatInt(e.Delta, 10))})
	require.NoError(t, err)
	_, err = a.flusher.Flush(ctx)
	require.NoError(t, err)
	check(fmt.Sprintf("user %d: %d events recorded", e.User, want(evs, e.User)+1))
}

// want is the number of events of user u in evs.
func want(evs []event, u int64) int {
	n := 0
	for _, e := range evs {
		if e.User == u {
			n++
		}
	}
	return n
}

func TestBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-mode", "x"}, {"-mode", "queue"}, {"-writers", "0"}, {"-events", "0"}, {"-users", "0"}, {"-hot", "1.5"}, {"-dup", "-1"},
		{"-batch", "0"}, {"-accept-batch", "0"}, {"-accept-batch", "1001"}, {"-mode", "naive", "-accept-batch", "4"}, {"-linger", "-1s"}, {"-rate", "-1"}, {"extra"}, {"-driver", "oracle", "-dsn", "x"},
		{"-max-backlog", "5"}, {"-http", ":0", "-max-backlog", "-1"}, {"-http", ":0", "-max-age", "-1s"},
	} {
		require.Error(t, run(context.Background(), args, io.Discard, io.Discard), "%v", args)
	}
}

func TestTextSummary(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-quiet", "-events", "300", "-writers", "4", "-users", "3"}, &out, io.Discard))
	for _, want := range []string{"accepted writes/s:", "until persisted:", "state writes:", "coalescing ratio:", "requeues:", "hot user total:", "verified: true"} {
		require.Contains(t, out.String(), want)
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
)

// dsn returns the PostgreSQL test database, or skips (fails with
// CLAIMLOCK_REQUIRE_DB=1) when none is set.
func dsn(t *testing.T) string {
	t.Helper()
	d := os.Getenv("CLAIMLOCK_POSTGRES_DSN")
	if d == "" {
		if os.Getenv("CLAIMLOCK_REQUIRE_DB") == "1" {
			t.Fatal("CLAIMLOCK_POSTGRES_DSN is not set and CLAIMLOCK_REQUIRE_DB=1")
		}
		t.Skip("SKIPPED: CLAIMLOCK_POSTGRES_DSN is not set: River and claimlock were not compared")
	}
	return d
}

// TestBothSidesVerified runs every River line and every claimlock measure on
// a few thousand jobs and checks that each one ran every job exactly once
// with no overlapping executions (run fails otherwise) and that the output
// has one line per measurement. It asserts nothing about speed.
func TestBothSidesVerified(t *testing.T) {
	d := dsn(t)
	var out bytes.Buffer
	args := []string{"-dsn", d, "-jobs", "3000", "-workers", "4", "-river", "1,25", "-json"}
	if err := run(context.Background(), args, &out, io.Discard); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	var lines []result
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad output line %q: %v", sc.Text(), err)
		}
		lines = append(lines, r)
	}
	// Two River lines and four claimlock measures.
	if len(lines) != 2+len(allMeasures) {
		t.Fatalf("%d result lines, want %d:\n%s", len(lines), 2+len(allMeasures), out.String())
	}
	seen := map[string]int{}
	for _, r := range lines {
		seen[r.Side+" "+r.Measure]++
		if r.Jobs != 3000 || r.JobsPerS <= 0 || r.Overlaps != 0 || r.Missing != 0 || r.Duplicates != 0 {
			t.Errorf("bad line: %+v", r)
		}
		if r.Side == "claimlock" && (r.RatioBest <= 0 || r.RatioSame <= 0) {
			t.Errorf("claimlock line without its ratios to River: %+v", r)
		}
	}
	for _, m := range append([]string{"river river/x1", "river river/x25"}, prefixed("claimlock ", allMeasures)...) {
		if seen[m] != 1 {
			t.Errorf("%q ran %d times, want once", m, seen[m])
		}
	}
}

// TestMultiQueueAndClients runs River spread over two clients of two queues
// each, which must still complete every job exactly once.
func TestMultiQueueAndClients(t *testing.T) {
	d := dsn(t)
	var out bytes.Buffer
	args := []string{"-dsn", d, "-jobs", "2000", "-workers", "4", "-river", "10/2",
		"-river-queues", "2", "-measures", "run"}
	if err := run(context.Background(), args, &out, io.Discard); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "clients=2 queues/client=2 MaxWorkers/queue=10") {
		t.Errorf("River configuration not reported:\n%s", out.String())
	}
}

// TestTrackerCounts checks the verification itself: a job run twice, a job
// never run and two overlapping executions are all counted.
func TestTrackerCounts(t *testing.T) {
	tr := newTracker(4)
	tr.start(0)
	tr.end(0)
	tr.start(1)
	tr.start(1) // overlaps the first execution
	tr.end(1)
	tr.end(1)
	tr.start(2)
	tr.end(2)
	tr.start(9) // not a job of the run
	tr.end(9)
	missing, dups := tr.check()
	if missing != 1 || dups != 2 || tr.overlaps.Load() != 1 {
		t.Fatalf("missing %d dups %d overlaps %d, want 1 2 1", missing, dups, tr.overlaps.Load())
	}
	tr.undo(1)
	if _, dups := tr.check(); dups != 1 {
		t.Fatalf("after undo: dups %d, want 1", dups)
	}
	c := &compare{o: &options{}}
	r := c.base("river", "x", 1)
	r.Jobs = 4
	if err := c.finish(&r, 1, tr); err == nil {
		t.Fatal("finish accepted a run with a missing job, a duplicate and an overlap")
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-dsn", "x", "-jobs", "0"},
		{"-dsn", "x", "-workers", "4,x"},
		{"-dsn", "x", "-river", "0"},
		{"-dsn", "x", "-river", "4/0"},
		{"-dsn", "x", "-river", "4/x"},
		{"-dsn", "x", "-workers", "2", "-river", "1", "-river-queues", "3"},
		{"-dsn", "x", "-river-fetch-cooldown", "0s"},
		{"-dsn", "x", "-measures", "nope"},
		{"-dsn", "x", "-workers", "16", "-river", "1000"},
		{"-dsn", "x", "extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted bad flags", args)
		}
	}
	o, err := parseFlags([]string{"-dsn", "x"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.jobs != 100_000 || len(o.workers) != 2 || o.workers[0] != 4 || o.workers[1] != 16 ||
		len(o.river) != 4 || o.river[3] != (riverLine{25, 4}) {
		t.Fatalf("defaults: %+v", o)
	}
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

// Command statesync is the hot-row story, runnable, on package coalesce.
//
// Many concurrent writers report state changes for a few users, one of them
// hot (half of all events by default). Each event is (event id, user, seq,
// delta); a user's state row holds the running total of its deltas.
//
// In -mode naive every event is its own transaction that records the event
// and updates the user's state row: correct, but every writer of the hot user
// waits for that one row lock, so the database does one state write per event
// and the hot user's latency grows with the number of writers.
//
// In -mode coalesce (the default) a write is [coalesce.Coalescer.Accept]:
// the change is recorded durably (a resent event id returns the first
// receipt) and its user marked dirty, without touching the state row.
// [coalesce.Flusher]s fold each dirty user's changes with the program's
// fold, which sums their deltas and adds the sum to the state row in the
// fold's transaction: one state write for many events. In -mode queued the
// events go through the same coalescer, but the fold writes the state once
// per event: a queue without coalescing. -compare runs the three modes
// under one hot user, a hundred hot users and uniform users. With
// -accept-batch N the writers of coalesce and queued modes accept N events
// at a time with [coalesce.Coalescer.AcceptBatch] (with -compare: a fourth
// run, batch-N); with -group N their concurrent Accepts share
// transactions (coalesce.Config.Group; with -compare: a run group-N).
//
// With -http the program is a server instead: POST /changes accepts a
// change ({key, event_id, source, seq, delta}) with 202 and its receipt,
// 200 and the first receipt for a resent event id, 409 and the current
// version for a stale sequence, 429 with Retry-After under backpressure
// (-max-backlog, -max-age); GET /state/{key} returns the key's accepted and
// persisted versions and its state. Flushers run in the same process.
//
//	go run ./examples/statesync                 # coalesce on SQLite: verified: true
//	go run ./examples/statesync -mode naive     # one state write per event
//	go run ./examples/statesync -driver postgres -dsn 'postgres://postgres@127.0.0.1:5432/test'
//	go run ./examples/statesync -compare        # naive, queued, coalesce under three workloads
//	go run ./examples/statesync -compare -accept-batch 16  # and coalesce with AcceptBatch
//	go run ./examples/statesync -compare -group 64  # and coalesce with grouped Accepts
//	go run ./examples/statesync -http :8080     # the HTTP intake
//
// Every run verifies at the end that every user's state equals the sum of
// the deltas of its accepted events, each counted once, and exits non-zero
// when it does not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type options struct {
	driver, dsn, mode     string
	writers, events       int
	users, flushers       int
	batch, acceptBatch    int
	keysPerTx             int
	group, groupInFlight  int
	hot, dup              float64
	linger                time.Duration
	rate                  float64
	seed                  uint64
	json, quiet, keepData bool
	compare               bool

	// -http: the address to serve on, and the coalescer's backpressure
	// limits (pressureInterval has no flag: tests shorten it).
	http             string
	maxBacklog       int64
	maxAge           time.Duration
	pressureInterval time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "statesync:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("statesync", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.driver, "driver", "sqlite", "database: sqlite, mysql or postgres")
	fs.StringVar(&o.dsn, "dsn", "", "data source name (default for sqlite: a file in a new temporary directory); the program empties its own ss_* tables first")
	fs.StringVar(&o.mode, "mode", "coalesce", "coalesce (Coalescer.Accept, flushers write the state once per user per fold), queued (the same coalescer, one state write per event: no coalescing) or naive (a synchronous state write per event)")
	fs.IntVar(&o.writers, "writers", 32, "concurrent writers")
	fs.IntVar(&o.events, "events", 20000, "distinct events to send in total")
	fs.IntVar(&o.users, "users", 10, "users (user 1 is the hot one)")
	fs.Float64Var(&o.hot, "hot", 0.5, "fraction of events for the hot user")
	fs.Float64Var(&o.dup, "dup", 0.05, "fraction of events sent a second time (a client retry); they must be applied once")
	fs.IntVar(&o.flushers, "flushers", 2, "concurrent flushers (coalesce and queued modes, -http)")
	fs.IntVar(&o.batch, "batch", 16, "dirty users one flusher claims at a time (FlusherConfig.BatchSize)")
	fs.IntVar(&o.keysPerTx, "keys-per-tx", 1, "dirty users one flusher folds in one transaction (FlusherConfig.KeysPerTx)")
	fs.IntVar(&o.acceptBatch, "accept-batch", 1, "writers accept this many events at a time with Coalescer.AcceptBatch (coalesce and queued modes; 1: Accept per event); with -compare, adds a coalesce run with it")
	fs.IntVar(&o.group, "group", 0, "writers' concurrent Accepts share transactions, up to this many changes each (coalesce.Config.Group; coalesce and queued modes; 0: one transaction per Accept); with -compare, adds a coalesce run with it")
	fs.IntVar(&o.groupInFlight, "group-in-flight", 0, "with -group: grouped transactions written at once (coalesce.Config.GroupInFlight; 0: its default)")
	fs.DurationVar(&o.linger, "linger", 5*time.Millisecond, "pause of a flusher after a short batch, letting events accumulate (FlusherConfig.Linger)")
	fs.Float64Var(&o.rate, "rate", 0, "send the events at this steady rate, events per second in all (0: as fast as the writers go); a rate below what the flushers sustain shows the time until persisted at a steady load")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the event generator")
	fs.BoolVar(&o.json, "json", false, "print the summary as one JSON line")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines")
	fs.BoolVar(&o.keepData, "keep", false, "keep the temporary SQLite database (its path is printed)")
	fs.BoolVar(&o.compare, "compare", false, "run the three modes under three workloads (one hot user, a hundred hot users, uniform users) and print a table; -mode, -users and -hot are set per run")
	fs.StringVar(&o.http, "http", "", "serve POST /changes and GET /state/{key} on this address (e.g. :8080) instead of simulating; the tables are kept")
	fs.Int64Var(&o.maxBacklog, "max-backlog", 0, "with -http: refuse changes with 429 while more keys than this are dirty (Config.MaxBacklog; 0: no limit)")
	fs.DurationVar(&o.maxAge, "max-age", 0, "with -http: refuse changes with 429 while the oldest unfolded change is older (Config.MaxAge; 0: no limit)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case o.mode != "coalesce" && o.mode != "queued" && o.mode != "naive":
		return o, fmt.Errorf("-mode %q: want coalesce, queued or naive", o.mode)
	case o.writers < 1 || o.events < 1 || o.users < 1 || o.flushers < 1:
		return o, errors.New("-writers, -events, -users and -flushers must be positive")
	case o.batch < 1 || o.batch > 1000:
		return o, errors.New("-batch must be between 1 and 1000")
	case o.keysPerTx < 1 || o.keysPerTx > o.batch:
		return o, errors.New("-keys-per-tx must be between 1 and -batch")
	case o.acceptBatch < 1 || o.acceptBatch > 1000:
		return o, errors.New("-accept-batch must be between 1 and 1000 (coalesce.MaxBatch)")
	case o.acceptBatch > 1 && o.mode == "naive" && !o.compare:
		return o, errors.New("-accept-batch needs -mode coalesce or queued: the naive scheme writes one event per transaction")
	case o.groupInFlight < 0 || o.groupInFlight > 64:
		return o, errors.New("-group-in-flight must be between 0 and 64")
	case o.group < 0 || o.group > 1000:
		return o, errors.New("-group must be between 0 and 1000 (coalesce.MaxBatch)")
	case o.group > 0 && o.mode == "naive" && !o.compare:
		return o, errors.New("-group needs -mode coalesce or queued: the naive scheme writes one event per transaction")
	case o.hot < 0 || o.hot > 1 || o.dup < 0 || o.dup > 1:
		return o, errors.New("-hot and -dup must be between 0 and 1")
	case o.linger < 0:
		return o, errors.New("-linger must not be negative")
	case o.rate < 0 || o.rate > 1e7:
		return o, errors.New("-rate must be between 0 and 10000000 events per second")
	case o.maxBacklog < 0 || o.maxAge < 0:
		return o, errors.New("-max-backlog and -max-age must not be negative")
	case o.http == "" && (o.maxBacklog > 0 || o.maxAge > 0):
		return o, errors.New("-max-backlog and -max-age need -http (a simulation refused would not verify)")
	}
	return o, nil
}

// run is the whole program, callable in-process by tests. It returns an
// error (and main exits non-zero) when the final state does not verify.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.http != "" {
		return serve(ctx, o, stderr)
	}
	if o.compare {
		return compare(ctx, o, stdout, stderr)
	}
	s, err := runOnce(ctx, o, stderr)
	if err != nil {
		return err
	}
	if o.json {
		if err := s.writeJSON(stdout); err != nil {
			return err
		}
	} else {
		s.writeText(stdout)
	}
	if !s.Verified {
		return fmt.Errorf("verification failed: %s", s.Problem)
	}
	return nil
}

// runOnce sets up the tables and runs one simulation.
func runOnce(ctx context.Context, o options, stderr io.Writer) (summary, error) {
	a, err := open(ctx, o)
	if err != nil {
		return summary{}, err
	}
	defer a.close()
	if o.keepData && a.db.Path != "" {
		fmt.Fprintln(stderr, "statesync: database:", a.db.Path)
	}
	if err := a.setup(ctx); err != nil {
		return summary{}, fmt.Errorf("setup: %w", err)
	}
	return a.simulate(ctx, stderr)
}

// workload is one traffic shape of -compare.
type workload struct {
	name  string
	users int
	hot   float64
}

// workloads: half the events for one user (the others spread over 999),
// all events spread over users 2..101, and over users 2..10001 (user 1,
// the hot one of the first shape, gets none in the other two).
var workloads = []workload{
	{"one hot user", 1000, 0.5},
	{"100 hot users", 101, 0},
	{"uniform", 10001, 0},
}

// compare runs each mode under each workload and prints one line per run.
func compare(ctx context.Context, o options, stdout, stderr io.Writer) error {
	fmt.Fprintf(stdout, "%-14s %-9s %10s %12s %12s %12s %12s %12s %10s %14s %8s\n",
		"workload", "mode", "accepted/s", "accept p50", "accept p99", "persist p50", "persist p99", "oldest", "per write", "lock waits", "verified")
	var failed []string
	for _, w := range workloads {
		modes := []string{"naive", "queued", "coalesce"}
		if o.acceptBatch > 1 {
			modes = append(modes, fmt.Sprintf("batch-%d", o.acceptBatch))
		}
		if o.group > 0 {
			modes = append(modes, fmt.Sprintf("group-%d", o.group))
		}
		for _, mode := range modes {
			r := o
			r.mode, r.users, r.hot, r.json, r.quiet = mode, w.users, w.hot, false, true
			r.acceptBatch, r.group = 1, 0
			switch {
			case strings.HasPrefix(mode, "batch-"):
				r.mode, r.acceptBatch = "coalesce", o.acceptBatch
			case strings.HasPrefix(mode, "group-"):
				r.mode, r.group = "coalesce", o.group
			}
			s, err := runOnce(ctx, r, stderr)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", w.name, mode, err)
			}
			// Accept latency: the hot user's where there is one (its row
			// is the contended one), else every user's.
			p50, p99 := s.P50Ms, s.P99Ms
			if w.hot > 0 {
				p50, p99 = s.HotP50Ms, s.HotP99Ms
			}
			waits := "-" // SQLite: its waits are busy retries
			if s.LockWaitsBy != "" {
				waits = fmt.Sprintf("%d/%.0f ms", s.LockWaits, s.LockWaitMs)
			}
			fmt.Fprintf(stdout, "%-14s %-9s %10.0f %9.2f ms %9.2f ms %9.2f ms %9.2f ms %9.2f ms %10.1f %14s %8t\n",
				w.name, mode, s.AcceptedPerSec, p50, p99, s.PersistP50Ms, s.PersistP99Ms, s.BacklogMaxMs, s.CoalescingRatio, waits, s.Verified)
			if !s.Verified {
				failed = append(failed, fmt.Sprintf("%s, %s: %s", w.name, mode, s.Problem))
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("verification failed: %s", strings.Join(failed, "; "))
	}
	return nil
}

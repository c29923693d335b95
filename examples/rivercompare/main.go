// Command rivercompare measures claimlock against River (a PostgreSQL job
// queue for Go) in one process, on one PostgreSQL database, in the same run:
// for each worker count it drains the same number of jobs with River and
// with claimlock, alternately, and checks that every job ran exactly once
// with no two executions of one job at the same time.
//
//	rivercompare -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' -jobs 100000 -workers 4,16
//
// It is a module of its own so that the claimlock module does not depend on
// River. See README.md for the flags and how to read the output.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"
)

// options are the parsed flags.
type options struct {
	dsn     string
	jobs    int
	workers []int
	batch   int
	json    bool
	// measures, if not empty, are the only claimlock measures run.
	measures []string
	// River's configuration: each entry of river is one River line, with
	// workers*mult job slots in all, spread over its clients and
	// riverQueues queues per client.
	river         []riverLine
	riverQueues   int
	riverCooldown time.Duration
	riverPoll     time.Duration
	// riverKeep is CompletedJobRetentionPeriod (-1: never delete).
	riverKeep time.Duration
}

// wants reports whether the claimlock measure is to run.
func (o *options) wants(measure string) bool {
	return len(o.measures) == 0 || slices.Contains(o.measures, measure)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "rivercompare:", err)
		os.Exit(1)
	}
}

// run parses args, runs the comparison and writes the results to out.
func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	o, err := parseFlags(args, errOut)
	if err != nil {
		return err
	}
	c, err := newCompare(ctx, o, out, errOut)
	if err != nil {
		return err
	}
	defer c.close()
	return c.run(ctx)
}

func parseFlags(args []string, errOut io.Writer) (*options, error) {
	fs := flag.NewFlagSet("rivercompare", flag.ContinueOnError)
	fs.SetOutput(errOut)
	o := &options{}
	var workers, measures, lines string
	fs.StringVar(&o.dsn, "dsn", "", "PostgreSQL data source name (required)")
	fs.IntVar(&o.jobs, "jobs", 100_000, "jobs per measurement")
	fs.StringVar(&workers, "workers", "4,16", "comma-separated worker counts: jobs run at most this many at a time, on either side")
	fs.IntVar(&o.batch, "batch", 100, "claimlock: rows per claim")
	fs.BoolVar(&o.json, "json", false, "one JSON object per result line")
	fs.StringVar(&measures, "measures", "", "comma-separated claimlock measures to run (empty: all): run, run+delete, held, held+delete")
	fs.StringVar(&lines, "river", "1,25,250,25/4", "River lines, comma-separated, each M or M/C: workers*M job slots (QueueConfig.MaxWorkers) in all, split between C clients (default 1) of one process; M=1 runs as many jobs at once as claimlock's workers, larger M lets River fetch (and run) many more jobs at once")
	fs.IntVar(&o.riverQueues, "river-queues", 1, "River queues per client, the jobs and job slots split between them")
	fs.DurationVar(&o.riverCooldown, "river-fetch-cooldown", time.Millisecond, "River FetchCooldown (River's default is 100ms, its minimum 1ms)")
	fs.DurationVar(&o.riverPoll, "river-fetch-poll", 20*time.Millisecond, "River FetchPollInterval (River's default is 1s)")
	fs.DurationVar(&o.riverKeep, "river-completed-retention", -1, "River CompletedJobRetentionPeriod (-1: completed jobs are never deleted)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.dsn == "" {
		return nil, fmt.Errorf("-dsn is required, e.g. 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'")
	}
	if o.jobs <= 0 || o.batch <= 0 {
		return nil, fmt.Errorf("-jobs and -batch must be positive")
	}
	var err error
	if o.workers, err = positiveList("-workers", workers); err != nil {
		return nil, err
	}
	if o.riverQueues <= 0 {
		return nil, fmt.Errorf("-river-queues must be positive")
	}
	for _, spec := range strings.Split(lines, ",") {
		l, err := parseRiverLine(strings.TrimSpace(spec))
		if err != nil {
			return nil, err
		}
		for _, w := range o.workers {
			if w*l.mult < l.clients*o.riverQueues {
				return nil, fmt.Errorf("-river %s with -workers %d: fewer job slots than River queues (%d clients of %d queues): every queue needs one", spec, w, l.clients, o.riverQueues)
			}
			if slots := w * l.mult / (l.clients * o.riverQueues); slots > riverMaxWorkers {
				return nil, fmt.Errorf("-river %s with -workers %d gives %d job slots per River queue, more than River's limit of %d", spec, w, slots, riverMaxWorkers)
			}
		}
		o.river = append(o.river, l)
	}
	if o.riverCooldown < time.Millisecond || o.riverPoll < o.riverCooldown {
		return nil, fmt.Errorf("-river-fetch-cooldown must be at least 1ms and -river-fetch-poll at least the cooldown")
	}
	if measures != "" {
		for _, m := range strings.Split(measures, ",") {
			m = strings.TrimSpace(m)
			if !slices.Contains(allMeasures, m) {
				return nil, fmt.Errorf("-measures: unknown %q", m)
			}
			o.measures = append(o.measures, m)
		}
	}
	return o, nil
}

// riverLine is one River configuration: mult job slots per worker, in all,
// split between clients clients.
type riverLine struct{ mult, clients int }

// parseRiverLine parses "M" or "M/C" (see the -river flag).
func parseRiverLine(spec string) (riverLine, error) {
	m, c, split := strings.Cut(spec, "/")
	l := riverLine{clients: 1}
	var err1, err2 error
	l.mult, err1 = strconv.Atoi(m)
	if split {
		l.clients, err2 = strconv.Atoi(c)
	}
	if err1 != nil || err2 != nil || l.mult <= 0 || l.clients <= 0 {
		return l, fmt.Errorf("-river: bad line %q (want M or M/C, positive integers)", spec)
	}
	return l, nil
}

// positiveList parses a comma-separated list of positive integers.
func positiveList(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: bad count %q", flag, f)
		}
		out = append(out, n)
	}
	return out, nil
}

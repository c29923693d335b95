package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// result is one line of output.
type result struct {
	Date    string `json:"date"`
	Engine  string `json:"engine"`
	Version string `json:"version"`
	// Side is "river" or "claimlock"; Measure names what ran on that side
	// and Config how it was configured.
	Side     string  `json:"side"`
	Measure  string  `json:"measure"`
	Config   string  `json:"config"`
	Workers  int     `json:"workers"`
	Jobs     int     `json:"jobs"`
	Seconds  float64 `json:"seconds"`
	JobsPerS float64 `json:"jobs_per_s"`
	// RatioBest is JobsPerS over the best River line's at the same
	// worker count (claimlock lines only). RatioSame is over River's line
	// that runs as many jobs at once (-river 1, when it is the first
	// line).
	RatioBest  float64 `json:"ratio_to_best_river,omitempty"`
	RatioSame  float64 `json:"ratio_to_river_same_slots,omitempty"`
	Overlaps   int64   `json:"overlaps"`
	Missing    int     `json:"missing"`
	Duplicates int     `json:"duplicates"`
}

// compare holds what every measurement shares.
type compare struct {
	o       *options
	out     io.Writer
	log     *slog.Logger
	version string
	date    string
	// results are every line written, in order.
	results []result
}

func newCompare(ctx context.Context, o *options, out, errOut io.Writer) (*compare, error) {
	c := &compare{o: o, out: out, date: time.Now().UTC().Format("2006-01-02"),
		log: slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	pool, err := c.pool(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&c.version); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *compare) close() {}

// pool opens a pgx pool of at most conns connections on the -dsn.
func (c *compare) pool(ctx context.Context, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(c.o.dsn)
	if err != nil {
		return nil, fmt.Errorf("-dsn: %w", err)
	}
	cfg.MaxConns = int32(conns)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// run measures every worker count: the River lines and the claimlock
// measures alternate, so a change of load on the machine hits both sides.
// The River lines are written as they finish, the claimlock lines after
// the worker count's last measurement, with their ratios to River.
func (c *compare) run(ctx context.Context) error {
	var measures []string
	for _, m := range allMeasures {
		if c.o.wants(m) {
			measures = append(measures, m)
		}
	}
	for _, w := range c.o.workers {
		var rivers, mine []result
		for i := range max(len(c.o.river), len(measures)) {
			if i < len(c.o.river) {
				r, err := c.river(ctx, w, c.o.river[i])
				if err != nil {
					return fmt.Errorf("river %s, %d workers: %w", c.o.river[i], w, err)
				}
				if err := c.emit(r); err != nil {
					return err
				}
				rivers = append(rivers, r)
			}
			if i < len(measures) {
				r, err := c.claimlock(ctx, measures[i], w)
				if err != nil {
					return fmt.Errorf("claimlock %s, %d workers: %w", measures[i], w, err)
				}
				mine = append(mine, r)
			}
		}
		// The claimlock lines come last, compared with every River line of
		// the worker count.
		best := slices.MaxFunc(rivers, func(a, b result) int { return cmp.Compare(a.JobsPerS, b.JobsPerS) })
		same := c.riverConfig(w, riverLine{1, 1}).String()
		for _, r := range mine {
			r.RatioBest = r.JobsPerS / best.JobsPerS
			if rivers[0].Config == same {
				r.RatioSame = r.JobsPerS / rivers[0].JobsPerS
			}
			if err := c.emit(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// base is the start of a result line.
func (c *compare) base(side, measure string, workers int) result {
	return result{Date: c.date, Engine: "postgres", Version: c.version, Side: side, Measure: measure,
		Workers: workers, Jobs: c.o.jobs}
}

// finish computes the rate of r and fails if the run was not correct.
func (c *compare) finish(r *result, elapsed time.Duration, t *tracker) error {
	r.Seconds = elapsed.Seconds()
	r.JobsPerS = float64(r.Jobs) / r.Seconds
	r.Overlaps = t.overlaps.Load()
	r.Missing, r.Duplicates = t.check()
	if r.Overlaps != 0 || r.Missing != 0 || r.Duplicates != 0 {
		return fmt.Errorf("verification failed: %d overlapping executions, %d jobs never run, %d jobs run more than once (%s %s, %d workers)",
			r.Overlaps, r.Missing, r.Duplicates, r.Side, r.Measure, r.Workers)
	}
	return nil
}

func (c *compare) emit(r result) error {
	c.results = append(c.results, r)
	if c.o.json {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(c.out, string(line))
		return err
	}
	ratio := ""
	if r.RatioBest > 0 {
		ratio = fmt.Sprintf("%5.2fx best River", r.RatioBest)
		if r.RatioSame > 0 {
			ratio += fmt.Sprintf(" %5.2fx River same slots", r.RatioSame)
		}
	}
	_, err := fmt.Fprintf(c.out, "%-9s %-12s workers %2d  %9.0f jobs/s  %-42s overlaps %d  missing %d  duplicates %d  %s\n",
		r.Side, r.Measure, r.Workers, r.JobsPerS, ratio, r.Overlaps, r.Missing, r.Duplicates, r.Config)
	return err
}

// tracker records, per job, how often it ran and whether two executions of
// it overlapped. Jobs are numbered 0..n-1 on both sides.
type tracker struct {
	running  []atomic.Int32
	runs     []atomic.Int32
	overlaps atomic.Int64
	// unknown counts executions of a job number out of range.
	unknown atomic.Int64
}

func newTracker(n int) *tracker {
	return &tracker{running: make([]atomic.Int32, n), runs: make([]atomic.Int32, n)}
}

// start records the start of an execution of job seq.
func (t *tracker) start(seq int64) {
	if seq < 0 || seq >= int64(len(t.runs)) {
		t.unknown.Add(1)
		return
	}
	if t.running[seq].Add(1) != 1 {
		t.overlaps.Add(1)
	}
	t.runs[seq].Add(1)
}

// end records the end of an execution of job seq.
func (t *tracker) end(seq int64) {
	if seq >= 0 && seq < int64(len(t.runs)) {
		t.running[seq].Add(-1)
	}
}

// undo forgets one execution of job seq whose effects were rolled back: it
// runs again later.
func (t *tracker) undo(seq int64) {
	if seq >= 0 && seq < int64(len(t.runs)) {
		t.runs[seq].Add(-1)
	}
}

// check counts jobs never run and jobs run more than once (an execution of
// an unknown job counts as a duplicate).
func (t *tracker) check() (missing, dups int) {
	for i := range t.runs {
		switch n := t.runs[i].Load(); {
		case n == 0:
			missing++
		case n > 1:
			dups++
		}
	}
	return missing, dups + int(t.unknown.Load())
}

// ident quotes a PostgreSQL identifier (the names are constants of this
// program).
func ident(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// Command claimbench measures claimlock's claim+ack throughput against the
// database's own ceiling (a batched primary-key UPDATE of the same rows by the
// same number of workers), in one run on one table shape, and checks that
// every row was processed exactly once with no overlapping claims.
//
//	claimbench -driver postgres -dsn 'postgres://postgres@127.0.0.1:5432/test' -workers 1,4,16
//
// See README.md for the flags and how to read the output.
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

	"github.com/claimlock/claimlock/dialect"
)

// options are the parsed flags.
type options struct {
	driver, dsn string
	workers     []int
	batch       int
	rows        int
	perRowRows  int
	strategies  []dialect.Strategy
	strategyArg string
	// measures, if not empty, are the only claimlock measures run (the
	// ceiling always runs).
	measures    []string
	json        bool
	large       bool
	largeRows   int
	smallRows   int
	taskRows    int
	mysqlRR     bool
	claimConc   int
	largeLayout string
	// -latency: pickup latency instead of throughput.
	latency                  bool
	latencyRows, latencyRate int
	latencyWorkers           int
	// -chart: an SVG of the throughput results; -chart-from: draw it from
	// earlier -json output instead of running.
	chart     string
	chartFrom []string
}

// wants reports whether measure is to run.
func (o *options) wants(measure string) bool {
	return len(o.measures) == 0 || slices.Contains(o.measures, measure)
}

// The -large-layout values.
const (
	layoutClustered = "clustered"
	layoutSpread    = "spread"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "claimbench:", err)
		os.Exit(1)
	}
}

// run parses args, runs the benchmark and writes the results to out.
func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	o, err := parseFlags(args, errOut)
	if err != nil {
		return err
	}
	if len(o.chartFrom) > 0 {
		results, err := readResults(o.chartFrom)
		if err != nil {
			return err
		}
		return writeChart(o.chart, results)
	}
	b, err := newBench(ctx, o, out)
	if err != nil {
		return err
	}
	defer b.close()
	if err := b.run(ctx); err != nil {
		return err
	}
	if o.chart != "" {
		return writeChart(o.chart, b.results)
	}
	return nil
}

func parseFlags(args []string, errOut io.Writer) (*options, error) {
	fs := flag.NewFlagSet("claimbench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	o := &options{}
	var workers string
	fs.StringVar(&o.driver, "driver", "sqlite", "sqlite, mysql or postgres")
	fs.StringVar(&o.dsn, "dsn", "", "data source name (empty for sqlite: a temporary file)")
	fs.StringVar(&workers, "workers", "1,4,16", "comma-separated worker counts")
	fs.IntVar(&o.batch, "batch", 100, "rows per claim (and per ceiling statement)")
	fs.IntVar(&o.rows, "rows", 100_000, "rows per measurement")
	fs.IntVar(&o.perRowRows, "perrow-rows", 10_000, "rows for the one-ack-statement-per-row variant (slow; 0 skips it)")
	fs.StringVar(&o.strategyArg, "strategy", "all", "auto, token-update, skip-locked or all (every one the server supports)")
	fs.BoolVar(&o.json, "json", false, "one JSON object per result line")
	fs.BoolVar(&o.large, "large", false, "also compare claim latency on a large table with a small one")
	fs.IntVar(&o.largeRows, "large-rows", 1_000_000, "rows of the large table (-large)")
	fs.IntVar(&o.smallRows, "small-rows", 10_000, "rows of the small table (-large)")
	fs.IntVar(&o.taskRows, "task-rows", 2_000, "rows of the claimed task in both tables (-large)")
	fs.StringVar(&o.largeLayout, "large-layout", layoutClustered, "-large: where the claimed task's rows sit: clustered (same spacing in both tables, at the end) or spread (evenly through the whole table)")
	fs.IntVar(&o.claimConc, "claim-concurrency", 0, "claim.Config.ClaimConcurrency: claims in flight per claimer (0: the engine's default, -1: no limit)")
	fs.BoolVar(&o.mysqlRR, "mysql-repeatable-read", false, "mysql: keep the server's default session isolation instead of READ COMMITTED sessions")
	fs.BoolVar(&o.latency, "latency", false, "measure pickup latency (insert commit -> handler start) on an idle system instead of throughput")
	fs.IntVar(&o.latencyRows, "latency-rows", 2000, "rows inserted one per transaction (-latency)")
	fs.IntVar(&o.latencyRate, "latency-rate", 200, "rows inserted per second (-latency)")
	fs.IntVar(&o.latencyWorkers, "latency-workers", 16, "Claimer.Run workers (-latency)")
	fs.StringVar(&o.chart, "chart", "", "write an SVG chart of the throughput results (rows/s and ratio to the ceiling vs workers) to this file")
	var measures string
	fs.StringVar(&measures, "measures", "", "comma-separated claimlock measures to run (empty: all): claim+ack, claim+ack-pipelined, claim+delete, claim+delete-pipelined, held, held+delete, advisory, advisory+delete (PostgreSQL), claim+ack-later, claim+ack-per-row, two-writes (no library, run only when named: each batch written twice by primary key, as a claim and an ack)")
	var chartFrom string
	fs.StringVar(&chartFrom, "chart-from", "", "comma-separated files of -json output to draw the -chart from instead of running (one engine per file or several)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if chartFrom != "" {
		if o.chart == "" {
			return nil, fmt.Errorf("-chart-from needs -chart")
		}
		o.chartFrom = strings.Split(chartFrom, ",")
	}
	if measures != "" {
		known := []string{measureBatched, measurePiped, measureDelete, measurePipedDel, measureHeld, measureHeldDel, measureAdvisory, measureAdvisoryDel, measureLater, measurePerRow, measureTwoWrites}
		for _, m := range strings.Split(measures, ",") {
			m = strings.TrimSpace(m)
			if !slices.Contains(known, m) {
				return nil, fmt.Errorf("-measures: unknown %q", m)
			}
			o.measures = append(o.measures, m)
		}
	}
	for _, w := range strings.Split(workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-workers: bad count %q", w)
		}
		o.workers = append(o.workers, n)
	}
	if o.batch <= 0 || o.rows <= 0 || o.perRowRows < 0 || o.largeRows <= 0 || o.smallRows <= 0 || o.taskRows <= 0 {
		return nil, fmt.Errorf("-batch, -rows and the -large sizes must be positive")
	}
	if o.latencyRows <= 0 || o.latencyRate <= 0 || o.latencyWorkers <= 0 {
		return nil, fmt.Errorf("-latency-rows, -latency-rate and -latency-workers must be positive")
	}
	if o.taskRows > o.smallRows {
		return nil, fmt.Errorf("-task-rows %d exceeds -small-rows %d", o.taskRows, o.smallRows)
	}
	if o.largeLayout != layoutClustered && o.largeLayout != layoutSpread {
		return nil, fmt.Errorf("-large-layout: unknown %q", o.largeLayout)
	}
	switch o.strategyArg {
	case "auto":
		o.strategies = []dialect.Strategy{dialect.StrategyAuto}
	case "token-update":
		o.strategies = []dialect.Strategy{dialect.StrategyTokenUpdate}
	case "skip-locked":
		o.strategies = []dialect.Strategy{dialect.StrategySkipLocked}
	case "all":
		o.strategies = []dialect.Strategy{dialect.StrategyTokenUpdate, dialect.StrategySkipLocked}
	default:
		return nil, fmt.Errorf("-strategy: unknown %q", o.strategyArg)
	}
	return o, nil
}

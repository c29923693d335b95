package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/examples/internal/exdb"
)

// Measure names what a result measured.
const (
	measureCeiling  = "ceiling"             // batched primary-key UPDATE, no library
	measureBatched  = "claim+ack"           // claim, then one AckAll per batch
	measureLater    = "claim+ack-later"     // claim, then a deferred Ack per row (Config.AckDelay) and one Flush
	measurePerRow   = "claim+ack-per-row"   // claim, then one Ack statement per row
	measurePiped    = "claim+ack-pipelined" // claim once, then one AckAllAndClaim per batch
	measureDelete   = "claim+delete"        // measureBatched on a DeleteDone table: the ack deletes
	measurePipedDel = "claim+delete-pipelined"
	measureHeld     = "held"        // held-transaction claim (Claimer.Holder), AckAll, COMMIT
	measureHeldDel  = "held+delete" // measureHeld on a DeleteDone table
	measureLarge    = "large"       // claim latency, large vs small table
	// measureTwoWrites writes each batch twice by primary key, as a claim
	// (processing, a token, the claim time) and then an ack (done, no
	// token) do, with no library and no lookups: the most a protocol of
	// two row writes gets from the server. Run only when named in
	// -measures.
	measureTwoWrites = "two-writes"
	benchTable       = "claimbench_jobs"
	smallTable       = "claimbench_jobs_small" // the small table of -large
	benchTask        = 1
	insertChunkRows  = 1000
)

// result is one line of output.
type result struct {
	Date     string  `json:"date"`
	Engine   string  `json:"engine"`
	Version  string  `json:"version"`
	Measure  string  `json:"measure"`
	Strategy string  `json:"strategy,omitempty"`
	Workers  int     `json:"workers"`
	Batch    int     `json:"batch"`
	Rows     int     `json:"rows"`
	Seconds  float64 `json:"seconds"`
	RowsPerS float64 `json:"rows_per_s"`
	// Ratio is RowsPerS over the ceiling's at the same worker count.
	Ratio   float64 `json:"ratio_to_ceiling,omitempty"`
	P50ms   float64 `json:"p50_claim_ms,omitempty"`
	P99ms   float64 `json:"p99_claim_ms,omitempty"`
	Retries int64   `json:"retries"`
	// Rollbacks are held batches the server rolled back (a deadlock in
	// the ack): their rows went back to pending and were held again.
	Rollbacks  int64 `json:"rollbacks,omitempty"`
	Overlaps   int64 `json:"overlaps"`
	Missing    int   `json:"missing"`
	Duplicates int   `json:"duplicates"`
	// Large-table comparison (-large).
	SmallRows  int     `json:"small_rows,omitempty"`
	LargeRows  int     `json:"large_rows,omitempty"`
	SmallP50ms float64 `json:"small_p50_claim_ms,omitempty"`
	LargeP50ms float64 `json:"large_p50_claim_ms,omitempty"`
	SizeRatio  float64 `json:"large_over_small,omitempty"`
	// Pickup latency (-latency): rows inserted per second.
	Rate int `json:"insert_rate,omitempty"`
}

type bench struct {
	o    *options
	db   *exdb.DB
	d    dialect.Dialect // the dialect measured (may differ from db's for -mysql-repeatable-read)
	sql  *sql.DB         // the handle d runs on, for the ceiling too
	out  io.Writer
	caps dialect.Capabilities
	date string
	done []func()
	// results are the throughput lines of the run, for -chart.
	results []result
	// retries counts the statements and transactions the dialects re-ran
	// after a deadlock or serialization failure (their OnRetry).
	retries *atomic.Int64
}

func newBench(ctx context.Context, o *options, out io.Writer) (*bench, error) {
	maxW := slices.Max(o.workers)
	dsn := o.dsn
	if o.driver == "postgres" && dsn != "" && !strings.Contains(dsn, "pool_max_conns") {
		// pgxpool defaults to max(4, CPUs) connections: give every worker
		// its own, as the database/sql pools of the other drivers do.
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += fmt.Sprintf("%spool_max_conns=%d", sep, maxW+4)
	}
	// Retries are counted by the dialect's retry policy: every re-run of
	// a statement or transaction after a deadlock or serialization
	// failure calls OnRetry once.
	retries := new(atomic.Int64)
	opts := dialect.Options{Retry: dialect.RetryPolicy{OnRetry: func(string, int, error) { retries.Add(1) }}}
	db, err := exdb.OpenWith(ctx, o.driver, dsn, false, opts)
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, db: db, d: db.Dialect, sql: db.SQL, out: out, date: time.Now().UTC().Format("2006-01-02"), retries: retries}
	b.done = append(b.done, db.Close)
	if o.mysqlRR && db.Driver == "mysql" {
		cfg, err := gomysql.ParseDSN(o.dsn)
		if err != nil {
			b.close()
			return nil, err
		}
		conn, err := gomysql.NewConnector(cfg)
		if err != nil {
			b.close()
			return nil, err
		}
		raw := sql.OpenDB(conn)
		b.done = append(b.done, func() { raw.Close() })
		d, err := mysql.New(ctx, raw, opts)
		if err != nil {
			b.close()
			return nil, err
		}
		b.d, b.sql = d, raw
	}
	if db.Driver != "sqlite" {
		// database/sql keeps 2 idle connections by default: with more
		// workers, connections would be closed and reopened all the time.
		b.sql.SetMaxIdleConns(maxW + 4)
		b.sql.SetMaxOpenConns(maxW + 4)
	}
	b.caps = b.d.Capabilities()
	return b, nil
}

func (b *bench) close() {
	for i := len(b.done) - 1; i >= 0; i-- {
		b.done[i]()
	}
}

func (b *bench) run(ctx context.Context) error {
	if b.o.latency {
		return b.latency(ctx)
	}
	var strategies []dialect.Strategy
	for _, s := range b.o.strategies {
		if s == dialect.StrategyAuto || b.caps.Supports(s) {
			strategies = append(strategies, s)
		}
	}
	if len(strategies) == 0 {
		return fmt.Errorf("%s %s supports none of the strategies asked for", b.caps.Engine, b.caps.Version)
	}
	for _, w := range b.o.workers {
		ceil, err := b.ceiling(ctx, w)
		if err != nil {
			return fmt.Errorf("ceiling, %d workers: %w", w, err)
		}
		b.emit(ceil)
		b.results = append(b.results, ceil)
		variants := []struct {
			measure string
			rows    int
			list    []dialect.Strategy
		}{
			{measureBatched, b.o.rows, strategies},
			{measurePiped, b.o.rows, strategies},
			{measureDelete, b.o.rows, strategies},
			{measurePipedDel, b.o.rows, strategies},
			{measureHeld, b.o.rows, b.heldStrategies()},
			{measureHeldDel, b.o.rows, b.heldStrategies()},
			{measureLater, b.o.rows, []dialect.Strategy{dialect.StrategyAuto}},
			{measurePerRow, b.o.perRowRows, []dialect.Strategy{dialect.StrategyAuto}},
		}
		for _, v := range variants {
			if v.rows == 0 || !b.o.wants(v.measure) {
				continue
			}
			for _, s := range v.list {
				r, err := b.claimlockRun(ctx, v.measure, s, w, v.rows)
				if err != nil {
					return fmt.Errorf("%s %v, %d workers: %w", v.measure, s, w, err)
				}
				r.Ratio = r.RowsPerS / ceil.RowsPerS
				b.emit(r)
				b.results = append(b.results, r)
			}
		}
		if slices.Contains(b.o.measures, measureTwoWrites) {
			r, err := b.twoWrites(ctx, w)
			if err != nil {
				return fmt.Errorf("%s, %d workers: %w", measureTwoWrites, w, err)
			}
			r.Ratio = r.RowsPerS / ceil.RowsPerS
			b.emit(r)
			b.results = append(b.results, r)
		}
		for _, m := range []string{measureAdvisory, measureAdvisoryDel} {
			if b.caps.Engine != dialect.EnginePostgreSQL || !b.o.wants(m) {
				continue
			}
			r, err := b.advisoryRun(ctx, m, w, b.o.rows)
			if err != nil {
				return fmt.Errorf("%s, %d workers: %w", m, w, err)
			}
			r.Ratio = r.RowsPerS / ceil.RowsPerS
			b.emit(r)
			b.results = append(b.results, r)
		}
	}
	if b.o.large {
		r, err := b.largeCompare(ctx)
		if err != nil {
			return fmt.Errorf("large: %w", err)
		}
		b.emit(r)
	}
	return nil
}

func (b *bench) base(measure string, workers, rows int) result {
	return result{Date: b.date, Engine: string(b.caps.Engine), Version: b.caps.Version, Measure: measure,
		Workers: workers, Batch: b.o.batch, Rows: rows}
}

func (b *bench) emit(r result) {
	if b.o.json {
		line, _ := json.Marshal(r)
		fmt.Fprintln(b.out, string(line))
		return
	}
	if r.Measure == measureLatency {
		fmt.Fprintf(b.out, "%-10s %-18s workers %2d  %d rows at %d/s: insert commit -> handler start p50 %.2f ms p99 %.2f ms  missing %d  duplicates %d\n",
			r.Engine, r.Measure+"/"+r.Strategy, r.Workers, r.Rows, r.Rate, r.P50ms, r.P99ms, r.Missing, r.Duplicates)
		return
	}
	if r.Measure == measureLarge {
		fmt.Fprintf(b.out, "%-10s %-18s task %d rows: p50 claim+ack %.2f ms at %d rows, %.2f ms at %d rows: ratio %.2f\n",
			r.Engine, r.Measure+"/"+r.Strategy, b.o.taskRows, r.SmallP50ms, r.SmallRows, r.LargeP50ms, r.LargeRows, r.SizeRatio)
		return
	}
	ratio := ""
	if r.Ratio > 0 {
		ratio = fmt.Sprintf("%5.2fx ceiling", r.Ratio)
	}
	lat := ""
	if r.P50ms > 0 {
		lat = fmt.Sprintf("claim p50 %.2f ms p99 %.2f ms", r.P50ms, r.P99ms)
	}
	rb := ""
	if r.Rollbacks > 0 {
		rb = fmt.Sprintf("  rollbacks %d", r.Rollbacks)
	}
	fmt.Fprintf(b.out, "%-10s %-38s workers %2d  %9.0f rows/s  %-14s %-34s retries %d%s  overlaps %d  missing %d  duplicates %d\n",
		r.Engine, r.Measure+strategySuffix(r.Strategy), r.Workers, r.RowsPerS, ratio, lat, r.Retries, rb, r.Overlaps, r.Missing, r.Duplicates)
}

func strategySuffix(s string) string {
	if s == "" {
		return ""
	}
	return "/" + s
}

// config is the claimer configuration of the bench table for measure:
// acks are deferred (Config.AckDelay) for measureLater only, and delete
// their rows (ClaimTable.DeleteDone) for the delete measures.
func (b *bench) config(s dialect.Strategy, measure string) claim.Config {
	cfg := b.configFor(benchTable, s)
	if measure == measureLater {
		cfg.AckDelay = time.Second
	}
	cfg.DeleteDone = deletes(measure)
	return cfg
}

// deletes reports whether measure's acks delete their rows.
func deletes(measure string) bool {
	return measure == measureDelete || measure == measurePipedDel || measure == measureHeldDel
}

// heldStrategies is the strategy list of the held measures: none where the
// engine cannot hold claims (SQLite), else one (a held claim has its own
// protocol; the strategy only names the claimer's other claims).
func (b *bench) heldStrategies() []dialect.Strategy {
	if !b.caps.SkipLocked || b.caps.Engine == dialect.EngineSQLite {
		return nil
	}
	return []dialect.Strategy{dialect.StrategySkipLocked}
}

// configFor is the claimer configuration of a bench table.
func (b *bench) configFor(table string, s dialect.Strategy) claim.Config {
	return claim.Config{
		ClaimTable:  dialect.ClaimTable{Table: table, Scope: []string{"task_id"}, Attempts: "attempts"},
		ScopeValues: []any{benchTask}, BatchSize: b.o.batch, Strategy: s,
		ClaimConcurrency: b.o.claimConc,
	}
}

// fixture drops and recreates the bench table with the recommended indexes
// and loads rows: row i belongs to task(i). It returns the smallest key.
func (b *bench) fixture(ctx context.Context, rows int, task func(i int) int) (int64, error) {
	return b.fixtureTable(ctx, benchTable, rows, task)
}

// fixtureTable is fixture on the named table.
func (b *bench) fixtureTable(ctx context.Context, table string, rows int, task func(i int) int) (int64, error) {
	cfg := b.configFor(table, dialect.StrategyAuto)
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	if _, err := b.sql.ExecContext(ctx, "DROP TABLE IF EXISTS "+b.db.Q(table)); err != nil {
		return 0, err
	}
	if err := claim.CreateTable(ctx, b.d, cfg); err != nil {
		return 0, err
	}
	tx, err := b.sql.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var stmt string
	var stmtRows int
	for start := 0; start < rows; start += insertChunkRows {
		n := min(insertChunkRows, rows-start)
		if n != stmtRows {
			vals := make([]string, n)
			for i := range vals {
				vals[i] = "(" + b.db.Ph(i+1) + ")"
			}
			stmt = fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", b.db.Q(table), b.db.Q("task_id"), strings.Join(vals, ", "))
			stmtRows = n
		}
		args := make([]any, n)
		for i := range args {
			args[i] = task(start + i)
		}
		if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	analyze := "ANALYZE " + b.db.Q(table)
	if b.db.Driver == "mysql" {
		analyze = "ANALYZE TABLE " + b.db.Q(table)
	}
	if _, err := b.sql.ExecContext(ctx, analyze); err != nil {
		return 0, err
	}
	var first sql.NullInt64 // NULL for an empty table
	err = b.sql.QueryRowContext(ctx, "SELECT MIN("+b.db.Q("id")+") FROM "+b.db.Q(table)).Scan(&first)
	return first.Int64, err
}

func allTask(int) int { return benchTask }

// ceiling updates every row to done with the batched primary-key UPDATE a
// user would write, workers statements at a time: the most the server does.
func (b *bench) ceiling(ctx context.Context, workers int) (result, error) {
	done, args := fmt.Sprintf("%s = %s, %s = NULL", b.db.Q("status"), b.db.Ph(1), b.db.Q("token")), []any{"DONE"}
	return b.pkWrites(ctx, measureCeiling, workers, []pkWrite{{done, func(int64) []any { return args }}})
}

// twoWrites is measureTwoWrites: each batch set to processing with a token
// and a claim time, then to done with no token, by primary key.
func (b *bench) twoWrites(ctx context.Context, workers int) (result, error) {
	claimed := fmt.Sprintf("%s = %s, %s = %s, %s = %s", b.db.Q("status"), b.db.Ph(1), b.db.Q("token"), b.db.Ph(2), b.db.Q("claimed_at"), b.db.Ph(3))
	done, doneArgs := fmt.Sprintf("%s = %s, %s = NULL", b.db.Q("status"), b.db.Ph(1), b.db.Q("token")), []any{"DONE"}
	return b.pkWrites(ctx, measureTwoWrites, workers, []pkWrite{
		{claimed, func(lo int64) []any { return []any{"PROCESSING", fmt.Sprintf("two-writes-%d", lo), time.Now().UTC()} }},
		{done, func(int64) []any { return doneArgs }},
	})
}

// pkWrite is one batched primary-key UPDATE: its SET clause, whose
// placeholders come first, and their arguments for the batch starting at
// the row lo.
type pkWrite struct {
	set  string
	args func(lo int64) []any
}

// pkWrites runs writes, in order, on every batch of a new fixture, by
// primary key, workers batches at a time.
func (b *bench) pkWrites(ctx context.Context, measure string, workers int, writes []pkWrite) (result, error) {
	rows := b.o.rows
	first, err := b.fixture(ctx, rows, allTask)
	if err != nil {
		return result{}, err
	}
	r := b.base(measure, workers, rows)
	var next atomic.Int64
	var updated atomic.Int64
	errs := make(chan error, workers)
	// The statements are built before the clock starts, and each worker
	// reuses its argument slices: the client's work per statement is the
	// driver's alone, as a user's batched UPDATE would be.
	qs := make([]string, len(writes))
	for i, w := range writes {
		qs[i] = fmt.Sprintf("UPDATE %s SET %s WHERE %s IN %s", b.db.Q(benchTable), w.set, b.db.Q("id"), b.db.In(b.o.batch, len(w.args(0))+1))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			bufs := make([][]any, len(writes))
			for {
				lo := next.Add(int64(b.o.batch)) - int64(b.o.batch)
				if lo >= int64(rows) {
					return
				}
				for i, w := range writes {
					args := append(bufs[i][:0], w.args(lo)...)
					for j := range b.o.batch {
						args = append(args, first+lo+int64(j)) // past the end: matches nothing
					}
					bufs[i] = args
					res, err := b.sql.ExecContext(ctx, qs[i], args...)
					if err != nil {
						errs <- err
						return
					}
					if i == len(writes)-1 {
						n, _ := res.RowsAffected()
						updated.Add(n)
					}
				}
			}
		})
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return r, err
	}
	r.RowsPerS = float64(rows) / r.Seconds
	r.Missing = rows - int(updated.Load())
	return r, nil
}

// tracker records, per row, how often it was processed and whether two
// batches held it at once.
type tracker struct {
	first     int64
	inflight  []atomic.Int32
	processed []atomic.Int32
	overlaps  atomic.Int64
}

func newTracker(first int64, rows int) *tracker {
	return &tracker{first: first, inflight: make([]atomic.Int32, rows), processed: make([]atomic.Int32, rows)}
}

func (t *tracker) slot(id any) (int, error) {
	k, ok := id.(int64)
	if !ok || k < t.first || k-t.first >= int64(len(t.processed)) {
		return 0, fmt.Errorf("unexpected key %v", id)
	}
	return int(k - t.first), nil
}

// hold marks the rows held and processed once more.
func (t *tracker) hold(rows []claim.Row[struct{}]) error {
	for _, r := range rows {
		i, err := t.slot(r.ID)
		if err != nil {
			return err
		}
		if t.inflight[i].Add(1) != 1 {
			t.overlaps.Add(1)
		}
		t.processed[i].Add(1)
	}
	return nil
}

// undo forgets one processing of rows whose batch rolled back: the
// processing left no trace and the rows will be processed again.
func (t *tracker) undo(rows []claim.Row[struct{}]) {
	for _, r := range rows {
		if i, err := t.slot(r.ID); err == nil {
			t.processed[i].Add(-1)
		}
	}
}

// drop marks one row no longer held (just before its ack is written).
func (t *tracker) drop(id any) {
	if i, err := t.slot(id); err == nil {
		t.inflight[i].Add(-1)
	}
}

// check counts rows never processed and rows processed more than once.
func (t *tracker) check() (missing, dups int) {
	for i := range t.processed {
		switch n := t.processed[i].Load(); {
		case n == 0:
			missing++
		case n > 1:
			dups++
		}
	}
	return missing, dups
}

// claimlockRun claims and acks every row with the claimer, workers loops at once.
func (b *bench) claimlockRun(ctx context.Context, measure string, s dialect.Strategy, workers, rows int) (result, error) {
	first, err := b.fixture(ctx, rows, allTask)
	if err != nil {
		return result{}, err
	}
	c, err := claim.New[struct{}](b.d, b.config(s, measure), nil)
	if err != nil {
		return result{}, err
	}
	r := b.base(measure, workers, rows)
	r.Strategy = c.Strategy().String()
	t := newTracker(first, rows)
	var holder *claim.Holder[struct{}]
	var rollbacks atomic.Int64
	if measure == measureHeld || measure == measureHeldDel {
		if holder, err = c.Holder(claim.HoldConfig{MaxInFlight: workers}); err != nil {
			return result{}, err
		}
		r.Strategy = "tx"
	}
	retries0 := b.retries.Load()
	lat := make([][]time.Duration, workers)
	errs := make(chan error, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			work := func() error { return b.worker(ctx, c, measure, t, &lat[w]) }
			if holder != nil {
				work = func() error { return heldWorker(ctx, holder, t, &lat[w], &rollbacks) }
			}
			if err := work(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return r, err
	}
	r.RowsPerS = float64(rows) / r.Seconds
	r.Retries = b.retries.Load() - retries0
	r.Overlaps = t.overlaps.Load()
	r.Rollbacks = rollbacks.Load()
	r.Missing, r.Duplicates = t.check()
	all := slices.Concat(lat...)
	r.P50ms, r.P99ms = quantile(all, 0.50), quantile(all, 0.99)
	st, err := c.Stats(ctx)
	if err != nil {
		return r, err
	}
	want := Stats{Done: int64(rows)}
	if deletes(measure) {
		want = Stats{} // every row deleted
	}
	if got := (Stats{st.Pending, st.Processing, st.Done, st.Failed, st.Other}); got != want {
		return r, fmt.Errorf("rows in the database: %+v, want %+v", got, want)
	}
	return r, nil
}

// Stats are the row counts by status a run leaves in the bench table.
type Stats struct{ Pending, Processing, Done, Failed, Other int64 }

// worker claims until nothing is pending, acking as measure says.
func (b *bench) worker(ctx context.Context, c *claim.Claimer[struct{}], measure string, t *tracker, lat *[]time.Duration) error {
	if measure == measurePiped || measure == measurePipedDel {
		return pipelinedWorker(ctx, c, t, lat)
	}
	for {
		t0 := time.Now()
		batch, err := c.Claim(ctx)
		if err != nil {
			return err
		}
		*lat = append(*lat, time.Since(t0))
		if batch.Len() == 0 {
			return nil
		}
		rows := batch.Rows()
		if err := t.hold(rows); err != nil {
			return err
		}
		switch measure {
		case measureBatched, measureDelete:
			for _, row := range rows {
				t.drop(row.ID)
			}
			err = batch.AckAll(ctx)
		case measureLater:
			for _, row := range rows {
				t.drop(row.ID)
				if err = batch.Ack(ctx, row.ID); err != nil { // deferred: Config.AckDelay
					break
				}
			}
			if err == nil {
				err = batch.Flush(ctx)
			}
		case measurePerRow:
			for _, row := range rows {
				t.drop(row.ID)
				if err = batch.Ack(ctx, row.ID); err != nil {
					break
				}
			}
		}
		if err != nil {
			return err
		}
	}
}

// heldWorker holds batches until one comes back empty, acking each whole
// in its transaction and committing. Its latencies are those of the holds.
// A batch the server rolled back (a deadlock: the error matches
// dialect.ErrClaimLost) is counted in rollbacks and its rows, pending
// again, are held by a later batch.
func heldWorker(ctx context.Context, h *claim.Holder[struct{}], t *tracker, lat *[]time.Duration, rollbacks *atomic.Int64) error {
	for {
		t0 := time.Now()
		batch, err := h.Hold(ctx)
		if err != nil {
			return err
		}
		*lat = append(*lat, time.Since(t0))
		if batch.Len() == 0 {
			return nil
		}
		rows := batch.Rows()
		if err := t.hold(rows); err != nil {
			return err
		}
		for _, row := range rows {
			t.drop(row.ID)
		}
		err = batch.AckAll(ctx)
		if err == nil {
			err = batch.Commit(ctx)
		}
		if errors.Is(err, dialect.ErrClaimLost) {
			_ = batch.Rollback(ctx)
			t.undo(rows)
			rollbacks.Add(1)
			continue
		}
		if err != nil {
			return err
		}
	}
}

// pipelinedWorker claims one batch, then acks each batch together with the
// claim of the next (Claimer.AckAllAndClaim) until a claim comes back
// empty. Its latencies are those of the ack+claim calls.
func pipelinedWorker(ctx context.Context, c *claim.Claimer[struct{}], t *tracker, lat *[]time.Duration) error {
	batch, err := c.Claim(ctx)
	if err != nil {
		return err
	}
	for batch.Len() > 0 {
		rows := batch.Rows()
		if err := t.hold(rows); err != nil {
			return err
		}
		for _, row := range rows {
			t.drop(row.ID)
		}
		t0 := time.Now()
		if batch, err = c.AckAllAndClaim(ctx, batch); err != nil {
			return err
		}
		*lat = append(*lat, time.Since(t0))
	}
	return nil
}

func quantile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := min(int(q*float64(len(ds))), len(ds)-1)
	return float64(ds[i].Microseconds()) / 1000
}

// largeCompare measures single-worker claim+ack latency of the same task
// (taskRows rows) in a table of smallRows and one of largeRows rows, the
// other rows belonging to many other pending tasks. Batches alternate
// between the two tables, so a load change on the machine hits both alike.
func (b *bench) largeCompare(ctx context.Context) (result, error) {
	s := dialect.StrategyAuto
	r := b.base(measureLarge, 1, b.o.taskRows)
	r.SmallRows, r.LargeRows = b.o.smallRows, b.o.largeRows
	small, err := b.taskClaimer(ctx, smallTable, s, b.o.smallRows)
	if err != nil {
		return r, err
	}
	defer b.sql.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+b.db.Q(smallTable))
	large, err := b.taskClaimer(ctx, benchTable, s, b.o.largeRows)
	if err != nil {
		return r, err
	}
	var latSmall, latLarge []time.Duration
	for doneSmall, doneLarge := false, false; !doneSmall || !doneLarge; {
		if !doneSmall {
			if doneSmall, err = claimAck(ctx, small, &latSmall); err != nil {
				return r, err
			}
		}
		if !doneLarge {
			if doneLarge, err = claimAck(ctx, large, &latLarge); err != nil {
				return r, err
			}
		}
	}
	if len(latSmall) == 0 || len(latLarge) == 0 {
		return r, errors.New("the task had no rows")
	}
	r.SmallP50ms, r.LargeP50ms = quantile(latSmall, 0.5), quantile(latLarge, 0.5)
	if r.SmallP50ms > 0 {
		r.SizeRatio = r.LargeP50ms / r.SmallP50ms
	}
	r.Strategy = b.caps.PreferredStrategy.String() + "/" + b.o.largeLayout
	return r, nil
}

// claimAck claims one batch and acks it, appending its latency to lat, and
// reports whether the claim came back empty.
func claimAck(ctx context.Context, c *claim.Claimer[struct{}], lat *[]time.Duration) (bool, error) {
	t0 := time.Now()
	batch, err := c.Claim(ctx)
	if err != nil || batch.Len() == 0 {
		return true, err
	}
	if err := batch.AckAll(ctx); err != nil {
		return true, err
	}
	*lat = append(*lat, time.Since(t0))
	return false, nil
}

// taskClaimer loads table with rows rows, taskRows of them in the claimed
// task (see -large-layout), and returns a claimer of that task.
func (b *bench) taskClaimer(ctx context.Context, table string, s dialect.Strategy, rows int) (*claim.Claimer[struct{}], error) {
	// clustered: the task's rows are every (smallRows/taskRows)th row of the
	// table's last smallRows rows, the same spacing in both tables, so only
	// the table's size differs. spread: they are spaced evenly through the
	// whole table, so in the large table every claimed row sits on its own
	// page and the comparison measures locality as well as size.
	every, start := b.o.smallRows/b.o.taskRows, rows-b.o.smallRows
	if b.o.largeLayout == layoutSpread {
		every, start = rows/b.o.taskRows, 0
	}
	task := func(i int) int {
		if j := i - start; j >= 0 && j%every == 0 && j/every < b.o.taskRows {
			return benchTask
		}
		return 2 + i%997
	}
	if _, err := b.fixtureTable(ctx, table, rows, task); err != nil {
		return nil, err
	}
	return claim.New[struct{}](b.d, b.configFor(table, s), nil)
}

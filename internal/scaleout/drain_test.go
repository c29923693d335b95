package scaleout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/zombie"
)

// taskID is the scope every drain claims; otherTask's rows must never
// change.
const (
	taskID    = 1
	otherTask = 2
	otherRows = 3
)

// itemsConfig is the claim configuration of a drain's table.
func itemsConfig(table string, batch int) claim.Config {
	return claim.Config{
		ClaimTable: dialect.ClaimTable{
			Table: table, Attempts: "attempts", Scope: []string{"task_id"},
		},
		ScopeValues: []any{taskID}, RequireScope: true, BatchSize: batch,
	}
}

// noFields reads no extra column.
func noFields(*struct{}) []any { return nil }

// createItems (re)creates table with its recommended indexes through p's
// dialect and fills it with rows pending rows of the task plus a few rows of
// another task.
func createItems(t *testing.T, p *pool, table string, rows int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := p.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
	require.NoError(t, err)
	spec, err := itemsConfig(table, 1).Resolve()
	require.NoError(t, err)
	ddl, err := store.CreateTableDDL(p.d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, p.d, ddl))
	c, err := claim.New(p.d, itemsConfig(table, 1), noFields)
	require.NoError(t, err)
	missing, err := c.MissingIndexes(ctx)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, p.d, missing))
	// Rows go in by chunks of 5,000: one Galera write set each.
	for start := 0; start < rows; start += 5000 {
		n := min(5000, rows-start)
		var q string
		if p.dollar {
			q = fmt.Sprintf("INSERT INTO %s (task_id, status) SELECT %d, 'PENDING' FROM generate_series(1, %d)", table, taskID, n)
		} else {
			q = fmt.Sprintf("INSERT INTO %s (task_id, status) SELECT %d, 'PENDING' FROM seq_1_to_%d", table, taskID, n)
		}
		_, err := p.db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	_, err = p.db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (task_id, status) VALUES (%d, 'PENDING'), (%d, 'PENDING'), (%d, 'PENDING')", table, otherTask, otherTask, otherTask))
	require.NoError(t, err)
}

// drain describes one run: worker pools draining a table while a fault is
// injected.
type drain struct {
	name    string
	table   string
	pools   []*pool
	workers int // per pool
	rows    int
	batch   int
	// hold is each batch's "work" between its claim and its ack.
	hold time.Duration
	// monitor runs the reaper and the progress checks; it must survive the
	// fault.
	monitor     *pool
	reapTimeout time.Duration
	limit       time.Duration
	// fault, if set, runs in its own goroutine once progress (rows acked)
	// reaches faultAt of rows; it returns a description of what it did.
	fault   func(ctx context.Context) (string, error)
	faultAt float64
	// strategy is the claim strategy; zero is the server's preferred one.
	strategy dialect.Strategy
}

// batchRec is one claimed batch as its worker saw it: held from the return
// of the claim (which committed before it returned) until the ack gave a
// definitive answer (acked, or lost) or the worker gave the batch up.
type batchRec struct {
	pool       string
	token      string
	ids        []any
	start, end time.Time
	acked      bool
	lost       int // rows the ack reported lost
	gaveUp     bool
}

// drainResult is what a run measured.
type drainResult struct {
	rows, done, other int64
	batches           int
	claimErrors       int
	ackErrors         int // ack attempts that failed without an answer (retried)
	lostRows          int // rows an ack reported lost (reaped, or a lost claim)
	gaveUp            int
	duplicates        int // rows processed by more than one batch
	overlaps          int // rows held by two batches at the same time
	overlapSamples    []string
	retries           int64 // library retries (deadlock, certification, serialization)
	retriesByOp       map[string]int64
	errSamples        map[string]int
	elapsed           time.Duration
	faultDesc         string
	faultErr          error
	perPool           map[string]int64 // rows acked per pool
	recs              []*batchRec
}

// run drains d.rows rows and returns the measurements; it fails the test
// when the table did not drain within d.limit.
func (d drain) run(t *testing.T) drainResult {
	t.Helper()
	var (
		mu       sync.Mutex
		recs     []*batchRec
		res      = drainResult{rows: int64(d.rows), errSamples: map[string]int{}, perPool: map[string]int64{}}
		acked    atomic.Int64
		retries0 = make([]int64, len(d.pools))
		byOp0    = make([]map[string]int64, len(d.pools))
	)
	for i, p := range d.pools {
		retries0[i] = store.Retries(p.d)
		byOp0[i] = p.retries.snapshot()
	}
	noteErr := func(kind string, err error) {
		msg := err.Error()
		if len(msg) > 120 {
			msg = msg[:120]
		}
		mu.Lock()
		res.errSamples[kind+": "+msg]++
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()

	// The reaper returns rows of claims whose worker never got them (a claim
	// whose reply was lost) or gave them up.
	cc := itemsConfig(d.table, d.batch)
	cc.Strategy = d.strategy
	reaper, err := zombie.New(d.monitor.d, cc, zombie.Config{Timeout: d.reapTimeout})
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = reaper.Run(ctx, d.reapTimeout/4)
	}()

	worker := func(p *pool, c *claim.Claimer[struct{}]) {
		defer wg.Done()
		idle := 0
		for ctx.Err() == nil {
			b, err := c.Claim(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				res.claimErrors++
				mu.Unlock()
				noteErr("claim", err)
				idle++
				time.Sleep(loop.Backoff(idle, 20*time.Millisecond, 500*time.Millisecond))
				continue
			}
			if b.Len() == 0 {
				idle++
				time.Sleep(loop.Backoff(idle, 10*time.Millisecond, 200*time.Millisecond))
				continue
			}
			idle = 0
			r := &batchRec{pool: p.label, token: b.Token(), ids: b.IDs(), start: time.Now()}
			time.Sleep(d.hold)
			// The worker keeps the batch until the ack answers, retrying
			// after errors, for at most half the reaper's timeout: after
			// that it gives the batch up (a worker cut off from the database
			// that long must assume the rows are being reaped).
			deadline := r.start.Add(d.reapTimeout / 2)
			for {
				actx, acancel := context.WithDeadline(context.Background(), deadline)
				err := b.AckAll(actx)
				acancel()
				var le *claim.LostError
				switch {
				case err == nil:
					r.acked = true
				case errors.As(err, &le):
					r.acked, r.lost = true, len(le.IDs)
				default:
					mu.Lock()
					res.ackErrors++
					mu.Unlock()
					noteErr("ack", err)
					if time.Now().Before(deadline) {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					r.gaveUp = true
				}
				break
			}
			r.end = time.Now()
			if r.acked {
				acked.Add(int64(len(r.ids) - r.lost))
			}
			mu.Lock()
			recs = append(recs, r)
			mu.Unlock()
		}
	}
	for _, p := range d.pools {
		c, err := claim.New(p.d, cc, noFields)
		require.NoError(t, err, p.label)
		for range d.workers {
			wg.Add(1)
			go worker(p, c)
		}
	}

	faultDone := make(chan struct{})
	if d.fault != nil {
		go func() {
			defer close(faultDone)
			for ctx.Err() == nil && float64(acked.Load()) < d.faultAt*float64(d.rows) {
				time.Sleep(20 * time.Millisecond)
			}
			if ctx.Err() != nil {
				return
			}
			desc, err := d.fault(ctx)
			mu.Lock()
			res.faultDesc, res.faultErr = desc, err
			mu.Unlock()
		}()
	} else {
		close(faultDone)
	}

	// Wait until nothing is pending or processing, reading through the
	// monitor's pool (which may fail during the fault).
	mc, err := claim.New(d.monitor.d, cc, noFields)
	require.NoError(t, err)
	var last claim.Stats
	var lastErr error
	drained := false
	for time.Since(start) < d.limit {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		last, lastErr = mc.Stats(sctx)
		scancel()
		if lastErr == nil && last.Pending == 0 && last.Processing == 0 && last.Done >= int64(d.rows) {
			drained = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.elapsed = time.Since(start)
	cancel()
	wg.Wait()
	<-faultDone
	require.NoError(t, res.faultErr, "fault")
	require.True(t, drained, "%s: not drained after %v: %+v (last error %v); errors %v", d.name, d.limit, last, lastErr, res.errSamples)

	res.retriesByOp = map[string]int64{}
	for i, p := range d.pools {
		res.retries += store.Retries(p.d) - retries0[i]
		for op, n := range p.retries.snapshot() {
			if n -= byOp0[i][op]; n != 0 {
				res.retriesByOp[op] += n
			}
		}
	}
	res.batches = len(recs)
	res.recs = recs
	res.analyse(recs)

	// The database's view: every row of the task done, the other task's
	// rows untouched, no token left behind.
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	ph := "?"
	if d.monitor.dollar {
		ph = "$1"
	}
	require.NoError(t, d.monitor.db.QueryRowContext(fctx, "SELECT COUNT(*) FROM "+d.table+" WHERE task_id = "+ph+" AND status = 'DONE' AND token IS NULL", taskID).Scan(&res.done))
	require.NoError(t, d.monitor.db.QueryRowContext(fctx, "SELECT COUNT(*) FROM "+d.table+" WHERE task_id = "+ph+" AND status = 'PENDING' AND token IS NULL AND claimed_at IS NULL", otherTask).Scan(&res.other))
	return res
}

// analyse counts duplicates and overlaps from the batch records.
func (res *drainResult) analyse(recs []*batchRec) {
	byRow := map[any][]*batchRec{}
	for _, r := range recs {
		for _, id := range r.ids {
			byRow[id] = append(byRow[id], r)
		}
		if r.gaveUp {
			res.gaveUp++
		}
		res.lostRows += r.lost
		if r.acked {
			res.perPool[r.pool] += int64(len(r.ids) - r.lost)
		}
	}
	for id, rs := range byRow {
		if len(rs) < 2 {
			continue
		}
		res.duplicates++
		sort.Slice(rs, func(i, j int) bool { return rs[i].start.Before(rs[j].start) })
		for i := 1; i < len(rs); i++ {
			// Two claims of one row held at the same time: the later one
			// returned before the earlier one's holder had its answer.
			if prev := rs[i-1]; rs[i].start.Before(prev.end) {
				res.overlaps++
				if len(res.overlapSamples) < 5 {
					res.overlapSamples = append(res.overlapSamples, fmt.Sprintf("row %v: %s token %.8s held %s..%s (acked=%v lost=%d gaveUp=%v), %s token %.8s claimed at %s",
						id, prev.pool, prev.token, prev.start.Format("15:04:05.000"), prev.end.Format("15:04:05.000"), prev.acked, prev.lost, prev.gaveUp,
						rs[i].pool, rs[i].token, rs[i].start.Format("15:04:05.000")))
				}
				break
			}
		}
	}
}

// summary is the one-line report every drain prints.
func (res *drainResult) summary(name, extra string) string {
	pools := make([]string, 0, len(res.perPool))
	for k, v := range res.perPool {
		pools = append(pools, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(pools)
	s := fmt.Sprintf("scaleout: %s rows=%d done=%d lost=%d overlaps=%d duplicates=%d batches=%d retries=%d[%s] claim-errors=%d ack-errors=%d acks-lost=%d gave-up=%d %s drain=%.1fs per-pool[%s]",
		name, res.rows, res.done, res.rows-res.done, res.overlaps, res.duplicates, res.batches, res.retries, fmtOps(res.retriesByOp), res.claimErrors, res.ackErrors, res.lostRows, res.gaveUp,
		extra, res.elapsed.Seconds(), strings.Join(pools, " "))
	if res.faultDesc != "" {
		s += " fault: " + res.faultDesc
	}
	return s
}

// logErrors logs the distinct errors workers saw, most frequent first.
func (res *drainResult) logErrors(t *testing.T) {
	t.Helper()
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range res.errSamples {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	for i, e := range all {
		if i == 8 {
			t.Logf("  ... %d more distinct errors", len(all)-i)
			break
		}
		t.Logf("  %6d x %s", e.n, e.k)
	}
	for _, s := range res.overlapSamples {
		t.Logf("  overlap: %s", s)
	}
}

// firstAckAfter returns how long after t the first batch claimed after t
// was acked: the time workers took to work again after a fault.
func (res *drainResult) firstAckAfter(t time.Time) time.Duration {
	var best time.Duration = -1
	for _, r := range res.recs {
		if r.start.After(t) && r.acked && r.lost == 0 {
			if d := r.end.Sub(t); best < 0 || d < best {
				best = d
			}
		}
	}
	return best
}

// fmtOps formats counts by operation as "claim=3 lease-acquire=1".
func fmtOps(m map[string]int64) string {
	ops := make([]string, 0, len(m))
	for k, v := range m {
		ops = append(ops, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", "-"), v))
	}
	slices.Sort(ops)
	return strings.Join(ops, " ")
}

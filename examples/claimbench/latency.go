package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
)

// The latency modes (-latency).
const (
	measureLatency = "pickup"
	latencyPoll    = "poll"   // Run's default polling only
	latencyNotify  = "notify" // PostgreSQL: Dialect.Listen + Notify in the insert's transaction
)

// latency measures pickup latency on an idle system: one connection inserts
// rows one at a time at a fixed rate, each in its own transaction, while
// Claimer.Run waits with its default poll interval; a row's latency runs
// from its insert's commit to the start of its handler. It runs once with
// polling only and, on PostgreSQL, once with notifications.
func (b *bench) latency(ctx context.Context) error {
	modes := []string{latencyPoll}
	if _, ok := b.d.(*postgres.Dialect); ok {
		modes = append(modes, latencyNotify)
	}
	for _, m := range modes {
		r, err := b.pickup(ctx, m)
		if err != nil {
			return fmt.Errorf("latency %s: %w", m, err)
		}
		b.emit(r)
	}
	return nil
}

// pickup runs one latency measurement.
func (b *bench) pickup(ctx context.Context, mode string) (result, error) {
	rows := b.o.latencyRows
	r := b.base(measureLatency, b.o.latencyWorkers, rows)
	r.Strategy = mode
	r.Rate = b.o.latencyRate
	if _, err := b.fixture(ctx, 0, allTask); err != nil {
		return r, err
	}
	cfg := b.config(dialect.StrategyAuto, "")
	c, err := claim.New[struct{}](b.d, cfg, nil)
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if mode == latencyNotify {
		pd := b.d.(*postgres.Dialect)
		wg.Go(func() { _ = pd.Listen(ctx, postgres.ListenConfig{}) })
	}

	var mu sync.Mutex
	committed := map[int64]time.Time{}
	started := map[int64]time.Time{}
	var handled, dups atomic.Int64
	runErr := make(chan error, 1)
	wg.Go(func() {
		runErr <- c.Run(ctx, claim.WorkerConfig[struct{}]{
			Workers: b.o.latencyWorkers, // PollMin and PollMax: the defaults
			Handler: func(_ context.Context, row claim.Row[struct{}]) error {
				now := time.Now()
				id := row.ID.(int64)
				mu.Lock()
				if _, ok := started[id]; ok {
					dups.Add(1)
				} else {
					started[id] = now
				}
				mu.Unlock()
				handled.Add(1)
				return nil
			},
		})
	})
	// Let every loop find the table empty and go idle.
	time.Sleep(time.Second)
	if mode == latencyNotify {
		for deadline := time.Now().Add(10 * time.Second); !b.d.(*postgres.Dialect).Listening(); {
			if time.Now().After(deadline) {
				return r, errors.New("the listener did not connect within 10 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	interval := time.Duration(float64(time.Second) / float64(b.o.latencyRate))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	start := time.Now()
	for i := 0; i < rows; i++ {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-tick.C:
		}
		id, at, err := b.insertOne(ctx, mode == latencyNotify, cfg)
		if err != nil {
			return r, err
		}
		mu.Lock()
		committed[id] = at
		mu.Unlock()
	}
	r.Seconds = time.Since(start).Seconds()
	for deadline := time.Now().Add(time.Minute); handled.Load() < int64(rows); {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("%d of %d rows handled after a minute", handled.Load(), rows)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if err := <-runErr; err != nil {
		return r, err
	}
	lat := make([]time.Duration, 0, rows)
	for id, at := range committed {
		s, ok := started[id]
		if !ok {
			r.Missing++
			continue
		}
		// The handler may start before the inserting goroutine has read
		// the clock after its commit returned.
		lat = append(lat, max(s.Sub(at), 0))
	}
	r.Duplicates = int(dups.Load())
	r.RowsPerS = float64(rows) / r.Seconds
	r.P50ms, r.P99ms = quantile(lat, 0.50), quantile(lat, 0.99)
	return r, nil
}

// insertOne inserts one pending row in its own transaction, notifying in
// it when notify is set, and returns its key and the time its commit
// returned.
func (b *bench) insertOne(ctx context.Context, notify bool, cfg claim.Config) (int64, time.Time, error) {
	tx, err := b.sql.BeginTx(ctx, nil)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer tx.Rollback()
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", b.db.Q(benchTable), b.db.Q("task_id"), b.db.Ph(1))
	var id int64
	if b.db.Driver == "postgres" {
		err = tx.QueryRowContext(ctx, q+" RETURNING "+b.db.Q("id"), benchTask).Scan(&id)
	} else {
		res, xerr := tx.ExecContext(ctx, q, benchTask)
		if xerr == nil {
			id, xerr = res.LastInsertId()
		}
		err = xerr
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	if notify {
		nq, args, err := postgres.NotifyStatement(cfg.ClaimTable, cfg.ScopeValues...)
		if err != nil {
			return 0, time.Time{}, err
		}
		if _, err := tx.ExecContext(ctx, nq, args...); err != nil {
			return 0, time.Time{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, time.Time{}, err
	}
	return id, time.Now(), nil
}

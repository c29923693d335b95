package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// simulate runs the writers (and, in coalesce and queued modes, the
// flushers) until every event is accepted and folded, then verifies the
// database.
func (a *app) simulate(ctx context.Context, stderr io.Writer) (summary, error) {
	evs := generate(a.o)
	var (
		next, accepted, ignored atomic.Int64
		latMu                   sync.Mutex
		lat, hotLat             []time.Duration
	)
	// write sends events (one at a time but with -accept-batch) and
	// reports which were accepted (not duplicates).
	write := func(ctx context.Context, evs []event) ([]bool, error) {
		one := a.writeCoalesce
		if a.o.mode == "naive" {
			one = a.writeNaive
		}
		ok := make([]bool, len(evs))
		for k, e := range evs {
			var err error
			if ok[k], err = one(ctx, e); err != nil {
				return nil, err
			}
		}
		return ok, nil
	}
	if a.o.acceptBatch > 1 {
		write = a.writeBatch
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopMeter, err := a.meterLocks(ctx)
	if err != nil {
		return summary{}, fmt.Errorf("lock waits: %w", err)
	}

	start := time.Now()
	a.start, a.sent, a.persisted = start, make([]atomic.Int64, len(evs)+1), nil
	writersDone := make(chan struct{})
	var writers sync.WaitGroup
	for range a.o.writers {
		writers.Go(func() {
			var mine, mineHot []time.Duration
			defer func() {
				latMu.Lock()
				lat, hotLat = append(lat, mine...), append(hotLat, mineHot...)
				latMu.Unlock()
			}()
			n := int64(max(a.o.acceptBatch, 1))
			for ctx.Err() == nil {
				i := next.Add(n) - n
				if i >= int64(len(evs)) {
					return
				}
				if !a.pace(ctx, start, i) {
					return
				}
				chunk := evs[i:min(i+n, int64(len(evs)))]
				var resends []event
				for _, e := range chunk {
					a.markSent(e.ID)
					if e.Resend {
						resends = append(resends, e)
					}
				}
				// The events, then their resends (a client's retries).
				for _, send := range [][]event{chunk, resends} {
					if len(send) == 0 {
						continue
					}
					t := time.Now()
					ok, err := write(ctx, send)
					if err != nil {
						cancel(fmt.Errorf("write events %d to %d: %w", send[0].ID, send[len(send)-1].ID, err))
						return
					}
					took := time.Since(t)
					for k, e := range send {
						if e.User == hotUser {
							mineHot = append(mineHot, took)
						} else {
							mine = append(mine, took)
						}
						if ok[k] {
							if a.o.mode == "naive" {
								// Its delta committed with it.
								a.markPersisted([]int64{e.ID})
							}
							accepted.Add(1)
						} else {
							ignored.Add(1)
						}
					}
				}
			}
		})
	}
	var writeElapsed time.Duration
	go func() {
		writers.Wait()
		writeElapsed = time.Since(start)
		close(writersDone)
	}()

	// The flushers run until the writers are done and no key is dirty.
	fctx, stopFlushers := context.WithCancel(ctx)
	defer stopFlushers()
	var flushers sync.WaitGroup
	if a.o.mode != "naive" {
		for range a.o.flushers {
			flushers.Go(func() {
				if err := a.flusher.Run(fctx); err != nil {
					cancel(fmt.Errorf("flusher: %w", err))
				}
			})
		}
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	writing, wd := true, writersDone
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-wd:
			writing, wd = false, nil
		case <-poll.C:
			if writing {
				continue
			}
			if a.o.mode == "naive" {
				break wait
			}
			dirty, _, err := a.co.Backlog(ctx)
			if err != nil {
				cancel(fmt.Errorf("backlog: %w", err))
				break wait
			}
			if dirty == 0 {
				break wait
			}
		case <-tick.C:
			if !a.o.quiet {
				fmt.Fprintf(stderr, "progress: %d/%d accepted, %d requeues\n", accepted.Load(), len(evs), a.requeues.Load())
			}
		}
	}
	stopFlushers()
	flushers.Wait()
	<-writersDone // the writers stop when ctx is cancelled
	elapsed := time.Since(start)
	locks, merr := stopMeter()
	if err := context.Cause(ctx); err != nil {
		return summary{}, err
	}
	if merr != nil {
		return summary{}, fmt.Errorf("lock waits: %w", merr)
	}

	s := summary{
		Mode: a.o.mode, Driver: a.db.Driver, Writers: a.o.writers, Flushers: a.o.flushers, Users: a.o.users,
		Events: int64(len(evs)), Accepted: accepted.Load(), DuplicatesIgnored: ignored.Load(),
		Requeues: a.requeues.Load(), Retries: a.retries.Load(),
		WriteSeconds: writeElapsed.Seconds(), TotalSeconds: elapsed.Seconds(),
		LockWaits: locks.Waits, LockWaitMs: locks.WaitMs, LockWaitsBy: locks.By,
	}
	if a.o.mode == "naive" {
		s.Flushers = 0
	}
	slices.Sort(lat)
	slices.Sort(hotLat)
	s.P50Ms, s.P99Ms = ms(quantile(lat, 0.50)), ms(quantile(lat, 0.99))
	s.HotP50Ms, s.HotP99Ms = ms(quantile(hotLat, 0.50)), ms(quantile(hotLat, 0.99))
	slices.Sort(a.persisted)
	s.PersistP50Ms, s.PersistP99Ms = ms(quantile(a.persisted, 0.50)), ms(quantile(a.persisted, 0.99))
	s.BacklogMaxMs = ms(quantile(a.persisted, 1))
	if err := a.verify(context.WithoutCancel(ctx), evs, &s); err != nil {
		return s, err
	}
	s.AcceptedPerSec = float64(s.Accepted) / writeElapsed.Seconds()
	s.StateWritesPerSec = float64(s.StateWrites) / elapsed.Seconds()
	if s.StateWrites > 0 {
		s.CoalescingRatio = float64(s.Accepted) / float64(s.StateWrites)
	}
	if s.HotStateWrites > 0 {
		s.HotCoalescingRatio = float64(s.HotEvents) / float64(s.HotStateWrites)
	}
	return s, nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pace waits, with -rate, until event i is due: i/rate after start, a
// steady load. It reports false when ctx ended first.
func (a *app) pace(ctx context.Context, start time.Time, i int64) bool {
	if a.o.rate <= 0 {
		return true
	}
	d := time.Until(start.Add(time.Duration(float64(i) / a.o.rate * float64(time.Second))))
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

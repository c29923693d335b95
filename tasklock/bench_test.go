package tasklock_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

// BenchmarkAcquireRelease is an uncontended acquire + release of one key.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			k, _ := setup(b, e, tasklock.Config{})
			ctx := ctxT(b)
			b.ReportAllocs()
			for b.Loop() {
				l, err := k.Acquire(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkContended16 has 16 goroutines fight over one key; each iteration
// is one acquire attempt (released at once when it succeeds). It reports
// the share of attempts that won.
func BenchmarkContended16(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			k, _ := setup(b, e, tasklock.Config{})
			ctx := ctxT(b)
			var attempts, wins atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(16 / max(1, testingProcs()))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					attempts.Add(1)
					l, err := k.Acquire(ctx, "bench")
					if errors.Is(err, dialect.ErrLeaseHeld) {
						continue
					}
					if err != nil {
						b.Error(err)
						return
					}
					wins.Add(1)
					if _, err := l.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(wins.Load())/float64(max(1, attempts.Load())), "wins/op")
		})
	}
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }

package coalesce_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// BenchmarkAccept accepts changes of one hot key from parallel goroutines
// (b.SetParallelism of GOMAXPROCS × 4), with no flusher running: the cost
// of the intake and of the dirty mark, which, the key staying pending,
// writes the key's row once.
//
//	go test -run '^$' -bench Accept ./coalesce/
func BenchmarkAccept(b *testing.B) {
	for _, e := range testengine.All {
		b.Run(e.Name, func(b *testing.B) {
			c := testengine.Open(b, e, 16)
			setup(b, c)
			co := newCoalescer(b, c, coalesce.Config{})
			var id atomic.Int64
			ctx := context.Background()
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := id.Add(1)
					if _, err := co.Accept(ctx, coalesce.Change{Key: "hot", EventID: "b" + strconv.FormatInt(i, 10), Payload: []byte("1")}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkAcceptKeys is BenchmarkAccept over a thousand keys, each
// change's key the next one: the dirty mark writes most changes' key rows.
//
//	go test -run '^$' -bench AcceptKeys ./coalesce/
func BenchmarkAcceptKeys(b *testing.B) {
	for _, e := range testengine.All {
		b.Run(e.Name, func(b *testing.B) {
			c := testengine.Open(b, e, 16)
			setup(b, c)
			co := newCoalescer(b, c, coalesce.Config{})
			var id atomic.Int64
			ctx := context.Background()
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := id.Add(1)
					if _, err := co.Accept(ctx, coalesce.Change{Key: "k" + strconv.FormatInt(i%1000, 10), EventID: "b" + strconv.FormatInt(i, 10), Payload: []byte("1")}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkAcceptBatch accepts batches of 16 and 100 changes from
// parallel goroutines (as BenchmarkAccept: GOMAXPROCS × 4), of one hot key
// (hot) or of a thousand keys, each change's key the next one (keys), with
// no flusher running. An op is a batch; ns/change is the time per change,
// to set beside BenchmarkAccept's and BenchmarkAcceptKeys's ns/op.
//
//	go test -run '^$' -bench AcceptBatch ./coalesce/
func BenchmarkAcceptBatch(b *testing.B) {
	for _, e := range testengine.All {
		for _, shape := range []string{"hot", "keys"} {
			for _, size := range []int{16, 100} {
				b.Run(e.Name+"/"+shape+"-"+strconv.Itoa(size), func(b *testing.B) {
					c := testengine.Open(b, e, 16)
					setup(b, c)
					co := newCoalescer(b, c, coalesce.Config{})
					var id atomic.Int64
					ctx := context.Background()
					b.SetParallelism(4)
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						batch := make([]coalesce.Change, size)
						for pb.Next() {
							for j := range batch {
								i := id.Add(1)
								key := "hot"
								if shape == "keys" {
									key = "k" + strconv.FormatInt(i%1000, 10)
								}
								batch[j] = coalesce.Change{Key: key, EventID: "b" + strconv.FormatInt(i, 10), Payload: []byte("1")}
							}
							if _, err := co.AcceptBatch(ctx, batch); err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/change")
				})
			}
		}
	}
}

// BenchmarkFlushKeys folds one change of each of b.N dirty keys with one
// flusher (BatchSize 16), one key per transaction (keys-per-tx-1) or
// several (FlusherConfig.KeysPerTx 4 and 16): an op is a key folded and
// acked. The changes are accepted before the timer starts.
//
//	go test -run '^$' -bench FlushKeys ./coalesce/
func BenchmarkFlushKeys(b *testing.B) {
	for _, e := range testengine.All {
		for _, k := range []int{1, 4, 16} {
			b.Run(e.Name+"/keys-per-tx-"+strconv.Itoa(k), func(b *testing.B) {
				c := testengine.Open(b, e, 16)
				setup(b, c)
				co := newCoalescer(b, c, coalesce.Config{})
				f := newFlusher(b, c, co, coalesce.FlusherConfig{BatchSize: 16, KeysPerTx: k})
				ctx := context.Background()
				batch := make([]coalesce.Change, 0, 100)
				for i := range b.N {
					batch = append(batch, coalesce.Change{Key: "k" + strconv.Itoa(i), EventID: "e" + strconv.Itoa(i), Payload: []byte("1")})
					if len(batch) == cap(batch) || i == b.N-1 {
						if _, err := co.AcceptBatch(ctx, batch); err != nil {
							b.Fatal(err)
						}
						batch = batch[:0]
					}
				}
				b.ResetTimer()
				folded := 0
				for folded < b.N {
					n, err := f.Flush(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						b.Fatalf("%d of %d keys folded, and none dirty", folded, b.N)
					}
					folded += n
				}
			})
		}
	}
}

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

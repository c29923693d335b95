package tasklock_test

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

// contentionDuration is how long each engine's contention test runs:
// 3 s by default, 30 s with CLAIMLOCK_LONG=1, or
// CLAIMLOCK_CONTENTION_SECONDS.
func contentionDuration() time.Duration {
	if s := os.Getenv("CLAIMLOCK_CONTENTION_SECONDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return time.Duration(n) * time.Second
		}
	}
	if os.Getenv("CLAIMLOCK_LONG") == "1" {
		return 30 * time.Second
	}
	return 3 * time.Second
}

// mutexInput is one operation on the lease: an acquire attempt or the
// release of the fence a client holds.
type mutexInput struct {
	release bool
	client  int
	fence   int64 // release: the fence being released
}

// mutexOutput is an operation's result: for an acquire, whether it
// succeeded and the fence it returned; for a release, whether the row was
// still held.
type mutexOutput struct {
	ok    bool
	fence int64
}

// mutexState is the model's state: who holds the lease (-1: nobody) and
// the last fence handed out.
type mutexState struct {
	holder int
	fence  int64
}

// mutexModel is a lease as a sequential specification: an acquire succeeds
// only when nobody holds the lease and returns a fence larger than every
// earlier one; it fails only while someone holds it; only the holder
// releases, and its release finds the row still held.
var mutexModel = porcupine.Model{
	Init: func() any { return mutexState{holder: -1} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(mutexState), input.(mutexInput), output.(mutexOutput)
		switch {
		case in.release:
			if s.holder != in.client || s.fence != in.fence || !out.ok {
				return false, s
			}
			return true, mutexState{holder: -1, fence: s.fence}
		case out.ok:
			if s.holder != -1 || out.fence <= s.fence {
				return false, s
			}
			return true, mutexState{holder: in.client, fence: out.fence}
		default:
			return s.holder != -1, s
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(mutexInput), output.(mutexOutput)
		if in.release {
			return fmt.Sprintf("release(%d) -> %v", in.fence, out.ok)
		}
		if out.ok {
			return fmt.Sprintf("acquire() -> fence %d", out.fence)
		}
		return "acquire() -> held"
	},
}

// Mutual exclusion under contention: 16 goroutines fight over one key; the
// history of acquire attempts and releases must be linearizable against
// mutexModel, fences must strictly increase with no gaps, and the shared
// "inside" counter must never exceed one.
func TestMutualExclusionUnderContention(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e engine) {
		const workers = 16
		k, _ := setup(t, e, tasklock.Config{TTL: 10 * time.Second})
		ctx := ctxT(t)
		base := time.Now()
		stamp := func() int64 { return int64(time.Since(base)) }
		stop := time.Now().Add(contentionDuration())

		var (
			mu      sync.Mutex
			history []porcupine.Operation
			inside  atomic.Int32
			overlap atomic.Int32
			wg      sync.WaitGroup
		)
		record := func(op porcupine.Operation) {
			mu.Lock()
			history = append(history, op)
			mu.Unlock()
		}
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					call := stamp()
					l, err := k.Acquire(ctx, "hot")
					ret := stamp()
					if err != nil {
						if !assertHeld(t, err) {
							return
						}
						record(porcupine.Operation{ClientId: w, Input: mutexInput{client: w}, Call: call, Output: mutexOutput{}, Return: ret})
						time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
						continue
					}
					record(porcupine.Operation{ClientId: w, Input: mutexInput{client: w}, Call: call, Output: mutexOutput{ok: true, fence: l.Fence()}, Return: ret})
					if inside.Add(1) != 1 {
						overlap.Add(1)
					}
					time.Sleep(time.Duration(rand.N(500)) * time.Microsecond)
					inside.Add(-1)
					call = stamp()
					ok, err := l.Release(ctx)
					ret = stamp()
					if err != nil {
						t.Errorf("release: %v", err)
						return
					}
					record(porcupine.Operation{ClientId: w, Input: mutexInput{release: true, client: w, fence: l.Fence()}, Call: call, Output: mutexOutput{ok: ok}, Return: ret})
				}
			}()
		}
		wg.Wait()
		require.Zero(t, overlap.Load(), "two holders inside the critical section")

		var fences []int64
		// A successful acquire returns before its holder releases, which is
		// before the next acquisition takes effect: ordered by return time,
		// fences must count up by one (an attempt's call time says nothing,
		// it may wait for a connection).
		slices.SortFunc(history, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
		for _, op := range history {
			if out := op.Output.(mutexOutput); !op.Input.(mutexInput).release && out.ok {
				fences = append(fences, out.fence)
			}
		}
		// Enough acquisitions for the fence and linearizability checks to
		// mean something; how many depends on the machine's load.
		require.GreaterOrEqual(t, len(fences), 4, "acquisitions")
		for i := 1; i < len(fences); i++ {
			require.Equal(t, fences[i-1]+1, fences[i], "fences strictly increase, one per acquisition")
		}
		start := time.Now()
		res := porcupine.CheckOperationsTimeout(mutexModel, history, 60*time.Second)
		t.Logf("%s: %d operations, %d acquisitions, linearizability check %v in %v", e.name, len(history), len(fences), res, time.Since(start))
		require.Equal(t, porcupine.Ok, res, "history is not linearizable against a mutex")
	})
}

func assertHeld(t *testing.T, err error) bool {
	t.Helper()
	if !errors.Is(err, dialect.ErrLeaseHeld) {
		t.Errorf("acquire: %v", err)
		return false
	}
	return true
}

package group

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// double is a Run that doubles each input and refuses odd ones, recording
// each run's inputs.
type double struct {
	mu     sync.Mutex
	runs   [][]int
	gate   chan struct{} // when set, each run waits for a receive
	causes []error       // the causes of the runs' ended contexts
}

func (d *double) run(ctx context.Context, ins []int) ([]int, []error, error) {
	d.mu.Lock()
	d.runs = append(d.runs, append([]int(nil), ins...))
	d.mu.Unlock()
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			d.mu.Lock()
			d.causes = append(d.causes, context.Cause(ctx))
			d.mu.Unlock()
			return nil, nil, context.Cause(ctx)
		}
	}
	outs, errs := make([]int, len(ins)), make([]error, len(ins))
	for i, in := range ins {
		if in%2 != 0 {
			errs[i] = fmt.Errorf("odd %d", in)
			continue
		}
		outs[i] = 2 * in
	}
	return outs, errs, nil
}

func (d *double) runCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runs)
}

// settled reports whether g has nothing running and nothing queued.
func settled[In, Out any](g *Group[In, Out]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running == 0 && len(g.queue) == 0
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
		time.Sleep(time.Millisecond)
	}
}

func TestAloneRunsAtOnce(t *testing.T) {
	d := &double{}
	g := &Group[int, int]{Run: d.run, Max: 10, InFlight: 1}
	out, err := g.Do(context.Background(), 4)
	require.NoError(t, err)
	require.Equal(t, 8, out)
	_, err = g.Do(context.Background(), 3)
	require.EqualError(t, err, "odd 3")
	require.Equal(t, [][]int{{4}, {3}}, d.runs, "each call alone, in a run of its own")
	eventually(t, "the group to settle", func() bool { return settled(g) })
}

// Calls that arrive while a run is in flight go together into the next
// one, at most Max per run, each with its own result.
func TestCallsInFlightGoTogether(t *testing.T) {
	d := &double{gate: make(chan struct{})}
	g := &Group[int, int]{Run: d.run, Max: 4, InFlight: 1}
	ctx := context.Background()
	results := make([]chan error, 11)
	outs := make([]int, 11)
	for i := range results {
		results[i] = make(chan error, 1)
	}
	go func() {
		var err error
		outs[0], err = g.Do(ctx, 0)
		results[0] <- err
	}()
	eventually(t, "the first run", func() bool { return d.runCount() == 1 })
	for i := 1; i <= 10; i++ {
		go func() {
			var err error
			outs[i], err = g.Do(ctx, i)
			results[i] <- err
		}()
	}
	eventually(t, "ten queued calls", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == 10
	})
	for range 4 { // the first run and the three runs of the queue (4, 4, 2)
		d.gate <- struct{}{}
	}
	for i, r := range results {
		err := <-r
		if i%2 != 0 {
			assert.EqualError(t, err, fmt.Sprintf("odd %d", i))
			continue
		}
		assert.NoError(t, err)
		assert.Equal(t, 2*i, outs[i])
	}
	require.Len(t, d.runs, 4)
	require.Equal(t, []int{0}, d.runs[0])
	seen := map[int]bool{}
	for _, r := range d.runs[1:] {
		require.LessOrEqual(t, len(r), 4, "Max")
		for _, in := range r {
			require.False(t, seen[in], "input %d run twice", in)
			seen[in] = true
		}
	}
	require.Len(t, seen, 10)
	eventually(t, "the group to settle", func() bool { return settled(g) })
}

func TestInFlightRunsAtOnce(t *testing.T) {
	var inside atomic.Int32
	both := make(chan struct{})
	g := &Group[int, int]{Max: 1, InFlight: 2, Run: func(ctx context.Context, ins []int) ([]int, []error, error) {
		if inside.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(30 * time.Second):
			return nil, nil, errors.New("the second run never started")
		}
		return make([]int, len(ins)), make([]error, len(ins)), nil
	}}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			_, err := g.Do(context.Background(), i)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	eventually(t, "the group to settle", func() bool { return settled(g) })
}

// A call whose context ends while it waits is never run; the run of a
// batch goes on while one of its callers still waits, and its context ends
// when none does.
func TestContexts(t *testing.T) {
	d := &double{gate: make(chan struct{})}
	g := &Group[int, int]{Run: d.run, Max: 10, InFlight: 1}
	first := make(chan error, 1)
	go func() {
		_, err := g.Do(context.Background(), 0)
		first <- err
	}()
	eventually(t, "the first run", func() bool { return d.runCount() == 1 })
	gone, cancel := context.WithCancelCause(context.Background())
	goneErr := make(chan error, 1)
	go func() {
		_, err := g.Do(gone, 2)
		goneErr <- err
	}()
	eventually(t, "the queued call", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == 1
	})
	cause := errors.New("the caller gave up")
	cancel(cause)
	require.ErrorIs(t, <-goneErr, cause)
	d.gate <- struct{}{}
	require.NoError(t, <-first)
	require.Equal(t, [][]int{{0}}, d.runs, "the abandoned call was never run")
	eventually(t, "the group to settle", func() bool { return settled(g) })

	// A batch of two whose callers both give up: its context ends.
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancelCause(context.Background())
	lastGone := errors.New("the last caller went away")
	hold := make(chan error, 1)
	go func() {
		_, err := g.Do(context.Background(), 8)
		hold <- err
	}()
	eventually(t, "the run of 8", func() bool { return d.runCount() == 2 })
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() { _, err := g.Do(ctxA, 10); errA <- err }()
	go func() { _, err := g.Do(ctxB, 12); errB <- err }()
	eventually(t, "two queued calls", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == 2
	})
	d.gate <- struct{}{} // 8 ends; 10 and 12 start together
	require.NoError(t, <-hold)
	eventually(t, "the run of 10 and 12", func() bool { return d.runCount() == 3 })
	cancelA()
	require.ErrorIs(t, <-errA, context.Canceled)
	select {
	case err := <-errB:
		t.Fatalf("the run ended while a caller still waited: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancelB(lastGone)
	require.ErrorIs(t, <-errB, lastGone)
	eventually(t, "the run's end", func() bool { return settled(g) })
	require.ElementsMatch(t, []int{10, 12}, d.runs[2])
	d.mu.Lock()
	require.Equal(t, []error{lastGone}, d.causes, "the run's context ends with the last caller's cause")
	d.mu.Unlock()
}

func TestRunErrors(t *testing.T) {
	boom := errors.New("boom")
	g := &Group[int, int]{Max: 10, InFlight: 1, Run: func(ctx context.Context, ins []int) ([]int, []error, error) {
		return nil, nil, boom
	}}
	_, err := g.Do(context.Background(), 1)
	require.ErrorIs(t, err, boom)
	g.Run = func(ctx context.Context, ins []int) ([]int, []error, error) { return nil, nil, nil }
	_, err = g.Do(context.Background(), 1)
	require.ErrorIs(t, err, ErrShape)
	eventually(t, "the group to settle", func() bool { return settled(g) })
}

// Many callers, some giving up at random: every call that returns a
// result got its own, nothing is run twice, and the group ends settled.
func TestStress(t *testing.T) {
	var mu sync.Mutex
	ran := map[int]int{}
	g := &Group[int, int]{Max: 7, InFlight: 3, Run: func(ctx context.Context, ins []int) ([]int, []error, error) {
		mu.Lock()
		for _, in := range ins {
			ran[in]++
		}
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		outs := make([]int, len(ins))
		for i, in := range ins {
			outs[i] = in + 1
		}
		return outs, make([]error, len(ins)), nil
	}}
	var wg sync.WaitGroup
	var ok, gaveUp atomic.Int64
	for i := range 4000 {
		wg.Go(func() {
			ctx := context.Background()
			if i%5 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(300))*time.Microsecond)
				defer cancel()
			}
			out, err := g.Do(ctx, i)
			if err != nil {
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				gaveUp.Add(1)
				return
			}
			assert.Equal(t, i+1, out)
			ok.Add(1)
		})
	}
	wg.Wait()
	eventually(t, "the group to settle", func() bool { return settled(g) })
	for in, n := range ran {
		require.Equal(t, 1, n, "input %d ran %d times", in, n)
	}
	require.EqualValues(t, 4000, ok.Load()+gaveUp.Load())
	require.GreaterOrEqual(t, int64(len(ran)), ok.Load())
	t.Logf("%d results, %d gave up, %d runs' inputs", ok.Load(), gaveUp.Load(), len(ran))
}

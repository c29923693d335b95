package coalesce_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/observe"
)

// TestObserver: accepts (recorded, duplicate, stale, in a transaction),
// folds (with the changes folded, a failed one with its error) and the
// flushers' claim events reach Config.Observer.
func TestObserver(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		var mu sync.Mutex
		var events []observe.Event
		co := newCoalescer(t, c, coalesce.Config{Observer: observe.Func(func(_ context.Context, e observe.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		})})
		of := func(op observe.Op) []observe.Event {
			mu.Lock()
			defer mu.Unlock()
			var out []observe.Event
			for _, e := range events {
				if e.Op == op {
					out = append(out, e)
				}
			}
			return out
		}
		for _, ch := range []coalesce.Change{
			{Key: "o", EventID: "o1", Source: "s", Seq: 1, Payload: []byte("1")},
			{Key: "o", EventID: "o2", Source: "s", Seq: 2, Payload: []byte("2")},
			{Key: "o", EventID: "o1", Source: "s", Seq: 1, Payload: []byte("1")}, // duplicate
			{Key: "o", EventID: "o0", Source: "s", Seq: 1, Payload: []byte("1")}, // stale
		} {
			_, _ = co.Accept(ctx, ch)
		}
		tx, err := c.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = co.AcceptTx(ctx, tx, coalesce.Change{Key: "bad", EventID: "b1", Payload: []byte("not a number")})
		require.NoError(t, err)
		require.NoError(t, tx.Commit())

		acc := of(coalesce.OpAccept)
		require.Len(t, acc, 5)
		for i, want := range []struct {
			rows  int
			stale bool
			tx    bool
		}{{1, false, false}, {1, false, false}, {0, false, false}, {0, true, false}, {1, false, true}} {
			e := acc[i]
			require.Equal(t, observe.SourceCoalesce, e.Source)
			require.Equal(t, "coalesce_changes", e.Table)
			require.Equal(t, want.rows, e.Rows, "accept %d", i)
			require.Equal(t, want.stale, errors.Is(e.Err, coalesce.ErrStale), "accept %d: %v", i, e.Err)
			require.Equal(t, want.tx, e.Tx, "accept %d", i)
			require.Positive(t, e.Duration)
		}

		f := newFlusher(t, c, co, coalesce.FlusherConfig{MaxAttempts: 1})
		n, err := f.Flush(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		folds := of(coalesce.OpFold)
		require.Len(t, folds, 2)
		byKey := map[any]observe.Event{}
		for _, e := range folds {
			byKey[e.Key] = e
		}
		require.Equal(t, 2, byKey["o"].Rows)
		require.NoError(t, byKey["o"].Err)
		require.Equal(t, "coalesce_keys", byKey["o"].Table)
		require.Error(t, byKey["bad"].Err, "the fold's own error")
		require.NotContains(t, byKey["bad"].Err.Error(), "fold: ", "the fold's error as it returned it")
		require.Len(t, of(claim.OpClaim), 1, "the flusher's claims are claim's events")
		require.Len(t, of(claim.OpFail), 1)
	})
}

// AcceptResult names an accept's outcome from its event.
func TestAcceptResult(t *testing.T) {
	for want, e := range map[string]observe.Event{
		"recorded":   {Op: coalesce.OpAccept, Rows: 1},
		"duplicate":  {Op: coalesce.OpAccept},
		"stale":      {Op: coalesce.OpAccept, Err: &coalesce.StaleError{}},
		"overloaded": {Op: coalesce.OpAccept, Err: &coalesce.OverloadError{}},
		"error":      {Op: coalesce.OpAccept, Err: errors.New("connection refused")},
	} {
		require.Equal(t, want, coalesce.AcceptResult(e), "%+v", e)
	}
}

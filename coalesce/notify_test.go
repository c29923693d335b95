package coalesce_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/observe"
)

// TestNotifyWakesOtherProcesses: on PostgreSQL, a key made dirty by a
// coalescer with Config.Notify wakes an idle flusher of another process
// (its own pool and dialect, running Listen) at once, where that flusher
// would otherwise sleep out a ten-minute poll; without Notify it stays
// asleep (the control: the wake-up is the notification's). Elsewhere New
// refuses Notify.
//
// The listener wakes every subscribed claimer once each time it
// (re)connects, so that none misses what was notified while nobody
// listened: a flusher subscribed when that wake-up comes claims once more,
// and folds a key made dirty meanwhile without any notification. So the
// flusher starts only once the listener is past its first wake-up (the
// test's own subscription heard it), and sleeps with no wake-up pending;
// the test's subscription hears every later wake-up the flusher hears, so
// a fold during the control that follows one (a reconnection) is told
// from a flusher that was not asleep, and the control is run again.
func TestNotifyWakesOtherProcesses(t *testing.T) {
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			c := testengine.Open(t, e, 8)
			if e.Name != testengine.Postgres {
				_, err := coalesce.New(c.Dialect, c.DB, coalesce.Config{Notify: true})
				require.ErrorIs(t, err, dialect.ErrInvalidConfig)
				require.ErrorContains(t, err, "Notify")
				return
			}
			setup(t, c)
			ctx := context.Background()

			// The flushing process: its own pool, listening.
			there, closeThere, err := testengine.Connect(ctx, e.Name, c.DSN, 4, dialect.Options{})
			require.NoError(t, err)
			t.Cleanup(closeThere)
			pd := there.Dialect.(*postgres.Dialect)
			// empty counts the flusher's claims that found nothing: after
			// one, with no wake-up pending, it sleeps.
			var empty atomic.Int64
			flushCo := newCoalescer(t, there, coalesce.Config{Observer: observe.Func(func(_ context.Context, e observe.Event) {
				if e.Op == claim.OpClaim && e.Err == nil && e.Claimed == 0 {
					empty.Add(1)
				}
			})})
			// A fold reports its key and the empty claims before it.
			type fold struct {
				key   string
				empty int64
			}
			folds := make(chan fold, 16)
			sum := sumFold(true)
			f := newFlusher(t, there, flushCo, coalesce.FlusherConfig{
				PollMin: 10 * time.Minute, PollMax: 10 * time.Minute,
				Fold: func(ctx context.Context, tx *sql.Tx, key string, recs []coalesce.Record) error {
					err := sum(ctx, tx, key, recs)
					if err == nil {
						folds <- fold{key, empty.Load()}
					}
					return err
				},
			})

			// The test's subscription to the keys table's notifications,
			// before the listener starts: the listener joins the table's
			// channel on connecting, then wakes it.
			var heard atomic.Int64
			t.Cleanup(f.Claimer().OnNotify(func() { heard.Add(1) }))
			testengine.Listen(t, pd)
			deadline := time.Now().Add(30 * time.Second)
			for heard.Load() == 0 || !pd.Listening() {
				require.True(t, time.Now().Before(deadline), "the listener never joined the keys table's channel")
				time.Sleep(10 * time.Millisecond)
			}

			// Run subscribes to a channel already listened to, and its
			// first claim finds nothing; then it sleeps.
			rctx, stopRun := context.WithCancel(ctx)
			runErr := make(chan error, 1)
			go func() { runErr <- f.Run(rctx) }()
			t.Cleanup(func() {
				stopRun()
				assert.NoError(t, <-runErr)
			})
			for empty.Load() == 0 || !pd.Listening() {
				require.True(t, time.Now().Before(deadline), "no claim, or the listener never took the flusher's subscription")
				time.Sleep(10 * time.Millisecond)
			}

			// Without Notify: nothing wakes the flusher.
			quiet := newCoalescer(t, c, coalesce.Config{})
			want := map[string]bool{}
			for attempt := 0; ; attempt++ {
				key := fmt.Sprint("silent-", attempt)
				want[key] = true
				before := heard.Load()
				_, err = quiet.Accept(ctx, coalesce.Change{Key: key, EventID: key, Payload: []byte("1")})
				require.NoError(t, err)
				select {
				case fd := <-folds:
					// The listener calls the flusher's wake-up and the
					// test's one after the other: give the test's a moment.
					require.Eventually(t, func() bool { return heard.Load() != before }, 2*time.Second, time.Millisecond,
						"key %q folded without a notification: the flusher was not asleep", fd.key)
					// The listener woke every claimer (it reconnected):
					// the flusher was right to claim. Once it is asleep
					// again (a claim after the fold found nothing), once
					// more.
					require.Less(t, attempt, 2, "the listener woke the flusher during every control")
					t.Logf("the listener woke the flusher during control %d; running it again", attempt)
					delete(want, fd.key)
					require.Eventually(t, func() bool { return empty.Load() > fd.empty }, 30*time.Second, time.Millisecond, "the flusher never went idle again")
					continue
				case <-time.After(2 * time.Second):
				}
				break
			}

			// With Notify: the flusher wakes and folds the keys.
			before := heard.Load()
			loud := newCoalescer(t, c, coalesce.Config{Notify: true})
			_, err = loud.Accept(ctx, coalesce.Change{Key: "loud", EventID: "e1", Payload: []byte("2")})
			require.NoError(t, err)
			want["loud"] = true
			timeout := time.After(30 * time.Second)
			for len(want) > 0 {
				select {
				case fd := <-folds:
					delete(want, fd.key)
				case <-timeout:
					t.Fatalf("%v not folded within 30 s of the notifying Accept; the flusher polls every 10 minutes", want)
				}
			}
			assert.Eventually(t, func() bool { return heard.Load() > before }, 10*time.Second, time.Millisecond, "the notification reached the flushing process")
			total, _, _ := stateOf(t, c, "loud")
			assert.EqualValues(t, 2, total)
		})
	}
}

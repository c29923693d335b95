package coalesce_test

import (
	"context"
	"database/sql"
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
			testengine.Listen(t, pd)
			var claims atomic.Int64
			flushCo := newCoalescer(t, there, coalesce.Config{Observer: observe.Func(func(_ context.Context, e observe.Event) {
				if e.Op == claim.OpClaim && e.Err == nil {
					claims.Add(1)
				}
			})})
			folds := make(chan string, 16)
			sum := sumFold(true)
			f := newFlusher(t, there, flushCo, coalesce.FlusherConfig{
				PollMin: 10 * time.Minute, PollMax: 10 * time.Minute,
				Fold: func(ctx context.Context, tx *sql.Tx, key string, recs []coalesce.Record) error {
					err := sum(ctx, tx, key, recs)
					if err == nil {
						folds <- key
					}
					return err
				},
			})
			rctx, stopRun := context.WithCancel(ctx)
			runErr := make(chan error, 1)
			go func() { runErr <- f.Run(rctx) }()
			t.Cleanup(func() {
				stopRun()
				assert.NoError(t, <-runErr)
			})

			// Run subscribes before its first claim, which finds nothing;
			// then wait until the listener has joined the keys table's
			// channel.
			deadline := time.Now().Add(30 * time.Second)
			for claims.Load() == 0 || !pd.Listening() {
				require.True(t, time.Now().Before(deadline), "no claim, or the listener never joined the keys table's channel")
				time.Sleep(10 * time.Millisecond)
			}

			// Without Notify: nothing wakes the flusher.
			quiet := newCoalescer(t, c, coalesce.Config{})
			_, err = quiet.Accept(ctx, coalesce.Change{Key: "silent", EventID: "e0", Payload: []byte("1")})
			require.NoError(t, err)
			select {
			case k := <-folds:
				t.Fatalf("key %q folded without a notification: the flusher was not asleep", k)
			case <-time.After(2 * time.Second):
			}

			// With Notify: the flusher wakes and folds both keys.
			loud := newCoalescer(t, c, coalesce.Config{Notify: true})
			_, err = loud.Accept(ctx, coalesce.Change{Key: "loud", EventID: "e1", Payload: []byte("2")})
			require.NoError(t, err)
			got := map[string]bool{}
			timeout := time.After(30 * time.Second)
			for len(got) < 2 {
				select {
				case k := <-folds:
					got[k] = true
				case <-timeout:
					t.Fatalf("folded %v within 30 s of the notifying Accept; the flusher polls every 10 minutes", got)
				}
			}
			total, _, _ := stateOf(t, c, "loud")
			assert.EqualValues(t, 2, total)
		})
	}
}

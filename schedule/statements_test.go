package schedule_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestClaimStatements holds each engine's claim statement to its
// contract: the cursor moves only from the value read, only while the
// database's now is inside the window, a run only while the job is not
// paused, and the runs table keeps one row per fire time.
func TestClaimStatements(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		st, err := store.OpenSchedules(c.Dialect, store.ScheduleTables{Jobs: "claimlock_jobs", Runs: "claimlock_runs"})
		require.NoError(t, err)
		require.NoError(t, st.VerifySchema(ctx))
		require.NoError(t, st.Register(ctx, "j"))
		require.NoError(t, st.Register(ctx, "j")) // twice is harmless
		js, err := st.State(ctx, "j")
		require.NoError(t, err)
		require.True(t, js.Exists)
		require.False(t, js.Paused)
		now, hour := js.Now, int64(time.Hour/time.Microsecond)
		run := func(prev, fire, from, to int64) store.ScheduleClaim {
			return store.ScheduleClaim{Job: "j", Prev: prev, To: fire, WinFrom: from, WinTo: to, Run: true, Token: "tok", Fence: 1, Worker: "w"}
		}
		claim := func(cl store.ScheduleClaim) bool {
			res, err := st.Claim(ctx, cl)
			require.NoError(t, err)
			return res.Claimed
		}
		fire := js.Cursor + 1000
		require.False(t, claim(run(js.Cursor, fire, now+hour, store.NoEnd)), "a window that opens in an hour")
		require.False(t, claim(run(js.Cursor, fire, 0, now-hour)), "a window that closed an hour ago")
		require.False(t, claim(run(js.Cursor-1, fire, 0, store.NoEnd)), "a stale cursor")
		require.NoError(t, st.Pause(ctx, "j", true))
		require.False(t, claim(run(js.Cursor, fire, 0, store.NoEnd)), "a run of a paused job")
		require.NoError(t, st.Pause(ctx, "j", false))
		require.True(t, claim(run(js.Cursor, fire, 0, store.NoEnd)))
		require.False(t, claim(run(js.Cursor, fire, 0, store.NoEnd)), "the same fire time twice")
		after, err := st.State(ctx, "j")
		require.NoError(t, err)
		require.Equal(t, fire, after.Cursor)
		status, token, ok, err := st.RunOf(ctx, "j", fire)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, store.RunRunning, status)
		require.Equal(t, "tok", token)
		// Skipped fire times after the run: the run's token owns no live
		// lease (this test took none), so the claim records it lost, and
		// its holder's Finish changes nothing.
		res, err := st.Claim(ctx, store.ScheduleClaim{Job: "j", Prev: fire, To: fire + 2000, WinFrom: 0, WinTo: store.NoEnd,
			SkipFrom: fire + 1000, SkipUntil: fire + 3000, Worker: "w"})
		require.NoError(t, err)
		require.True(t, res.Claimed)
		require.Equal(t, int64(1), res.Lost, "the running run's token owns no lease: recorded lost")
		ok, err = st.Finish(ctx, "j", fire, "tok", store.RunSucceeded, "")
		require.NoError(t, err)
		require.False(t, ok, "a run found lost is not finished")
		rows, err := st.History(ctx, "j", store.NoEnd, 10)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Equal(t, store.RunSkipped, rows[0].Status)
		require.Equal(t, fire+3000, rows[0].Until)
		require.Equal(t, store.RunLost, rows[1].Status)
	})
}

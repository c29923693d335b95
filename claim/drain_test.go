package claim_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/internal/testkit/await"
)

// drainStall is how long a drain of these tests may go without a row
// reaching a final state before the test fails: their steps are
// milliseconds apart, so ten seconds without one is a hang (a row retried
// forever, a lock never released), also on a loaded machine with the race
// detector, not a slow run.
const drainStall = 10 * time.Second

// awaitStats waits until stats satisfy done. It fails when no row has
// reached a final state for drainStall (progress: done and failed rows,
// less pending and processing ones, so that deleted done rows count too),
// naming what was awaited and the last stats seen, with seen's report
// when given.
func awaitStats(t *testing.T, what string, stats func(context.Context) (claim.Stats, error), done func(claim.Stats) bool, seen func() string) {
	t.Helper()
	await.Progress(t, what, drainStall, 0, func() (await.State, error) {
		ctx, cancel := context.WithTimeout(context.Background(), drainStall)
		defer cancel()
		st, err := stats(ctx)
		if err != nil {
			// The database may be away for a while (the outage tests):
			// not progress, and shown if it lasts.
			return await.State{Progress: math.MinInt64, Seen: fmt.Sprintf("stats failed: %v", err)}, nil
		}
		s := fmt.Sprintf("%+v", st)
		if seen != nil {
			s += "; " + seen()
		}
		return await.State{Done: done(st), Progress: st.Done + st.Failed - st.Pending - st.Processing, Seen: s}, nil
	})
}

package leader_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/await"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestTakeover: three processes compete. The leader is killed with
// SIGKILL: another takes over within the TTL and a retry. The new leader
// is frozen with SIGSTOP past the TTL: a third takes over; when the frozen
// one resumes, it learns it lost leadership, and whatever it writes then
// is refused by the fence. Through it all, the writes the register
// accepted come from one leader at a time: in the order the database
// accepted them their fences never go down, and no two leaders' accepted
// writes interleave in time.
func TestTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		const ttl = time.Second
		for _, def := range []store.TableDef{
			{Table: regTable, Columns: []store.ColumnDef{{Name: "k", Type: store.TypeInt, NotNull: true}, {Name: "fence", Type: store.TypeInt, NotNull: true}, {Name: "n", Type: store.TypeInt, NotNull: true}}, PrimaryKey: []string{"k"}},
			{Table: logTable, Columns: []store.ColumnDef{{Name: "id", Type: store.TypeSerial}, {Name: "fence", Type: store.TypeInt, NotNull: true}, {Name: "pid", Type: store.TypeInt, NotNull: true}}},
		} {
			ddl, err := store.CreateTableDDL(c.Dialect, def)
			require.NoError(t, err)
			require.NoError(t, store.ExecDDL(ctx, c.Dialect, ddl))
		}
		_, err := c.DB.ExecContext(ctx, `INSERT INTO `+regTable+` (k, fence, n) VALUES (1, 0, 0)`)
		require.NoError(t, err)

		env := []string{envEngine + "=" + c.Engine, envDSN + "=" + c.DSN, envTTL + "=" + ttl.String()}
		kids := []*child{spawn(t, env...), spawn(t, env...), spawn(t, env...)}
		leaderAfter := func(what string, fence int64, limit time.Duration) (*child, event) {
			var k *child
			var ev event
			await.Until(t, what, limit, func() (bool, string) {
				for _, kid := range kids {
					for _, e := range kid.Events() {
						if e.Ev == "lead" && e.Fence > fence {
							k, ev = kid, e
							return true, ""
						}
					}
				}
				return false, "no new leader yet"
			})
			return k, ev
		}
		first, lead1 := leaderAfter("a first leader", 0, 15*time.Second)
		time.Sleep(300 * time.Millisecond)
		first.signal(t, syscall.SIGKILL)
		killedAt := time.Now()
		second, lead2 := leaderAfter("a leader after the SIGKILL", lead1.Fence, 5*time.Second)
		afterKill := time.Since(killedAt)
		// A leader frozen past its TTL is replaced. Not on SQLite: a
		// process stopped inside a write transaction keeps the database's
		// one write lock, and no other process can take the lease until it
		// resumes (an engine property, not the election's).
		var afterStop time.Duration
		var lead3 event
		if c.Engine != testengine.SQLite {
			time.Sleep(300 * time.Millisecond)
			second.signal(t, syscall.SIGSTOP)
			stoppedAt := time.Now()
			var third *child
			third, lead3 = leaderAfter("a leader after the SIGSTOP", lead2.Fence, 5*time.Second)
			afterStop = time.Since(stoppedAt)
			require.NotSame(t, second, third)
			time.Sleep(2 * ttl)
			second.signal(t, syscall.SIGCONT)
			// The resumed one reports its loss.
			await.Until(t, "the frozen leader to report its loss", 5*time.Second, func() (bool, string) {
				for _, e := range second.Events() {
					if e.Ev == "lost" && e.Fence == lead2.Fence {
						return true, ""
					}
				}
				return false, "no loss reported"
			})
		}
		time.Sleep(300 * time.Millisecond)
		for _, k := range kids {
			if k != first {
				k.signal(t, syscall.SIGTERM)
				<-k.done
			}
		}
		t.Logf("%s: takeover %v after SIGKILL (fence %d -> %d), %v after SIGSTOP (fence %d -> %d)",
			c.Engine, afterKill.Round(time.Millisecond), lead1.Fence, lead2.Fence, afterStop.Round(time.Millisecond), lead2.Fence, lead3.Fence)
		require.Less(t, afterKill, ttl+time.Second)
		require.Less(t, afterStop, ttl+time.Second)

		// The accepted writes, in the database's order: fences never go
		// down.
		rows, err := c.DB.QueryContext(ctx, `SELECT fence FROM `+logTable+` ORDER BY id`)
		require.NoError(t, err)
		var fences []int64
		for rows.Next() {
			var f int64
			require.NoError(t, rows.Scan(&f))
			fences = append(fences, f)
		}
		require.NoError(t, rows.Err())
		require.NotEmpty(t, fences)
		for i := 1; i < len(fences); i++ {
			require.GreaterOrEqual(t, fences[i], fences[i-1], "accepted writes interleave: %v", fences)
		}
		// In time: every accepted write of a term was issued before the
		// first accepted write of a later term returned (a write's event is
		// emitted after it returns, maybe after a freeze: its issue time
		// is what the leader controls).
		lastIssued := map[int64]int64{}    // fence -> latest issue time of an accepted write
		firstReturned := map[int64]int64{} // fence -> earliest return time of an accepted write
		refused := 0
		for _, k := range kids {
			for _, e := range k.Events() {
				if e.Ev != "write" {
					continue
				}
				if !e.OK {
					refused++
					continue
				}
				lastIssued[e.Fence] = max(lastIssued[e.Fence], e.T0)
				if f, ok := firstReturned[e.Fence]; !ok || e.T < f {
					firstReturned[e.Fence] = e.T
				}
			}
		}
		for fa, issued := range lastIssued {
			for fb, returned := range firstReturned {
				if fa < fb {
					require.Less(t, issued, returned, "term %d issued a write after term %d's first write returned", fa, fb)
				}
			}
		}
		t.Logf("%s: %d accepted writes in %d terms, %d refused by the fence", c.Engine, len(fences), len(lastIssued), refused)
	})
}

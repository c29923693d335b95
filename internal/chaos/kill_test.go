package chaos

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSIGKILL kills random workers mid-batch many times per run and starts a
// replacement each time; the reaper and the survivors drain the task. Rows
// are sent twice only when a killed worker had sent them before dying.
func TestSIGKILL(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			kills := size(10, 60)
			spec := fleetSpec{
				scenario: "sigkill", rows: size(1500, 12000), workers: 3, batch: 10,
				sendDelay: 4 * time.Millisecond, heartbeat: 200 * time.Millisecond, reapTimeout: 1500 * time.Millisecond,
				inject: func(f *fleet) int {
					return killLoop(f, kills, 50, 150, func(c *child) bool { return midBatch(c) })
				},
			}
			r := runFleet(t, e, spec)
			require.GreaterOrEqual(t, r.faults, 10)
			require.Zero(t, r.lost)
			require.Zero(t, r.overlaps)
			require.Zero(t, r.dupOther)
		})
	}
}

// TestSIGKILLTxAck kills workers at random points, mid-batch or not, while
// they send each row and ack it in one transaction (Batch.AckTx). A killed
// worker's open transaction rolls back with its send, so every row ends
// with exactly one send: the sends are counted per row, and no unique key
// hides a duplicate (the log's key is (row, token), and each claim has its
// own token).
func TestSIGKILLTxAck(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			kills := size(10, 40)
			spec := fleetSpec{
				scenario: "sigkill-txack", rows: size(1000, 10000), workers: 3, batch: 10, txAck: true,
				sendDelay: 3 * time.Millisecond, heartbeat: 200 * time.Millisecond, reapTimeout: 1500 * time.Millisecond,
				inject: func(f *fleet) int {
					return killLoop(f, kills, 30, 120, func(*child) bool { return true })
				},
			}
			r := runFleet(t, e, spec)
			require.GreaterOrEqual(t, r.faults, 5)
			require.Zero(t, r.lost)
			require.Zero(t, r.overlaps)
			require.Zero(t, r.dupKilled+r.dupAcked+r.dupOther, "a send commits with its ack or not at all")
			require.Equal(t, r.rows, r.sends, "exactly one send per row, counted")
		})
	}
}

// killLoop SIGKILLs up to kills workers, one every minMs+rand(spreadMs)
// milliseconds, each picked at random among the live workers eligible says
// yes to, and starts a replacement for each, until the task drains or the
// drain limit passes. It returns how many it killed.
func killLoop(f *fleet, kills, minMs, spreadMs int, eligible func(*child) bool) int {
	n := 0
	deadline := time.Now().Add(drainLimit())
	for n < kills && time.Now().Before(deadline) {
		time.Sleep(time.Duration(minMs+rand.IntN(spreadMs)) * time.Millisecond)
		if drained(f.d) {
			break
		}
		var pick []*child
		for _, c := range f.live() {
			if eligible(c) {
				pick = append(pick, c)
			}
		}
		if len(pick) == 0 {
			continue
		}
		f.kill(pick[rand.IntN(len(pick))])
		n++
		f.startWorker()
	}
	return n
}

// midBatch reports whether the worker's last batch has rows it has not
// acked yet.
func midBatch(c *child) bool {
	open := 0
	for _, ev := range c.Events() {
		switch ev.Ev {
		case "claim":
			open = len(ev.IDs)
		case "ack", "lost", "ackerr":
			open--
		}
	}
	return open > 0
}

// drained reports whether the task has nothing pending or processing.
func drained(d *db) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := stats(ctx, d)
	return err == nil && st.Pending == 0 && st.Processing == 0
}

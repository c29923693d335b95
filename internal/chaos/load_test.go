package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLoad drains a large task with four worker processes and no faults,
// each row's claim and ack logged by its worker: every row done exactly
// once, none lost, no two claims of a row at once. Long mode claims
// 1,000,000 rows; short mode 20,000.
func TestLoad(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			if long() && e.driver == "sqlite" {
				t.Skip("the million-row load is for the servers; SQLite runs the short load")
			}
			spec := fleetSpec{
				scenario: "load", rows: size(20000, 1000000), workers: 4, batch: 100, ackBatch: true,
				heartbeat: 2 * time.Second, reapTimeout: 30 * time.Second, drain: 20 * time.Minute,
				inject: func(*fleet) int { return 0 },
			}
			r := runFleet(t, e, spec)
			require.Zero(t, r.lost)
			require.Zero(t, r.overlaps)
			require.Zero(t, r.dupOther)
			require.Zero(t, r.dupKilled+r.dupAcked, "no faults, no duplicate sends")
		})
	}
}

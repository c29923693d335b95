package chaos

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// workerApp is the application_name of the workers' PostgreSQL sessions.
const workerApp = "chaos_worker"

// killSessions terminates the workers' server sessions from outside and
// returns how many it killed. PostgreSQL: the sessions named workerApp;
// MariaDB: every other session on the test's database.
func killSessions(ctx context.Context, d *db, admin *sql.Conn) (int, error) {
	if d.driver == "postgres" {
		res, err := admin.QueryContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1", workerApp)
		if err != nil {
			return 0, err
		}
		defer res.Close()
		n := 0
		for res.Next() {
			var ok bool
			if err := res.Scan(&ok); err != nil {
				return n, err
			}
			if ok {
				n++
			}
		}
		return n, res.Err()
	}
	res, err := admin.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()")
	if err != nil {
		return 0, err
	}
	var ids []int64
	for res.Next() {
		var id int64
		if err := res.Scan(&id); err != nil {
			res.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	res.Close()
	n := 0
	for _, id := range ids {
		// The session may have ended meanwhile (unknown thread id): not a
		// kill.
		if _, err := admin.ExecContext(ctx, "KILL CONNECTION "+itoa(id)); err == nil {
			n++
		}
	}
	return n, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestDroppedConnections kills the workers' server sessions from outside,
// over and over, while they claim, send, ack and heartbeat. Workers recover
// through the pool; an ack of unknown outcome leaves its row for the
// reaper. Nothing is lost and no row is held twice.
func TestDroppedConnections(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			if e.driver == "sqlite" {
				t.Skip("SQLite has no server sessions to drop")
			}
			rounds := size(15, 120)
			spec := fleetSpec{
				scenario: "dropped-connections", rows: size(1200, 10000), workers: 3, batch: 10,
				sendDelay: 4 * time.Millisecond, heartbeat: 200 * time.Millisecond, reapTimeout: 1500 * time.Millisecond,
				workerDSN: func(dsn string) string {
					if e.driver == "postgres" {
						return withParam(e.driver, dsn, "application_name", workerApp)
					}
					return dsn
				},
				inject: func(f *fleet) int {
					ctx := context.Background()
					admin, err := f.d.sql.Conn(ctx)
					require.NoError(t, err)
					defer admin.Close()
					n := 0
					for range rounds {
						time.Sleep(time.Duration(100+rand.IntN(150)) * time.Millisecond)
						if drained(f.d) {
							break
						}
						k, err := killSessions(ctx, f.d, admin)
						require.NoError(t, err)
						n += k
					}
					return n
				},
			}
			r := runFleet(t, e, spec)
			require.Positive(t, r.faults)
			require.Zero(t, r.lost)
			require.Zero(t, r.overlaps)
			require.Zero(t, r.dupOther)
		})
	}
}

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// restartServer restarts the engine's server and waits until it answers.
// CLAIMLOCK_CHAOS_PG_RESTART / CLAIMLOCK_CHAOS_MYSQL_RESTART replace the
// default commands (run with sh -c) for servers managed another way.
func restartServer(t *testing.T, driver string) {
	t.Helper()
	custom := map[string]string{"postgres": os.Getenv("CLAIMLOCK_CHAOS_PG_RESTART"), "mysql": os.Getenv("CLAIMLOCK_CHAOS_MYSQL_RESTART")}[driver]
	if custom != "" {
		out, err := exec.Command("sh", "-c", custom).CombinedOutput()
		require.NoError(t, err, "%s: %s", custom, out)
		return
	}
	switch driver {
	case "postgres":
		vers, err := os.ReadDir("/etc/postgresql")
		require.NoError(t, err, "PostgreSQL clusters")
		require.NotEmpty(t, vers)
		out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", vers[0].Name(), "main", "restart").CombinedOutput()
		require.NoError(t, err, "pg_ctlcluster: %s", out)
	case "mysql":
		out, err := exec.Command("pidof", "mariadbd").Output()
		require.NoError(t, err, "pidof mariadbd")
		pid, err := strconv.Atoi(strings.Fields(string(out))[0])
		require.NoError(t, err)
		require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
		for deadline := time.Now().Add(60 * time.Second); syscall.Kill(pid, 0) == nil; {
			require.True(t, time.Now().Before(deadline), "mariadbd %d did not stop", pid)
			time.Sleep(100 * time.Millisecond)
		}
		out, err = exec.Command("start-stop-daemon", "--start", "--oknodo", "--background", "--exec", "/usr/sbin/mariadbd").CombinedOutput()
		require.NoError(t, err, "start-stop-daemon: %s", out)
		for deadline := time.Now().Add(60 * time.Second); exec.Command("mariadb-admin", "ping").Run() != nil; {
			require.True(t, time.Now().Before(deadline), "mariadbd did not come back")
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// TestServerRestart restarts the PostgreSQL and MariaDB servers in the
// middle of a run. It restarts shared servers, so it runs only with
// CLAIMLOCK_CHAOS_RESTART=1 (never under a plain go test ./...). Nothing is
// lost and the task drains after the server returns.
func TestServerRestart(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			if e.driver == "sqlite" {
				t.Skip("SQLite has no server to restart")
			}
			if os.Getenv(envRestart) != "1" {
				t.Skipf("SKIPPING: restarting the shared %s server would break other test packages; set %s=1 to run it", e.name, envRestart)
			}
			spec := fleetSpec{
				scenario: "server-restart", rows: size(1500, 6000), workers: 3, batch: 10,
				sendDelay: 4 * time.Millisecond, heartbeat: 200 * time.Millisecond, reapTimeout: 2 * time.Second,
				inject: func(f *fleet) int {
					// Restart once the workers are busy.
					for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
						st, err := stats(context.Background(), f.d)
						require.NoError(t, err)
						if st.Done > 0 {
							break
						}
					}
					start := time.Now()
					restartServer(t, e.driver)
					fmt.Printf("chaos: %s restarted in %v\n", e.name, time.Since(start).Round(time.Millisecond))
					return 1
				},
			}
			r := runFleet(t, e, spec)
			require.Zero(t, r.lost)
			require.Zero(t, r.overlaps)
			require.Zero(t, r.dupOther)
		})
	}
}

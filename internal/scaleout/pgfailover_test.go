package scaleout

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

// pgPair (re)starts the primary and standby in replication mode mode ("off"
// for asynchronous, "on" for synchronous) and returns their DSNs. A pair
// whose standby was promoted is rebuilt from scratch by the script.
func pgPair(t *testing.T, mode string) (sh, primary, standby string) {
	t.Helper()
	pgDSNs(t) // skips without the harness
	sh = script(t, "pg-standby.sh")
	out, err := run(t, 3*time.Minute, sh, "start", "--sync="+mode)
	require.NoError(t, err)
	env := exports(out)
	primary, standby = env[envPGPrimaryDSN], env[envPGStandbyDSN]
	require.NotEmpty(t, primary, "pg-standby.sh start printed no primary DSN: %q", out)
	require.NotEmpty(t, standby, "pg-standby.sh start printed no standby DSN: %q", out)
	return sh, primary, standby
}

// failoverDSN lists both servers with target_session_attrs=read-write:
// new connections go to whichever of them accepts writes, so workers follow
// a promotion without being told.
func failoverDSN(t *testing.T, primary, standby string) string {
	t.Helper()
	p, err := url.Parse(primary)
	require.NoError(t, err)
	s, err := url.Parse(standby)
	require.NoError(t, err)
	p.Host = p.Host + "," + s.Host
	q := p.Query()
	q.Set("target_session_attrs", "read-write")
	p.RawQuery = q.Encode()
	return p.String()
}

// waitReplayed waits until the standby sees table.
func waitReplayed(t *testing.T, standby *pool, table string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := standby.db.QueryRow("SELECT COUNT(*) FROM pg_class WHERE relname = $1", table).Scan(&n)
		if err == nil && n == 1 {
			return
		}
		require.True(t, time.Now().Before(deadline), "the standby did not replay the creation of %s (%v)", table, err)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPGStandbyReadOnly points a claimer and a locker at the hot standby:
// each operation must fail at once with dialect.ErrReadOnly, not be retried.
func TestPGStandbyReadOnly(t *testing.T) {
	_, primaryDSN, standbyDSN := pgPair(t, "off")
	primary := openPG(t, "primary", primaryDSN, 4)
	table := "so_readonly"
	createItems(t, primary, table, 10)
	ctx := context.Background()
	require.NoError(t, tasklock.CreateTable(ctx, primary.d, "so_ro_leases"))
	standby := openPG(t, "standby", standbyDSN, 4)
	waitReplayed(t, standby, "so_ro_leases")
	waitReplayed(t, standby, table)

	c, err := claim.New(standby.d, itemsConfig(table, 5), noFields)
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Claim(ctx)
	took := time.Since(start)
	require.ErrorIs(t, err, dialect.ErrReadOnly)
	require.False(t, dialect.IsRetryable(err))
	require.Zero(t, store.Retries(standby.d), "a read-only refusal was retried")
	require.Less(t, took, 5*time.Second)

	lk, err := tasklock.New(standby.d, tasklock.Config{Table: tasklock.KeyTable("so_ro_leases"), TTL: 5 * time.Second})
	require.NoError(t, err)
	_, err = lk.Acquire(ctx, "job")
	require.ErrorIs(t, err, dialect.ErrReadOnly)
	require.Zero(t, store.Retries(standby.d), "a read-only refusal was retried")
	t.Logf("scaleout: postgres standby read-only claim-error=%q acquire-error=%q claim-took=%v retries=0", errMsg(c, err), err, took.Round(time.Millisecond))
}

// errMsg repeats a claim on the standby to show its message.
func errMsg(c *claim.Claimer[struct{}], _ error) string {
	_, err := c.Claim(context.Background())
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestPGFailover drains a task through a pool that lists the primary and
// the standby with target_session_attrs=read-write, stalls replication for
// a second, SIGKILLs the primary mid-run and promotes the standby. Workers reconnect to the new primary
// and drain everything (the reaper returns rows whose claim reply was lost).
// With asynchronous replication, claims (and acks) committed on the old
// primary but not yet shipped are gone on the new one: a row can then be
// claimed a second time while its first claimant still works on it. Those
// overlaps are measured and reported. With synchronous replication
// (synchronous_commit=on and the standby in synchronous_standby_names) a
// commit returns only once the standby has it, and there must be none.
func TestPGFailover(t *testing.T) {
	for _, mode := range []string{"async", "sync"} {
		t.Run(mode, func(t *testing.T) {
			syncMode := map[string]string{"async": "off", "sync": "on"}[mode]
			sh, primaryDSN, standbyDSN := pgPair(t, syncMode)
			table := "so_failover"
			createItems(t, openPG(t, "setup", primaryDSN, 2), table, size(8000, 20000))
			standby := openPG(t, "standby", standbyDSN, 2)
			const lagFor = time.Second
			p := openPG(t, "failover", failoverDSN(t, primaryDSN, standbyDSN), 20)
			var killed time.Time
			var mu sync.Mutex
			res := drain{
				name: "postgres failover " + mode, table: table, pools: []*pool{p}, workers: 16, rows: size(8000, 20000), batch: 100,
				hold: time.Second, monitor: p, reapTimeout: 10 * time.Second, limit: 3 * time.Minute, faultAt: 0.4,
				fault: func(ctx context.Context) (string, error) {
					// The crash comes while the standby lags: its WAL
					// receiver is stopped for lagFor first, as a network
					// stall between the servers would do. Asynchronous
					// commits go on meanwhile; synchronous ones wait.
					var walPID int
					if err := standby.db.QueryRowContext(ctx, "SELECT pid FROM pg_stat_wal_receiver").Scan(&walPID); err != nil {
						return "", fmt.Errorf("find the standby's WAL receiver: %w", err)
					}
					if err := syscall.Kill(walPID, syscall.SIGSTOP); err != nil {
						return "", err
					}
					time.Sleep(lagFor)
					_, err := run(t, time.Minute, sh, "kill-primary")
					// The WAL still in flight (in the receiver's socket)
					// never arrives: the receiver is told to exit before
					// it runs again.
					if kerr := syscall.Kill(walPID, syscall.SIGTERM); err == nil {
						err = kerr
					}
					if cerr := syscall.Kill(walPID, syscall.SIGCONT); err == nil {
						err = cerr
					}
					if err != nil {
						return "", err
					}
					mu.Lock()
					killed = time.Now()
					mu.Unlock()
					out, err := run(t, 2*time.Minute, sh, "promote")
					if err != nil {
						return "", err
					}
					if exports(out)["CLAIMLOCK_PG_PRIMARY_DSN"] == "" {
						return "", errors.New("promote printed no new primary DSN")
					}
					return fmt.Sprintf("standby's WAL receiver stopped %v, then SIGKILL primary at 40%% acked, standby promoted %.1fs after the kill", lagFor, time.Since(killed).Seconds()), nil
				},
			}.run(t)
			mu.Lock()
			back := res.firstAckAfter(killed)
			mu.Unlock()
			t.Log(res.summary("postgres failover "+mode, fmt.Sprintf("replication=%s workers=16 first-ack-after-kill=%.1fs", mode, back.Seconds())))
			res.logErrors(t)
			require.Equal(t, res.rows, res.done, "lost rows")
			require.Equal(t, int64(otherRows), res.other, "another task's rows changed")
			require.Positive(t, back, "no batch was acked after the failover")
			if mode == "sync" {
				require.Zero(t, res.overlaps, "rows held by two claims at once with synchronous replication")
			}
		})
	}
}

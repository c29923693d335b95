package claim_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/netfault"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// faultyPair opens a fresh database of en twice: for a worker whose
// database a test takes away (through a netfault proxy, or on SQLite a
// connfault driver), and directly, for a reaper and another worker that
// still reach it. down and up take the worker's database away and back.
func faultyPair(t *testing.T, en engine) (worker, direct *env, down, up func()) {
	t.Helper()
	if en.kind == testengine.SQLite {
		w, sw := openFaulty(t)
		d, closeFn, err := openDSN(context.Background(), en.kind, w.dsn, dialect.Options{})
		require.NoError(t, err)
		t.Cleanup(closeFn)
		return w, d, sw.Down, sw.Up
	}
	dsn := en.dsn(t)
	var p *netfault.Proxy
	via, ok, err := testengine.Reroute(en.kind, dsn, func(server string) string {
		p = netfault.New(t, server)
		return p.Addr()
	})
	require.NoError(t, err)
	require.True(t, ok, "%s: no network to fault", en.kind)
	w, closeW, err := openDSN(context.Background(), en.kind, via, dialect.Options{})
	require.NoError(t, err)
	t.Cleanup(closeW)
	d, closeD, err := openDSN(context.Background(), en.kind, dsn, dialect.Options{})
	require.NoError(t, err)
	t.Cleanup(closeD)
	return w, d, p.Down, p.Up
}

// cutOffClaimers sets up the deadline-outage tests of Run: a worker's
// claimer c on a connection that down cuts off and up restores, and a
// claimer other of the same table on a direct connection, with 5 rows,
// batches of 5, reap timeout 6 s, safety margin 3 s and heartbeats every
// second; the worker's log goes to logs.
func cutOffClaimers(t *testing.T, en engine) (e, direct *env, down, up func(), c, other *claim.Claimer[job], cfg claim.Config, logs *recordingHandler) {
	t.Helper()
	e, direct, down, up = faultyPair(t, en)
	s := e.d.Capabilities().PreferredStrategy
	if en.kind == testengine.SQLite {
		s = dialect.StrategyTokenUpdate
	}
	logs = &recordingHandler{}
	_, cfg = jobSetup(t, e, s, 5, func(cfg *claim.Config) {
		cfg.BatchSize = 5
		cfg.ReapTimeout = 6 * time.Second
		cfg.SafetyMargin = 3 * time.Second
		cfg.HeartbeatInterval = time.Second
	})
	cfg.Logger = slog.New(logs)
	c, err := claim.New(e.d, cfg, jobFields)
	require.NoError(t, err)
	other, err = claim.New(direct.d, cfg, jobFields)
	require.NoError(t, err)
	return e, direct, down, up, c, other, cfg, logs
}

// TestRunAckOutlastsLocalDeadline: the database goes away as soon as Run
// hands out the first row of a batch and stays away longer than the
// batch's local deadline (3 s after its last heartbeat) but less than the
// reap timeout (6 s). Run's ack of the rows the handler finished keeps
// trying past the local deadline, conditioned on the token:
//
//   - "lands": nobody took the rows; once the database is back the ack
//     completes them, and no row is left to a reaper to be run again.
//   - "reclaimed": while the worker was cut off, a reaper returned the rows
//     and another worker claimed them. The late ack changes nothing of the
//     new owner's and reports the rows lost (or a heartbeat does first).
//   - "beyond": as "lands", the database back after 10.5 s, past the local
//     deadline plus the reap timeout (at most 9 s after the cut): Run's ack
//     is bounded by its context alone (a reaper that could not reach the
//     database either leaves the rows to their holder for one timeout after
//     it reconnects), so it still lands.
func TestRunAckOutlastsLocalDeadline(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		for _, scenario := range []string{"lands", "reclaimed", "beyond"} {
			t.Run(en.kind+"/"+scenario, func(t *testing.T) {
				t.Parallel()
				_, _, down, up, c, other, cfg, logs := cutOffClaimers(t, en)

				var mu sync.Mutex
				calls := map[any]int{}
				var batch *claim.Batch[job]
				cut := make(chan struct{})
				var once sync.Once
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				done := make(chan error, 1)
				go func() {
					done <- c.Run(ctx, claim.WorkerConfig[job]{PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
						Handler: func(ctx context.Context, r claim.Row[job]) error {
							mu.Lock()
							calls[r.ID]++
							mu.Unlock()
							once.Do(func() {
								batch, _ = claim.BatchOf[job](ctx)
								down()
								close(cut)
							})
							return nil
						}})
				}()
				<-cut
				cutAt := time.Now()
				waitFor(t, "the batch's local deadline to pass", func() bool {
					return batch.Err() != nil
				})
				require.ErrorIs(t, batch.Err(), dialect.ErrLocalDeadline)

				var thief *claim.Batch[job]
				if scenario == "reclaimed" {
					steal(t, other, cfg)
					var err error
					thief, err = other.Claim(ctx)
					require.NoError(t, err)
					require.Equal(t, 5, thief.Len())
				}
				time.Sleep(time.Until(cutAt.Add(outageFor(scenario))))
				up()

				if scenario != "reclaimed" {
					awaitStats(t, "every row acked", other.Stats, func(st claim.Stats) bool { return st.Done == 5 },
						func() string { return fmt.Sprintf("logged: %v", logs.atLeast(slog.LevelWarn)) })
					require.Empty(t, logs.matching("ack failed; rows stay processing"))
					require.Empty(t, logs.matching("claim lost: rows were reaped"))
				} else {
					waitFor(t, "the late ack (or a heartbeat) to find the rows lost", func() bool {
						return len(batch.Lost()) == 5
					})
					requireStats(t, other, 0, 5, 0, 0) // the new owner's rows, untouched
					require.NoError(t, thief.AckAll(ctx), "the new owner holds every row")
					requireStats(t, other, 0, 0, 5, 0)
				}
				cancel()
				require.NoError(t, <-done)
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, calls, 5)
				for id, n := range calls {
					require.Equal(t, 1, n, "row %v handled %d times by the worker", id, n)
				}
			})
		}
	}
}

// TestRunReleaseOutlastsLocalDeadline: the database goes away while Run's
// handler works on the first row of a batch and stays away past the
// batch's local deadline (3 s after its last heartbeat), less than the reap
// timeout (6 s). The deadline cuts the handler off, so no row of the batch
// was processed; Run's release of the five keeps trying past the deadline,
// conditioned on the token:
//
//   - "lands": nobody took the rows; once the database is back they are
//     released with their attempts handed back, and Run runs them again
//     with one attempt each: an outage is not the rows' failure, and no row
//     waits for a reaper.
//   - "reclaimed": a reaper returned the rows and another worker claimed
//     them while the worker was cut off. The late release changes nothing
//     of the new owner's.
//   - "beyond": as "lands", the database back after 10.5 s, past the local
//     deadline plus the reap timeout: the release still lands.
func TestRunReleaseOutlastsLocalDeadline(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		for _, scenario := range []string{"lands", "reclaimed", "beyond"} {
			t.Run(en.kind+"/"+scenario, func(t *testing.T) {
				t.Parallel()
				_, direct, down, up, c, other, cfg, logs := cutOffClaimers(t, en)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cutAt, batch, done := runCutOff(ctx, c, down)

				waitFor(t, "the batch's local deadline to pass", func() bool { return batch.Err() != nil })
				require.ErrorIs(t, batch.Err(), dialect.ErrLocalDeadline)
				var thief *claim.Batch[job]
				if scenario == "reclaimed" {
					steal(t, other, cfg)
					var err error
					thief, err = other.Claim(ctx)
					require.NoError(t, err)
					require.Equal(t, 5, thief.Len())
				}
				time.Sleep(time.Until(cutAt.Add(outageFor(scenario))))
				up()

				waitFor(t, "Run's release to land or give up", func() bool {
					return len(batch.Unacked()) == 0 || len(logs.matching("release failed; rows stay processing")) > 0
				})
				require.Empty(t, logs.matching("release failed; rows stay processing"))
				if scenario != "reclaimed" {
					awaitStats(t, "every row run again and acked", other.Stats, func(st claim.Stats) bool { return st.Done == 5 },
						func() string { return fmt.Sprintf("logged: %v", logs.atLeast(slog.LevelWarn)) })
					var most int64
					require.NoError(t, direct.raw.QueryRowContext(ctx, "SELECT MAX(attempts) FROM "+cfg.Table+" WHERE task_id = 42").Scan(&most))
					require.EqualValues(t, 1, most, "the outage counted an attempt")
				} else {
					requireStats(t, other, 0, 5, 0, 0) // the new owner's rows, untouched
					require.NoError(t, thief.AckAll(ctx), "the new owner holds every row")
					requireStats(t, other, 0, 0, 5, 0)
				}
				cancel()
				require.NoError(t, <-done)
			})
		}
	}
}

// outageFor is how long the Run outlast tests keep the database away:
// 4.5 s, past the batch's local deadline (3 s after its last heartbeat) and
// before the reap timeout (6 s); in scenario "beyond" 10.5 s, past the
// local deadline plus the reap timeout.
func outageFor(scenario string) time.Duration {
	if scenario == "beyond" {
		return 10500 * time.Millisecond
	}
	return 4500 * time.Millisecond
}

// runCutOff starts c.Run, whose handler takes the database away (down)
// while it works on the first row it gets and keeps at that row until its
// context ends (the batch's local deadline); later rows succeed at once. It
// returns when the database went away, with the time and the batch, and
// the channel of Run's result.
func runCutOff(ctx context.Context, c *claim.Claimer[job], down func()) (time.Time, *claim.Batch[job], <-chan error) {
	var batch *claim.Batch[job]
	cut := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, claim.WorkerConfig[job]{PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
			Handler: func(hctx context.Context, r claim.Row[job]) error {
				first := false
				once.Do(func() {
					batch, _ = claim.BatchOf[job](hctx)
					down()
					first = true
					close(cut)
				})
				if !first {
					return nil
				}
				<-hctx.Done()
				return hctx.Err()
			}})
	}()
	<-cut
	return time.Now(), batch, done
}

package claim_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/internal/detach"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/connfault"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/netfault"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/zombie"
)

// openVia opens a fresh database of en whose every connection goes through
// a netfault proxy.
func openVia(t *testing.T, en engine) (*env, *netfault.Proxy) {
	t.Helper()
	var p *netfault.Proxy
	dsn, ok, err := testengine.Reroute(en.kind, en.dsn(t), func(server string) string {
		p = netfault.New(t, server)
		return p.Addr()
	})
	require.NoError(t, err)
	if !ok {
		t.Skipf("%s: no network between the library and the database: nothing to refuse or drop", en.kind)
	}
	e, closeFn, err := openDSN(context.Background(), en.kind, dsn, dialect.Options{})
	require.NoError(t, err)
	t.Cleanup(closeFn)
	return e, p
}

// TestRunAckOutlastsOutage: the server goes away while a batch is handled
// and comes back 1.5 s later. Run tries the batch's ack again, holding the
// rows with heartbeats, instead of leaving them to a reaper to be processed
// again: every row is handled once and acked. A connection dropped after
// the ack was written (an unknown outcome) is settled by the next try under
// the token, not reported as lost rows.
func TestRunAckOutlastsOutage(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		for _, fault := range []string{"down", "drop-after-write"} {
			t.Run(en.kind+"/"+fault, func(t *testing.T) {
				t.Parallel()
				e, p := openVia(t, en)
				logs := drainThroughOutage(t, e, e.d.Capabilities().PreferredStrategy, func(table string) {
					if fault == "down" {
						p.Down()
						time.AfterFunc(1500*time.Millisecond, p.Up)
					} else {
						p.DropAfterWrite(table)
					}
				})
				require.Empty(t, logs.matching("claim lost"), "an ack of unknown outcome is not a loss")
			})
		}
	}
}

// TestKeepAliveOnSlowServer: every reply takes 40 ms, twice the heartbeat
// interval. Heartbeats still land (a heartbeat may take until the batch's
// local deadline, not just until the next tick), so a reaper with a
// one-second timeout finds nothing stale for three seconds; once the rows
// are taken, the next heartbeat finds them lost and the keep-alive ends.
// Cut off at the next tick, every heartbeat failed, the reaper took the
// rows of a live batch, and the keep-alive never saw the loss.
func TestKeepAliveOnSlowServer(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e, p := openVia(t, en)
			c, cfg := jobSetup(t, e, e.d.Capabilities().PreferredStrategy, 3, func(cfg *claim.Config) {
				cfg.BatchSize = 3
				cfg.ReapTimeout = 20 * time.Second
				cfg.HeartbeatInterval = 20 * time.Millisecond
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 3, b.Len())
			p.Delay(40 * time.Millisecond)
			stop := b.KeepAlive(ctx)
			defer stop()
			reap := &store.ReapParams{Timeout: time.Second, Limit: 100, ScopeValues: cfg.ScopeValues}
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
				res, err := claim.StoreOf(c).Reap(ctx, reap)
				require.NoError(t, err)
				require.Zero(t, res.Returned, "heartbeats on a slow server keep the rows")
				time.Sleep(200 * time.Millisecond)
			}
			require.NoError(t, b.Err())
			steal(t, c, cfg)
			waitFor(t, "the keep-alive to find the rows lost", func() bool { return b.Err() != nil })
			require.ErrorIs(t, b.Err(), dialect.ErrClaimLost)
		})
	}
}

// TestFlushOutlastsOutage: deferred acks whose Flush meets a server that is
// away for a second are written once it is back, within the same Flush,
// while heartbeats hold the rows.
func TestFlushOutlastsOutage(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e, p := openVia(t, en)
			c, _ := jobSetup(t, e, e.d.Capabilities().PreferredStrategy, 5, func(cfg *claim.Config) {
				cfg.BatchSize = 5
				cfg.ReapTimeout = 20 * time.Second
				cfg.AckDelay = time.Hour
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 5, b.Len())
			stop := b.KeepAlive(ctx)
			defer stop()
			require.NoError(t, b.Ack(ctx, b.IDs()...))
			p.Down()
			time.AfterFunc(time.Second, p.Up)
			start := time.Now()
			require.NoError(t, b.Flush(ctx))
			require.Greater(t, time.Since(start), 900*time.Millisecond, "the write waited for the server")
			require.Empty(t, b.Unacked())
			requireStats(t, c, 0, 0, 5, 0)
		})
	}
}

// TestOutageKeepsAttemptsPoisonParks tells the two kinds of returned rows
// apart. A claim whose connection broke after it was written, with the
// server then away for a second, marked rows the worker never received:
// the worker releases them once the server answers, handing the claim's
// attempt back, so an outage does not move rows toward parking. A row that
// kills its worker every time (its batch abandoned, never released) is
// returned by the reaper with its attempt kept, and parks at MaxAttempts.
func TestOutageKeepsAttemptsPoisonParks(t *testing.T) {
	var lateReleases time.Duration
	for _, p := range detach.LatePauses {
		lateReleases += p
	}
	lateReleases += 500 * time.Millisecond
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e, p := openVia(t, en)
			const maxAttempts = 3
			c, cfg := jobSetup(t, e, e.d.Capabilities().PreferredStrategy, 10, func(cfg *claim.Config) {
				cfg.BatchSize = 10
				cfg.MaxAttempts = maxAttempts
				cfg.ReapTimeout = 20 * time.Second
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			attempts := func() (sum, max int64) {
				require.NoError(t, e.raw.QueryRowContext(ctx, e.rebind(
					"SELECT COALESCE(SUM(attempts), 0), COALESCE(MAX(attempts), 0) FROM "+cfg.Table+" WHERE task_id = 42")).Scan(&sum, &max))
				return sum, max
			}
			// A first claim verifies the table; its release hands the
			// attempts back. Fresh connections then forget the prepared
			// claim, so that the next one is sent with its text.
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 10, b.Len())
			_, err = b.Release(ctx)
			require.NoError(t, err)
			p.Down()
			p.Up()
			time.Sleep(1100 * time.Millisecond) // pools ping connections idle for a second

			for outages, missed := 0, 0; outages < 3; {
				p.DropAfterWriteThenDown(cfg.Table, time.Second)
				b, err := c.Claim(ctx)
				if err == nil {
					// The claim went through (seen once, in a loaded CI
					// run, with the proxy still armed). With it armed, no
					// request of the claim matched its marker and nothing
					// was dropped: give the rows back and fault the next
					// claim. Disarmed, a request was dropped and the claim
					// still succeeded, which a claim of unknown outcome
					// retried blindly would do: fail.
					armed := p.Disarm()
					require.True(t, armed, "the proxy dropped a request, and the claim succeeded (%d rows)", b.Len())
					missed++
					t.Logf("no request of the claim matched the proxy's marker (%d rows): faulting the next claim", b.Len())
					require.Less(t, missed, 3, "the proxy missed the claim three times")
					_, err = b.Release(ctx)
					require.NoError(t, err)
					continue
				}
				outages++
				require.Eventually(t, p.IsUp, 10*time.Second, 10*time.Millisecond)
				require.Eventually(t, func() bool {
					st, err := c.Stats(ctx)
					return err == nil && st.Pending == 10
				}, 20*time.Second, 20*time.Millisecond, "the claimed rows were released")
				sum, _ := attempts()
				require.Zero(t, sum, "an outage counted attempts")
				// A claim of unknown outcome whose first release found
				// nothing is released again, late, over the next seconds
				// (the server may still run it). Those releases name the
				// table too: wait for them, so that the next marker
				// matches the next claim's statement, not a late release
				// of this one (a loaded CI run: the proxy cut a late
				// release and the claim beside it succeeded).
				time.Sleep(lateReleases)
			}

			// The poison row: every claim of it ends with its worker gone.
			reaper, err := zombie.New(e.d, cfg, zombie.Config{Timeout: time.Millisecond})
			require.NoError(t, err)
			for round := 1; ; round++ {
				b, err := c.Claim(ctx)
				require.NoError(t, err)
				require.Equal(t, 10, b.Len())
				time.Sleep(20 * time.Millisecond) // the worker died
				_, err = reaper.Sweep(ctx)
				require.NoError(t, err)
				st, err := c.Stats(ctx)
				require.NoError(t, err)
				if st.Failed == 10 {
					require.Equal(t, maxAttempts, round, "parked at MaxAttempts")
					_, max := attempts()
					require.EqualValues(t, maxAttempts, max)
					break
				}
				require.Less(t, round, maxAttempts, "not parked at MaxAttempts: %+v", st)
			}
		})
	}
}

var faultSeq atomic.Int64

// openFaulty opens a fresh SQLite database through a connfault driver: the
// engine has no network, so the test takes the database away at the
// database/sql driver instead.
func openFaulty(t *testing.T) (*env, *connfault.Switch) {
	t.Helper()
	path := dbtest.SQLitePath(t)
	probe, err := sqlite.Open(path)
	require.NoError(t, err)
	inner := probe.Driver()
	probe.Close()
	sw := &connfault.Switch{}
	name := fmt.Sprintf("sqlite-fault-%d", faultSeq.Add(1))
	connfault.Register(name, inner, sw)
	db, err := sql.Open(name, "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	require.NoError(t, err)
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { db.Close() })
	d, err := sqlite.New(context.Background(), db, dialect.Options{})
	require.NoError(t, err)
	return &env{kind: testengine.SQLite, dsn: path, d: d, raw: db}, sw
}

// TestOutagesSQLite is TestRunAckOutlastsOutage and
// TestOutageKeepsAttemptsPoisonParks on SQLite, with the database taken away
// at the driver: Run's ack waits out 1.5 s without a database and every row
// is handled once; a claim whose reply is lost, with the database then away
// for a second, is released with its attempts handed back.
func TestOutagesSQLite(t *testing.T) {
	t.Parallel()
	t.Run("run-ack", func(t *testing.T) {
		t.Parallel()
		e, sw := openFaulty(t)
		drainThroughOutage(t, e, dialect.StrategyTokenUpdate, func(string) {
			sw.Down()
			time.AfterFunc(1500*time.Millisecond, sw.Up)
		})
	})
	t.Run("claim-reply-lost", func(t *testing.T) {
		t.Parallel()
		e, sw := openFaulty(t)
		c, cfg := jobSetup(t, e, dialect.StrategyTokenUpdate, 10, func(cfg *claim.Config) {
			cfg.BatchSize = 10
			cfg.MaxAttempts = 3
			cfg.ReapTimeout = 20 * time.Second
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, c.Verify(ctx))
		// A first claim makes the claimer's one-time index check, so that
		// the lost reply below is the claim statement's, not the check's.
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		require.Equal(t, 10, b.Len())
		n, err := b.Release(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 10, n)
		for range 3 {
			sw.LoseNextReply()
			time.AfterFunc(time.Second, sw.Up)
			_, err := c.Claim(ctx)
			require.Error(t, err)
			require.Eventually(t, func() bool {
				st, err := c.Stats(ctx)
				return err == nil && st.Pending == 10
			}, 20*time.Second, 20*time.Millisecond, "the claimed rows were released")
			var sum int64
			require.NoError(t, e.raw.QueryRowContext(ctx, "SELECT COALESCE(SUM(attempts), 0) FROM "+cfg.Table+" WHERE task_id = 42").Scan(&sum))
			require.Zero(t, sum, "an outage counted attempts")
		}
	})
}

// drainThroughOutage runs Run over 20 rows of a fresh table on e, with
// heartbeats every 5 s and a 20 s claim timeout; the first handler call
// starts fault (given the table's name). Every row must be handled once and
// acked, and no ack left to the reaper. It returns what was logged.
func drainThroughOutage(t *testing.T, e *env, s dialect.Strategy, fault func(table string)) *recordingHandler {
	t.Helper()
	logs := &recordingHandler{}
	_, cfg := jobSetup(t, e, s, 20, func(cfg *claim.Config) {
		cfg.BatchSize = 20
		cfg.ReapTimeout = 20 * time.Second
		cfg.HeartbeatInterval = 5 * time.Second
	})
	cfg.Logger = slog.New(logs)
	c, err := claim.New(e.d, cfg, jobFields)
	require.NoError(t, err)
	var mu sync.Mutex
	calls := map[int64]int{}
	var once sync.Once
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, claim.WorkerConfig[job]{PollMin: time.Millisecond, PollMax: 20 * time.Millisecond,
			Handler: func(ctx context.Context, r claim.Row[job]) error {
				mu.Lock()
				calls[r.ID.(int64)]++
				mu.Unlock()
				once.Do(func() { fault(cfg.Table) })
				return nil
			}})
	}()
	awaitStats(t, "every row acked", c.Stats, func(st claim.Stats) bool { return st.Done == 20 },
		func() string { return fmt.Sprintf("logged: %v", logs.atLeast(slog.LevelWarn)) })
	cancel()
	require.NoError(t, <-done)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, 20)
	for id, n := range calls {
		require.Equal(t, 1, n, "row %d handled %d times", id, n)
	}
	require.Empty(t, logs.matching("ack failed; rows stay processing"))
	return logs
}

// replyLostDialect wraps a dialect so that, once armed, the next ack of its
// claim stores runs and commits and then reports an unknown outcome, as a
// connection that broke before the reply came back would.
type replyLostDialect struct {
	dialect.Dialect
	armed atomic.Bool
}

func (r *replyLostDialect) WrapClaims(st store.ClaimStore) store.ClaimStore {
	return &replyLostStore{ClaimStore: st, r: r}
}

// Inner implements the store's test wrapping.
func (r *replyLostDialect) Inner() dialect.Dialect { return r.Dialect }

type replyLostStore struct {
	store.ClaimStore
	r *replyLostDialect
}

func (s *replyLostStore) Ack(ctx context.Context, p *store.AckParams) (store.AckResult, error) {
	res, err := s.ClaimStore.Ack(ctx, p)
	if err == nil && s.r.armed.CompareAndSwap(true, false) {
		return store.AckResult{}, fmt.Errorf("%w: injected: the ack's reply was lost", dialect.ErrOutcomeUnknown)
	}
	return res, err
}

// TestUnknownWriteThenLossReported: an ack of unknown outcome (it did
// commit) lets a later ack treat rows found without the token as its own
// work only while the batch holds its rows. Once the batch is lost (its
// local deadline passed, or a heartbeat found its rows taken) and another
// worker holds the rows, a later ack of them must report them lost: taking
// them for the earlier write's would hide that they are processed twice.
func TestUnknownWriteThenLossReported(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		for _, loss := range []string{"deadline", "heartbeat"} {
			t.Run(en.kind+"/"+loss, func(t *testing.T) {
				t.Parallel()
				e := open(t, en)
				wrapped := &replyLostDialect{Dialect: e.d}
				we := *e
				we.d = wrapped
				const timeout, margin = time.Second, 200 * time.Millisecond
				c, cfg := jobSetup(t, &we, e.d.Capabilities().PreferredStrategy, 3, func(cfg *claim.Config) {
					cfg.BatchSize = 3
					cfg.ReapTimeout, cfg.SafetyMargin = timeout, margin
					if loss == "heartbeat" {
						cfg.ReapTimeout, cfg.SafetyMargin = time.Minute, 0
					}
				})
				other, err := claim.New(e.d, cfg, jobFields)
				require.NoError(t, err)
				ctx := ctxT(t)
				b, err := c.Claim(ctx)
				require.NoError(t, err)
				require.Equal(t, 3, b.Len())
				ids := b.IDs()

				wrapped.armed.Store(true)
				require.ErrorIs(t, b.Ack(ctx, ids[0]), dialect.ErrOutcomeUnknown)
				requireStats(t, c, 0, 2, 1, 0) // it did commit

				switch loss {
				case "deadline":
					deadline, ok := b.Deadline()
					require.True(t, ok)
					time.Sleep(time.Until(deadline))
					reap := &store.ReapParams{Timeout: timeout, Limit: 100, ScopeValues: cfg.ScopeValues}
					waitFor(t, "the rows to be reaped after the claim timeout", func() bool {
						res, err := claim.StoreOf(c).Reap(ctx, reap)
						require.NoError(t, err)
						return res.Returned > 0
					})
					require.ErrorIs(t, b.Err(), dialect.ErrLocalDeadline)
				case "heartbeat":
					steal(t, c, cfg)
					_, err := b.Heartbeat(ctx)
					require.ErrorIs(t, err, dialect.ErrClaimLost)
				}
				second, err := other.Claim(ctx)
				require.NoError(t, err)
				require.ElementsMatch(t, ids[1:], second.IDs(), "another worker holds the rows")

				err = b.Ack(ctx, ids[1], ids[2])
				var lost *claim.LostError
				require.ErrorAs(t, err, &lost, "the late ack of rows another worker holds must report them lost (batch: %v)", b.Err())
				require.ElementsMatch(t, ids[1:], lost.IDs)
				require.NoError(t, second.AckAll(ctx))
				requireStats(t, c, 0, 0, 3, 0)
			})
		}
	}
}

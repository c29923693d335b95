package postgres_test

// Tests through a PgBouncer in transaction pooling mode, the pooler most
// PostgreSQL deployments sit behind. .ci/run starts one of its own
// (scripts/pgbouncer.sh) in front of the CI's PostgreSQL and database, and
// sets CLAIMLOCK_PGBOUNCER_DSN to it and CLAIMLOCK_REQUIRE_PGBOUNCER=1.
//
// The pool through PgBouncer uses pgx's default_query_exec_mode=
// simple_protocol: pgx's default mode prepares each statement under a name
// on the server connection, and transaction pooling hands a client a
// different server connection for each transaction, where that name is
// unknown or already taken (TestPgBouncerDefaultExecMode).
//
// Each test makes a schema of its own (through a direct connection, as
// dbtest does) and names its tables schema-qualified: transaction pooling
// does not keep the search_path startup parameter the other tests isolate
// themselves with. The conformance suite, whose tables are not qualified,
// runs on a database per test instead (TestPgBouncerConformance).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

const (
	envPgBouncer        = "CLAIMLOCK_PGBOUNCER_DSN"
	envRequirePgBouncer = "CLAIMLOCK_REQUIRE_PGBOUNCER"
)

// bouncer is one test's view of the PgBouncer: a direct pool on a fresh
// schema, and the schema's name for qualified tables.
type bouncer struct {
	dsn    string        // PgBouncer's DSN, without an exec mode
	direct *pgxpool.Pool // straight to the server, search_path = schema
	schema string
}

// pgBouncer returns the PgBouncer of CLAIMLOCK_PGBOUNCER_DSN, or skips
// (fails under CLAIMLOCK_REQUIRE_PGBOUNCER=1) without one.
func pgBouncer(t *testing.T) *bouncer {
	t.Helper()
	dsn := pgBouncerDSN(t)
	direct := dbtest.PostgresPool(t)
	b := &bouncer{dsn: dsn, direct: direct}
	ctx := context.Background()
	var directDB string
	require.NoError(t, direct.QueryRow(ctx, "SELECT current_schema(), current_database()").Scan(&b.schema, &directDB))
	c, err := pgx.Connect(ctx, b.simpleDSN(t))
	require.NoError(t, err, "connect through PgBouncer")
	defer c.Close(ctx)
	var viaDB string
	require.NoError(t, c.QueryRow(ctx, "SELECT current_database()").Scan(&viaDB))
	require.Equal(t, directDB, viaDB, "%s must lead to CLAIMLOCK_POSTGRES_DSN's database", envPgBouncer)
	return b
}

// pgBouncerDSN returns CLAIMLOCK_PGBOUNCER_DSN, or skips (fails under
// CLAIMLOCK_REQUIRE_PGBOUNCER=1) without it.
func pgBouncerDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(envPgBouncer)
	if dsn == "" {
		msg := fmt.Sprintf("no PgBouncer: set %s to the DSN of a PgBouncer in transaction pooling mode in front of CLAIMLOCK_POSTGRES_DSN's database (scripts/pgbouncer.sh starts one)", envPgBouncer)
		if os.Getenv(envRequirePgBouncer) == "1" {
			t.Fatalf("%s; %s=1 makes this a failure", msg, envRequirePgBouncer)
		}
		t.Skipf("SKIPPING: %s", msg)
	}
	return dsn
}

// simpleDSN is PgBouncer's DSN with default_query_exec_mode=simple_protocol.
func (b *bouncer) simpleDSN(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(b.dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Set("default_query_exec_mode", "simple_protocol")
	u.RawQuery = q.Encode()
	return u.String()
}

// pool opens a pool through PgBouncer in simple protocol mode.
func (b *bouncer) pool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(b.simpleDSN(t))
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

type bjob struct{ Payload string }

func bjobFields(j *bjob) []any { return []any{&j.Payload} }

// table creates the schema-qualified claim table name (task 1: n rows,
// task 2: 3 rows) through the direct connection and returns its config.
func (b *bouncer) table(t *testing.T, name string, n int, mod func(*claim.Config)) claim.Config {
	t.Helper()
	cfg := claim.Config{
		ClaimTable: dialect.ClaimTable{
			Table: b.schema + "." + name, Scope: []string{"task_id"},
			Attempts: "attempts", Version: "version", Columns: []string{"payload"},
		},
		ScopeValues: []any{1}, BatchSize: 10, MaxAttempts: 3,
	}
	if mod != nil {
		mod(&cfg)
	}
	spec, err := cfg.Resolve()
	require.NoError(t, err)
	d, err := postgres.New(context.Background(), b.direct, dialect.Options{})
	require.NoError(t, err)
	dialecttest.CreateClaimTable(t, d, spec)
	_, err = b.direct.Exec(context.Background(), fmt.Sprintf(
		`INSERT INTO %s (task_id, payload) SELECT CASE WHEN g <= $1 THEN 1 ELSE 2 END, 'p' || g FROM generate_series(1, $1 + 3) g`, cfg.Table), n)
	require.NoError(t, err)
	return cfg
}

// count runs a COUNT(*) query through the direct connection.
func (b *bouncer) count(t *testing.T, q string) int64 {
	t.Helper()
	var k int64
	require.NoError(t, b.direct.QueryRow(context.Background(), q).Scan(&k), q)
	return k
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPgBouncerRunDrain drains a task with Run's workers through PgBouncer
// in transaction mode, for each strategy, with done rows updated and
// deleted: every row is handled exactly once (a seventh of them fail once
// and are handled again), no row is ever in two handlers at once, and at
// the end every row of the task is done (or gone) and the other task's
// rows are untouched.
func TestPgBouncerRunDrain(t *testing.T) {
	b := pgBouncer(t)
	for i, s := range []dialect.Strategy{dialect.StrategyTokenUpdate, dialect.StrategySkipLocked} {
		for _, del := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/DeleteDone=%v", s, del), func(t *testing.T) {
				const n, workers = 600, 8
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cfg := b.table(t, fmt.Sprintf("drain_%d_%v", i, del), n, func(cfg *claim.Config) {
					cfg.Strategy, cfg.DeleteDone = s, del
				})
				d, err := postgres.New(ctx, b.pool(t, workers+4), dialect.Options{})
				require.NoError(t, err)
				c, err := claim.New(d, cfg, bjobFields)
				require.NoError(t, err)
				require.Equal(t, s, c.Strategy())
				var mu sync.Mutex
				calls := map[int64]int{}
				var inflight sync.Map
				var overlaps atomic.Int64
				errc := make(chan error, 1)
				go func() {
					errc <- c.Run(ctx, claim.WorkerConfig[bjob]{
						Workers: workers, PollMin: time.Millisecond, PollMax: 20 * time.Millisecond,
						Handler: func(ctx context.Context, r claim.Row[bjob]) error {
							id := r.ID.(int64)
							if _, dup := inflight.LoadOrStore(id, true); dup {
								overlaps.Add(1)
							}
							defer inflight.Delete(id)
							mu.Lock()
							calls[id]++
							first := calls[id] == 1
							mu.Unlock()
							if first && id%7 == 0 {
								return errors.New("transient")
							}
							return nil
						},
					})
				}()
				var left string
				if del {
					left = fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE task_id = 1", cfg.Table)
				} else {
					left = fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE task_id = 1 AND (status <> 'DONE' OR token IS NOT NULL)", cfg.Table)
				}
				waitUntil(t, "every row of the task done", func() bool { return b.count(t, left) == 0 })
				cancel()
				require.NoError(t, <-errc)
				require.Zero(t, overlaps.Load(), "rows in two handlers at once")
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, calls, n)
				for id, k := range calls {
					want := 1
					if id%7 == 0 {
						want = 2
					}
					require.Equal(t, want, k, "handler calls of row %d", id)
				}
				done := b.count(t, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE task_id = 1", cfg.Table))
				if del {
					require.Zero(t, done, "done rows deleted")
				} else {
					require.EqualValues(t, n, done)
				}
				require.EqualValues(t, 3, b.count(t, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE task_id = 2 AND status = 'PENDING' AND token IS NULL", cfg.Table)),
					"the other task's rows are untouched")
			})
		}
	}
}

// TestPgBouncerHeld runs held-transaction claims (Holder.Hold) through
// PgBouncer in transaction mode: one held batch is one transaction, which
// PgBouncer keeps on one server connection, and the hold limit is set for
// that transaction only. Four holders drain the task, each writing a log
// row per row in the batch's transaction and committing it with the acks
// (every fourth batch is rolled back and held again): no row is held twice
// at once, every row ends done (or deleted) with exactly one log row.
func TestPgBouncerHeld(t *testing.T) {
	b := pgBouncer(t)
	for _, del := range []bool{false, true} {
		t.Run(fmt.Sprintf("DeleteDone=%v", del), func(t *testing.T) {
			const n, holders = 400, 4
			ctx := context.Background()
			cfg := b.table(t, fmt.Sprintf("held_%v", del), n, func(cfg *claim.Config) {
				cfg.Strategy, cfg.DeleteDone, cfg.BatchSize = dialect.StrategySkipLocked, del, 7
			})
			logTable := cfg.Table + "_log"
			_, err := b.direct.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id BIGINT NOT NULL PRIMARY KEY)", logTable))
			require.NoError(t, err)
			d, err := postgres.New(ctx, b.pool(t, holders+4), dialect.Options{})
			require.NoError(t, err)
			c, err := claim.New(d, cfg, bjobFields)
			require.NoError(t, err)
			h, err := c.Holder(claim.HoldConfig{MaxInFlight: holders, Limit: 10 * time.Second})
			require.NoError(t, err)
			var inflight sync.Map
			var overlaps, rollbacks atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, holders)
			insert := fmt.Sprintf("INSERT INTO %s (id) VALUES ($1)", logTable)
			for w := range holders {
				wg.Go(func() {
					for round := 0; ; round++ {
						hb, err := h.Hold(ctx)
						if err != nil {
							errs <- err
							return
						}
						if hb.Len() == 0 {
							return
						}
						for _, r := range hb.Rows() {
							if _, dup := inflight.LoadOrStore(r.ID, true); dup {
								overlaps.Add(1)
							}
						}
						err = func() error {
							for _, r := range hb.Rows() {
								if _, err := hb.Exec(hb.Context(), insert, r.ID); err != nil {
									return err
								}
							}
							return hb.AckAll(ctx)
						}()
						for _, r := range hb.Rows() {
							inflight.Delete(r.ID)
						}
						if err != nil {
							_ = hb.Rollback(ctx)
							errs <- err
							return
						}
						if (w+round)%4 == 3 {
							rollbacks.Add(1)
							if err := hb.Rollback(ctx); err != nil {
								errs <- err
								return
							}
							continue
						}
						if err := hb.Commit(ctx); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Zero(t, overlaps.Load(), "rows held by two batches at once")
			require.NotZero(t, rollbacks.Load())
			left := b.count(t, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE task_id = 1", cfg.Table))
			if del {
				require.Zero(t, left, "done rows deleted")
			} else {
				require.EqualValues(t, n, b.count(t, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE task_id = 1 AND status = 'DONE' AND token IS NULL", cfg.Table)))
			}
			require.EqualValues(t, n, b.count(t, "SELECT COUNT(DISTINCT id) FROM "+logTable), "one log row per row")
			require.EqualValues(t, n, b.count(t, "SELECT COUNT(*) FROM "+logTable), "rolled-back batches left no log row")
		})
	}
}

// TestPgBouncerReapAndLease: a reaper's sweep and leases through
// PgBouncer in transaction mode. A batch claimed and left alone past the
// reaper's timeout is returned to pending by the sweep, its late ack is
// refused as lost, and the next claim gets its rows; a lease on a key table
// refuses a second holder until it is released, then admits one, renewals
// and all, with the fence moving forward.
func TestPgBouncerReapAndLease(t *testing.T) {
	b := pgBouncer(t)
	ctx := context.Background()
	cfg := b.table(t, "reap", 5, nil)
	d, err := postgres.New(ctx, b.pool(t, 8), dialect.Options{})
	require.NoError(t, err)
	c, err := claim.New(d, cfg, bjobFields)
	require.NoError(t, err)
	batch, err := c.Claim(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, batch.Len())
	r, err := zombie.New(d, cfg, zombie.Config{Timeout: 500 * time.Millisecond})
	require.NoError(t, err)
	var res zombie.Result
	waitUntil(t, "the sweep to return the abandoned batch", func() bool {
		res, err = r.Sweep(ctx)
		require.NoError(t, err)
		return res.Returned > 0
	})
	require.EqualValues(t, 5, res.Returned)
	require.ErrorIs(t, batch.AckAll(ctx), dialect.ErrClaimLost)
	again, err := c.Claim(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, again.Len())
	require.NoError(t, again.AckAll(ctx))

	keys := b.schema + ".leases"
	require.NoError(t, tasklock.CreateTable(ctx, d, keys))
	lockers := make([]*tasklock.Locker, 2)
	for i := range lockers {
		lockers[i], err = tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable(keys), TTL: 5 * time.Second})
		require.NoError(t, err)
	}
	first, err := lockers[0].Acquire(ctx, "nightly")
	require.NoError(t, err)
	require.NoError(t, first.Renew(ctx))
	_, err = lockers[1].Acquire(ctx, "nightly")
	require.ErrorIs(t, err, dialect.ErrLeaseHeld)
	released, err := first.Release(ctx)
	require.NoError(t, err)
	require.True(t, released)
	second, err := lockers[1].Acquire(ctx, "nightly")
	require.NoError(t, err)
	require.Greater(t, second.Fence(), first.Fence())
	require.NoError(t, second.Renew(ctx))
	released, err = second.Release(ctx)
	require.NoError(t, err)
	require.True(t, released)
}

// TestPgBouncerListen: LISTEN holds a session, which transaction pooling
// does not keep. A dialect whose listener goes through PgBouncer says so
// (a warning naming the pooler) and never reports Listening, and Run's
// workers find the rows by polling. With ListenConfig.ConnConfig straight
// to the server, the listener of the same dialect hears the notifications
// that the application sends through PgBouncer: a claimer whose polling
// would not come back for an hour is woken and drains the new rows.
func TestPgBouncerListen(t *testing.T) {
	b := pgBouncer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := b.table(t, "listen", 50, nil)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pool := b.pool(t, 8)

	t.Run("through the pooler", func(t *testing.T) {
		d, err := postgres.New(ctx, pool, dialect.Options{Logger: logger})
		require.NoError(t, err)
		lctx, lcancel := context.WithCancel(ctx)
		lerr := make(chan error, 1)
		go func() {
			lerr <- d.Listen(lctx, postgres.ListenConfig{ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second})
		}()
		c, err := claim.New(d, cfg, bjobFields)
		require.NoError(t, err)
		var handled atomic.Int64
		rctx, rcancel := context.WithCancel(ctx)
		rerr := make(chan error, 1)
		go func() {
			rerr <- c.Run(rctx, claim.WorkerConfig[bjob]{
				Workers: 2, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
				Handler: func(context.Context, claim.Row[bjob]) error { handled.Add(1); return nil },
			})
		}()
		waitUntil(t, "the listener's warning", func() bool { return bytes.Contains(logs.Bytes(), []byte("pooler in transaction mode")) })
		require.False(t, d.Listening(), "a listener through transaction pooling hears nothing")
		waitUntil(t, "every row handled by polling", func() bool { return handled.Load() == 50 })
		rcancel()
		require.NoError(t, <-rerr)
		lcancel()
		require.NoError(t, <-lerr)
		require.False(t, d.Listening())
	})

	t.Run("listener straight to the server", func(t *testing.T) {
		d, err := postgres.New(ctx, pool, dialect.Options{Logger: logger})
		require.NoError(t, err)
		lctx, lcancel := context.WithCancel(ctx)
		lerr := make(chan error, 1)
		direct := b.direct.Config().ConnConfig.Copy()
		go func() {
			lerr <- d.Listen(lctx, postgres.ListenConfig{ConnConfig: direct})
		}()
		c, err := claim.New(d, cfg, bjobFields)
		require.NoError(t, err)
		var handled atomic.Int64
		rctx, rcancel := context.WithCancel(ctx)
		rerr := make(chan error, 1)
		go func() {
			rerr <- c.Run(rctx, claim.WorkerConfig[bjob]{
				Workers: 1, PollMin: time.Hour, PollMax: time.Hour,
				Handler: func(context.Context, claim.Row[bjob]) error { handled.Add(1); return nil },
			})
		}()
		waitUntil(t, "the listener", d.Listening)
		// Run's first claim found nothing (task 1 was drained above) and
		// its next poll is an hour away: only a notification wakes it.
		time.Sleep(200 * time.Millisecond)
		waitUntil(t, "the listener, on Run's channel too", d.Listening)
		require.Zero(t, handled.Load())
		spec, err := cfg.Resolve()
		require.NoError(t, err)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (task_id, payload) VALUES (1, 'late')", cfg.Table))
		require.NoError(t, err)
		require.NoError(t, postgres.Notify(ctx, tx, spec, 1))
		require.NoError(t, tx.Commit(ctx))
		waitUntil(t, "the notified row handled", func() bool { return handled.Load() == 1 })
		rcancel()
		require.NoError(t, <-rerr)
		lcancel()
		require.NoError(t, <-lerr)
	})
}

// TestPgBouncerDefaultExecMode shows why the pools above use
// simple_protocol: in pgx's default mode each connection prepares its
// statements under names derived from their text (stmtcache_...), on
// whatever server connection PgBouncer lends it for that transaction, and
// the next client connection lent the same server connection finds the
// name taken. With simple_protocol nothing is prepared. The dialect adds
// the remedy to such an error.
func TestPgBouncerDefaultExecMode(t *testing.T) {
	b := pgBouncer(t)
	ctx := context.Background()
	query := fmt.Sprintf("SELECT $1::bigint + %d", time.Now().UnixNano()) // a name no server connection has yet
	run := func(dsn string) error {
		c, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer c.Close(ctx)
		var v int64
		return c.QueryRow(ctx, query, 1).Scan(&v)
	}
	var dup error
	for range 10 {
		if err := run(b.dsn); err != nil {
			dup = err
			break
		}
	}
	require.Error(t, dup, "ten connections in pgx's default mode through PgBouncer never met a server connection with their statement prepared")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, dup, &pgErr)
	require.Equal(t, "42P05", pgErr.Code, "duplicate_prepared_statement: %v", dup)
	require.Contains(t, pgErr.Message, "stmtcache_")
	for range 10 {
		require.NoError(t, run(b.simpleDSN(t)))
	}

	// The dialect's own statements meet the same end, and its error says
	// what to do: the version query New runs is prepared by the first pool
	// on a server connection that the next pools are lent.
	var hinted error
	for range 10 {
		p, err := pgxpool.New(ctx, b.dsn)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		if _, err := postgres.New(ctx, p, dialect.Options{}); err != nil {
			hinted = err
			break
		}
	}
	require.Error(t, hinted, "ten dialects in pgx's default mode through PgBouncer never met a server connection with the version query prepared")
	require.ErrorAs(t, hinted, &pgErr)
	require.ErrorContains(t, hinted, "default_query_exec_mode=simple_protocol")
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Bytes returns a copy of what was written.
func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

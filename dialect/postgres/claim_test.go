package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// setupJobs creates the jobs table of jobSpec with its recommended indexes
// on a fresh schema and returns the pool, the dialect and the store.
func setupJobs(t *testing.T) (*pgxpool.Pool, *Dialect, store.ClaimStore) {
	t.Helper()
	ctx := ctxT(t)
	pool := dbtest.PostgresPool(t)
	d, err := New(ctx, pool, dialect.Options{})
	require.NoError(t, err)
	return pool, d, dialecttest.CreateClaimTable(t, d, jobSpec(t))
}

func claimIDs(t *testing.T, st store.ClaimStore, s dialect.Strategy, task, limit int) (string, []int64) {
	t.Helper()
	tok := store.NewToken()
	var ids []int64
	_, err := st.Claim(ctxT(t), &store.ClaimParams{Token: tok, Limit: limit, ScopeValues: []any{task}, Strategy: s},
		func(sc store.Scanner) error {
			var id, version int64
			var payload string
			if err := sc.Scan(&id, &version, new(any), &payload); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		})
	require.NoError(t, err)
	return tok, ids
}

// A claim never waits for a row lock, under either strategy, so it never
// holds a lock that another batch's heartbeat, ack or release would queue
// behind. The scenario is the one a waiting FOR UPDATE claim broke: batch B
// marks row 1 in a transaction that is still open, another session locks
// pending row 2, and a token-update claim starts. Waiting FOR UPDATE, the
// claim queued on row 1, locked it once B committed (keeping that lock
// after its re-check dropped the row) and queued again on row 2, while B's
// heartbeat waited for row 1 behind it.
func TestClaimsNeverWaitForLocks(t *testing.T) {
	t.Parallel()
	for _, s := range []dialect.Strategy{dialect.StrategyTokenUpdate, dialect.StrategySkipLocked} {
		t.Run(s.String(), func(t *testing.T) {
			t.Parallel()
			pool, _, st := setupJobs(t)
			ctx := ctxT(t)
			_, err := pool.Exec(ctx, `INSERT INTO jobs (task_id, payload) SELECT 1, 'p' || g FROM generate_series(1, 5) g`)
			require.NoError(t, err)
			tokB := store.NewToken()
			b, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer b.Rollback(ctx) //nolint:errcheck // no-op after commit
			_, err = b.Exec(ctx, `UPDATE jobs SET status = 'PROCESSING', token = $1, claimed_at = now() WHERE id = 1`, tokB)
			require.NoError(t, err)
			x, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer x.Rollback(ctx) //nolint:errcheck // rolled back at the end
			_, err = x.Exec(ctx, `SELECT id FROM jobs WHERE id = 2 FOR UPDATE`)
			require.NoError(t, err)

			type result struct {
				ids []int64
				err error
			}
			done := make(chan result, 1)
			go func() {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				var ids []int64
				_, err := st.Claim(cctx, &store.ClaimParams{Token: store.NewToken(), Limit: 2, ScopeValues: []any{1}, Strategy: s},
					func(sc store.Scanner) error {
						var id, version int64
						var payload string
						err := sc.Scan(&id, &version, new(any), &payload)
						ids = append(ids, id)
						return err
					})
				done <- result{ids, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(3 * time.Second):
				t.Fatal("the claim waits for a locked row")
			}
			require.NoError(t, r.err)
			require.Equal(t, []int64{3, 4}, r.ids, "locked rows are passed over")
			require.NoError(t, b.Commit(ctx))
			hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			held, err := st.Heartbeat(hctx, tokB)
			require.NoError(t, err, "B's heartbeat does not queue behind a claim")
			require.Len(t, held, 1)
			require.NoError(t, x.Rollback(ctx))
		})
	}
}

// Acks pass ids as a typed array; any Go integer type works and mixed
// lost/acked ids are reported by index.
func TestAckTypedIDs(t *testing.T) {
	t.Parallel()
	pool, _, st := setupJobs(t)
	ctx := ctxT(t)
	_, err := pool.Exec(ctx, `INSERT INTO jobs (task_id, payload) SELECT 1, 'p' || g FROM generate_series(1, 3) g`)
	require.NoError(t, err)
	tok, ids := claimIDs(t, st, dialect.StrategySkipLocked, 1, 3)
	require.Equal(t, []int64{1, 2, 3}, ids)
	res, err := st.Ack(ctx, &store.AckParams{Token: tok, IDs: []any{int32(2), uint8(9), 3}, Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Equal(t, []int{1}, res.Lost)
	var sent int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'SENT' AND token IS NULL`).Scan(&sent))
	require.Equal(t, 2, sent)
	held, err := st.Heartbeat(ctx, tok)
	require.NoError(t, err)
	require.Equal(t, []any{int64(1)}, held, "row 1 is still held")
}

// MissingIndexes looks in current_schema() for unqualified tables and in the
// named schema for qualified ones.
func TestMissingIndexesSchemaAware(t *testing.T) {
	t.Parallel()
	pool, d, st := setupJobs(t)
	ctx := ctxT(t)
	missing, err := st.MissingIndexes(ctx)
	require.NoError(t, err)
	require.Empty(t, missing)

	var schema string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	spec := jobSpec(t)
	spec.Table = schema + ".jobs"
	qualified, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	missing, err = qualified.MissingIndexes(ctx)
	require.NoError(t, err)
	require.Empty(t, missing)

	// The same table name in another schema, without indexes.
	other := schema + "_o"
	_, err = pool.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %s; CREATE TABLE %s.jobs (LIKE %s.jobs)`, other, other, schema))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA `+other+` CASCADE`) })
	spec.Table = other + ".jobs"
	elsewhere, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	missing, err = elsewhere.MissingIndexes(ctx)
	require.NoError(t, err)
	require.Equal(t, elsewhere.IndexDDL(), missing)
	require.NoError(t, store.ExecDDL(ctx, d, missing))
	missing, err = elsewhere.MissingIndexes(ctx)
	require.NoError(t, err)
	require.Empty(t, missing)
}

// Stats ages come from the database clock.
func TestStatsAges(t *testing.T) {
	t.Parallel()
	pool, _, st := setupJobs(t)
	ctx := ctxT(t)
	_, err := pool.Exec(ctx, `INSERT INTO jobs (task_id, payload, created_at) VALUES (1, 'a', now() - interval '90 seconds'), (1, 'b', now()), (2, 'c', now())`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE jobs SET status = 'PROCESSING', token = 'x', claimed_at = now() - interval '30 seconds' WHERE payload = 'c'`)
	require.NoError(t, err)
	s, err := st.Stats(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, s.Pending)
	require.EqualValues(t, 1, s.Processing)
	require.InDelta(t, 90, s.OldestPending.Seconds(), 5)
	require.InDelta(t, 30, s.OldestProcessing.Seconds(), 5)
	s, err = st.Stats(ctx, []any{1})
	require.NoError(t, err)
	require.EqualValues(t, 2, s.Pending)
	require.Zero(t, s.Processing)
	require.Zero(t, s.OldestProcessing)
}

// A lock_not_available error (55P03, here from the session's lock_timeout)
// is retried inside an operation until the lock holder finishes: a heartbeat
// on a row another session has locked.
func TestRetriesLockTimeout(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, err := pgxpool.New(ctx, dbtest.PostgresDSN(t)+"&lock_timeout=50")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d, err := New(ctx, pool, dialect.Options{Retry: dialect.RetryPolicy{MaxAttempts: 100, BaseDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond}})
	require.NoError(t, err)
	spec := jobSpec(t)
	ddl, err := store.CreateTableDDL(d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d, ddl))
	st, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO jobs (task_id, payload) VALUES (1, 'a')`)
	require.NoError(t, err)
	tok, ids := claimIDs(t, st, dialect.StrategySkipLocked, 1, 1)
	require.Equal(t, []int64{1}, ids)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // rolled back below
	_, err = tx.Exec(ctx, `SELECT id FROM jobs WHERE id = 1 FOR UPDATE`)
	require.NoError(t, err)
	type result struct {
		held []any
		err  error
	}
	done := make(chan result, 1)
	go func() {
		held, err := st.Heartbeat(ctx, tok)
		done <- result{held, err}
	}()
	// Hold the lock until the heartbeat has hit lock_timeout and retried at
	// least once (waiting on the retry counter, not on a fixed sleep that a
	// loaded machine can outrun).
	retried := assert.Eventually(t, func() bool { return store.Retries(d) > 0 }, 20*time.Second, 5*time.Millisecond,
		"the heartbeat never retried a lock timeout")
	select {
	case r := <-done:
		t.Errorf("heartbeat finished while the row was locked: %+v", r)
	default:
	}
	require.NoError(t, tx.Rollback(ctx))
	require.True(t, retried)
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Len(t, r.held, 1)
	case <-time.After(10 * time.Second):
		t.Fatal("heartbeat did not finish")
	}
}

// On a pgxpool the transactional ack takes a pgx.Tx: the ack commits and
// rolls back with the caller's writes in it.
func TestAckTxTakesPgxTx(t *testing.T) {
	t.Parallel()
	pool, _, st := setupJobs(t)
	ctx := ctxT(t)
	_, err := pool.Exec(ctx, `INSERT INTO jobs (task_id, payload) SELECT 1, 'p' || g FROM generate_series(1, 2) g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE effects (src bigint PRIMARY KEY)`)
	require.NoError(t, err)
	tok, ids := claimIDs(t, st, dialect.StrategySkipLocked, 1, 2)
	for i, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, ids[i])
		require.NoError(t, err)
		res, err := st.AckTx(ctx, PgxTx(tx), &store.AckParams{Token: tok, IDs: []any{ids[i]}, Outcome: store.OutcomeDone})
		require.NoError(t, err)
		require.Empty(t, res.Lost)
		if commit {
			require.NoError(t, tx.Commit(ctx))
		} else {
			require.NoError(t, tx.Rollback(ctx))
		}
	}
	var effects, sent int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM effects`).Scan(&effects))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'SENT'`).Scan(&sent))
	require.Equal(t, [2]int{1, 1}, [2]int{effects, sent}, "one committed effect and ack, one rolled back")
	var status string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM jobs WHERE id = $1`, ids[0]).Scan(&status))
	require.Equal(t, "PROCESSING", status, "the rolled-back ack left its row held")
}

package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestEnumStatusColumn: a status column of an enum type is checked against
// the type's labels at verification. Before, a status that is not a label
// passed, a claim took the rows and every ack of them failed ("invalid
// input value for enum"), leaving them processing; an integer status
// failed every statement. With the labels, a claim, a sweep and an ack
// work on the column.
func TestEnumStatusColumn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := dbtest.PostgresPool(t)
	d, err := New(ctx, pool, dialect.Options{})
	require.NoError(t, err)
	for _, q := range []string{
		`CREATE TYPE "cl status" AS ENUM ('PENDING', 'PROCESSING', 'SENT', 'FAILED', 'it''s')`,
		`CREATE TABLE jobs (id BIGSERIAL PRIMARY KEY, task_id INT NOT NULL, status "cl status" NOT NULL DEFAULT 'PENDING',
			token VARCHAR(40), claimed_at TIMESTAMPTZ, attempts SMALLINT NOT NULL DEFAULT 0)`,
		`INSERT INTO jobs (task_id) VALUES (1), (1)`,
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	spec := dialect.ClaimTable{Table: "jobs", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Attempts: "attempts", Scope: []string{"task_id"},
		Pending: status(t, "PENDING"), Processing: status(t, "PROCESSING"), Done: status(t, "DONE"), Failed: status(t, "FAILED")}
	verify := func(s dialect.ClaimTable) error {
		st, err := store.OpenClaims(d, s)
		require.NoError(t, err)
		return st.VerifySchema(ctx)
	}
	err = verify(spec)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, `Done: status "DONE" is not a member of column jobs.status (enum('PENDING','PROCESSING','SENT','FAILED','it''s'))`)
	ints := spec
	ints.Pending, ints.Processing, ints.Done, ints.Failed = status(t, 0), status(t, 1), status(t, 2), status(t, 3)
	err = verify(ints)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "Pending: status 0 (int64) for column jobs.status (enum(")

	spec.Done = status(t, "SENT")
	cs, err := store.OpenClaims(d, spec)
	require.NoError(t, err)
	require.NoError(t, cs.VerifySchema(ctx))
	tok := store.NewToken()
	var ids []any
	n, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 10, ScopeValues: []any{1}, Strategy: dialect.StrategySkipLocked},
		func(sc store.Scanner) error {
			var id, attempts int64
			err := sc.Scan(&id, &attempts)
			ids = append(ids, id)
			return err
		})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = cs.Reap(ctx, &store.ReapParams{Timeout: time.Hour, Limit: 10, MaxAttempts: 1 << 20})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "the SMALLINT attempts column never reaches 1<<20")
	require.ErrorContains(t, err, "MaxAttempts: 1048576 is outside the range of column jobs.attempts (smallint), -32768 to 32767")
	res, err := cs.Reap(ctx, &store.ReapParams{Timeout: time.Hour, Limit: 10})
	require.NoError(t, err)
	require.Zero(t, res.Returned)
	ack, err := cs.Ack(ctx, &store.AckParams{Token: tok, IDs: ids, Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Empty(t, ack.Lost)
	var sent int
	require.NoError(t, pool.QueryRow(ctx, `SELECT COUNT(*) FROM jobs WHERE status = 'SENT'`).Scan(&sent))
	require.Equal(t, 2, sent)
}

package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/internal/dbtest"
)

// The cron story's target table on SQLite, with send_at declared DATETIME
// and holding text dates that the application's own code reads. claimlock
// follows that convention with TextTimes: claims, heartbeats and the reaper
// write and compare SQLite's text dates, so existing queries on send_at keep
// working; without TextTimes the table is refused rather than filled with
// integers.
func TestTextTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE xxx_task_target (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id INTEGER NOT NULL,
		openid TEXT NOT NULL, status INTEGER NOT NULL DEFAULT 0, cron_token VARCHAR(40), send_at DATETIME)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO xxx_task_target (task_id, openid, status, send_at) VALUES
		(1, 'a', 2, '2026-01-01 10:00:00'), (1, 'b', 0, NULL), (1, 'c', 0, NULL)`)
	require.NoError(t, err)
	spec := dialect.ClaimTable{Table: "xxx_task_target", ID: "id", Status: "status", Token: "cron_token", ClaimedAt: "send_at",
		Columns: []string{"openid"}, Scope: []string{"task_id"},
		Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2), Failed: dialect.StatusInt(3)}
	plain, err := d.ClaimStore(spec)
	require.NoError(t, err)
	err = plain.VerifySchema(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorContains(t, err, "TextTimes")

	spec.TextTimes = true
	st, err := d.ClaimStore(spec)
	require.NoError(t, err)
	require.NoError(t, st.VerifySchema(ctx))
	tok := dialect.NewToken()
	n, err := st.Claim(ctx, &dialect.ClaimParams{Token: tok, Limit: 10, ScopeValues: []any{1}, Strategy: dialect.StrategyTokenUpdate},
		func(sc dialect.Scanner) error { var id int64; var o string; return sc.Scan(&id, &o) })
	require.NoError(t, err)
	require.Equal(t, 2, n)
	var typ, first string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT typeof(send_at), send_at || '' FROM xxx_task_target WHERE status = 1 ORDER BY id LIMIT 1`).Scan(&typ, &first))
	require.Equal(t, "text", typ)
	written, err := time.Parse("2006-01-02 15:04:05.000", first)
	require.NoError(t, err, "SQLite's own text date format: %q", first)
	require.WithinDuration(t, time.Now().UTC(), written, time.Minute)
	var recent int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM xxx_task_target WHERE send_at > datetime('now', '-1 minute')`).Scan(&recent))
	require.Equal(t, 2, recent, "the application's own date queries read them")

	time.Sleep(5 * time.Millisecond)
	held, err := st.Heartbeat(ctx, tok)
	require.NoError(t, err)
	require.EqualValues(t, 2, held)
	var moved string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT send_at || '' FROM xxx_task_target WHERE status = 1 ORDER BY id LIMIT 1`).Scan(&moved))
	require.Greater(t, moved, first, "a heartbeat moves the time forward")

	time.Sleep(20 * time.Millisecond) // text dates hold milliseconds
	stats, err := st.Stats(ctx, []any{1})
	require.NoError(t, err)
	require.Greater(t, stats.OldestProcessing, time.Duration(0))
	require.Less(t, stats.OldestProcessing, time.Minute)

	reap := &dialect.ReapParams{Timeout: 400 * time.Millisecond, Limit: 10}
	res, err := st.Reap(ctx, reap)
	require.NoError(t, err)
	require.Zero(t, res.Returned, "fresh claims are not stale")
	time.Sleep(500 * time.Millisecond)
	res, err = st.Reap(ctx, reap)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Returned, "stale after the timeout")
}

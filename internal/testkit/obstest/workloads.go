package obstest

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/schedule"
)

// SQLite opens a fresh SQLite database in t's temporary directory, closed
// when the test ends.
func SQLite(t testing.TB) (dialect.Dialect, *sql.DB) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "app.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := sqlite.New(context.Background(), db, dialect.Options{})
	require.NoError(t, err)
	return d, db
}

// ScheduleRuns runs s, with two jobs every 200 ms added to it ("ok",
// which succeeds, and "bad", which fails), until ok ran twice and bad
// once, and returns how often each ran.
func ScheduleRuns(t testing.TB, s *schedule.Scheduler) (ok, bad int32) {
	t.Helper()
	var okN, badN atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := func() {
		if okN.Load() >= 2 && badN.Load() >= 1 {
			cancel()
		}
	}
	require.NoError(t, s.Add(schedule.Job{Name: "ok", Schedule: schedule.Every(200 * time.Millisecond), Func: func(context.Context, *schedule.Run) error {
		okN.Add(1)
		done()
		return nil
	}}))
	require.NoError(t, s.Add(schedule.Job{Name: "bad", Schedule: schedule.Every(200 * time.Millisecond), Func: func(context.Context, *schedule.Run) error {
		badN.Add(1)
		done()
		return errors.New("boom")
	}}))
	require.NoError(t, s.Run(ctx))
	require.GreaterOrEqual(t, okN.Load(), int32(2), "the job ran before the deadline")
	return okN.Load(), badN.Load()
}

// CoalesceWorkload makes a coalescer observed by obs on a fresh SQLite
// database, accepts four changes of two keys, a resent one and a stale
// one, and flushes them (two folds of 3 and 1 changes).
func CoalesceWorkload(t testing.TB, obs observe.Observer) {
	t.Helper()
	ctx := context.Background()
	d, db := SQLite(t)
	require.NoError(t, coalesce.CreateTables(ctx, d, db, coalesce.Config{}))
	co, err := coalesce.New(d, db, coalesce.Config{Observer: obs})
	require.NoError(t, err)
	accept := func(key, id string, seq int64) error {
		_, err := co.Accept(ctx, coalesce.Change{Key: key, EventID: id, Source: "s", Seq: seq, Payload: []byte("1")})
		return err
	}
	for i, id := range []string{"a1", "a2", "a3"} {
		require.NoError(t, accept("a", id, int64(i+1)))
	}
	require.NoError(t, accept("b", "b1", 1))
	require.NoError(t, accept("a", "a2", 2), "a resend is a duplicate")
	require.ErrorIs(t, accept("a", "a-old", 1), coalesce.ErrStale)
	f, err := co.Flusher(coalesce.FlusherConfig{Fold: func(context.Context, *sql.Tx, string, []coalesce.Record) error { return nil }})
	require.NoError(t, err)
	n, err := f.Flush(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

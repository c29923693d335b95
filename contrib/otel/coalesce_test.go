package claimotel_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
)

// A coalescer observed by the Observer: accepts counted by result (no
// span), a span per fold, and the folds with the changes they folded.
func TestCoalesceEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "app.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	require.NoError(t, coalesce.CreateTables(ctx, d, db, coalesce.Config{}))

	b := setup(t)
	co, err := coalesce.New(d, db, coalesce.Config{Observer: b.obs})
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

	sums, _ := b.sums(t)
	require.EqualValues(t, 6, sums["claimlock.coalesce.accepts"], "%v", sums)
	require.EqualValues(t, 2, sums["claimlock.coalesce.folds"], "%v", sums)
	require.EqualValues(t, 4, sums["claimlock.coalesce.changes_folded"], "%v", sums)
	folds := map[string]int64{}
	for _, sp := range b.spans.GetSpans().Snapshots() {
		if sp.Name() != "claimlock.coalesce.fold" {
			continue
		}
		key, _ := attr(sp, "claimlock.coalesce.key")
		changes, _ := attr(sp, "claimlock.coalesce.changes")
		folds[key.AsString()] = changes.AsInt64()
	}
	require.Equal(t, map[string]int64{"a": 3, "b": 1}, folds, "a span per fold, none per accept")
}

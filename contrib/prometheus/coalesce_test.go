package claimprom_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	claimprom "github.com/claimlock/claimlock/contrib/prometheus"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
)

// A coalescer observed by Metrics: accepts by result, and the folds with
// the changes they folded (their ratio is the coalescing ratio).
func TestCoalesceEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "app.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	require.NoError(t, coalesce.CreateTables(ctx, d, db, coalesce.Config{}))

	m := claimprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	co, err := coalesce.New(d, db, coalesce.Config{Observer: m})
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

	got := series(t, reg)
	ch := "claimlock_coalesce_accepts_total{changes_table=" + coalesce.DefaultChangesTable + ",result="
	require.EqualValues(t, 4, got[ch+"recorded}"], "%v", got)
	require.EqualValues(t, 1, got[ch+"duplicate}"], "%v", got)
	require.EqualValues(t, 1, got[ch+"stale}"], "%v", got)
	keys := "{keys_table=" + coalesce.DefaultKeysTable + "}"
	require.EqualValues(t, 2, got["claimlock_coalesce_folds_total"+keys], "one state write per key: %v", got)
	require.EqualValues(t, 4, got["claimlock_coalesce_changes_folded_total"+keys], "%v", got)
}

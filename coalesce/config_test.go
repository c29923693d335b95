package coalesce_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestConfigErrors: a bad configuration, flusher configuration or change
// is refused with an error wrapping dialect.ErrInvalidConfig that names the
// field, before anything is written.
func TestConfigErrors(t *testing.T) {
	c := testengine.Open(t, testengine.All[0], 4) // SQLite: the checks are the engine's business nowhere
	setup(t, c)
	ctx := context.Background()
	for _, tc := range []struct {
		cfg   coalesce.Config
		field string
	}{
		{coalesce.Config{ChangesTable: "changes; DROP TABLE x"}, "ChangesTable"},
		{coalesce.Config{KeysTable: `k"eys`}, "KeysTable"},
		{coalesce.Config{SourcesTable: "a.b.c"}, "SourcesTable"},
		{coalesce.Config{ChangesTable: "1abc"}, "ChangesTable"},
		{coalesce.Config{ChangesTable: strings.Repeat("a", 64)}, "ChangesTable"},
		{coalesce.Config{ChangesTable: "same", KeysTable: "same"}, "KeysTable"},
		{coalesce.Config{MaxBacklog: -1}, "MaxBacklog"},
		{coalesce.Config{MaxAge: -1}, "MaxAge"},
		{coalesce.Config{PressureInterval: -1}, "PressureInterval"},
		{coalesce.Config{RetryAfter: -1}, "RetryAfter"},
	} {
		_, err := coalesce.New(c.Dialect, c.DB, tc.cfg)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, tc.field)
		require.ErrorContains(t, err, tc.field)
		_, err = coalesce.CreateTablesDDL(c.Dialect, tc.cfg)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, tc.field)
	}
	_, err := coalesce.New(nil, c.DB, coalesce.Config{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = coalesce.New(c.Dialect, nil, coalesce.Config{})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	require.ErrorIs(t, coalesce.CreateTables(ctx, c.Dialect, nil, coalesce.Config{}), dialect.ErrInvalidConfig)

	co := newCoalescer(t, c, coalesce.Config{})
	fold := sumFold(c.Dollar)
	for _, tc := range []struct {
		fc    coalesce.FlusherConfig
		field string
	}{
		{coalesce.FlusherConfig{}, "Fold"},
		{coalesce.FlusherConfig{Fold: fold, BatchSize: -1}, "BatchSize"},
		{coalesce.FlusherConfig{Fold: fold, Linger: -1}, "Linger"},
		{coalesce.FlusherConfig{Fold: fold, KeysPerTx: -1}, "KeysPerTx"},
		{coalesce.FlusherConfig{Fold: fold, PollMin: 2, PollMax: 1}, "PollMax"},
		{coalesce.FlusherConfig{Fold: fold, MaxAttempts: -1}, "MaxAttempts"},
	} {
		_, err := co.Flusher(tc.fc)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, tc.field)
		require.ErrorContains(t, err, tc.field)
	}

	for _, tc := range []struct {
		ch    coalesce.Change
		field string
	}{
		{coalesce.Change{EventID: "e"}, "Change.Key"},
		{coalesce.Change{Key: strings.Repeat("k", coalesce.MaxKeyLen+1), EventID: "e"}, "Change.Key"},
		{coalesce.Change{Key: "k"}, "Change.EventID"},
		{coalesce.Change{Key: "k", EventID: strings.Repeat("e", coalesce.MaxEventIDLen+1)}, "Change.EventID"},
		{coalesce.Change{Key: "k", EventID: "e", Source: strings.Repeat("s", coalesce.MaxSourceLen+1)}, "Change.Source"},
	} {
		_, err := co.Accept(ctx, tc.ch)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, tc.field)
		require.ErrorContains(t, err, tc.field)
	}
	require.Zero(t, count(t, c, "SELECT COUNT(*) FROM coalesce_changes"))
}

// TestCreateTablesDDL: the statements name the configured tables, quoted,
// on every engine, and create tables that work (schema-qualified on
// PostgreSQL and MySQL, whose test databases have a schema of their own).
func TestCreateTablesDDL(t *testing.T) {
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			c := testengine.Open(t, e, 4)
			cfg := coalesce.Config{ChangesTable: "my_changes", KeysTable: "my_keys", SourcesTable: "my_sources"}
			ddl, err := coalesce.CreateTablesDDL(c.Dialect, cfg)
			require.NoError(t, err)
			q := `"`
			if e.Name == testengine.MySQL {
				q = "`"
			}
			all := strings.Join(ddl, "\n")
			for _, name := range []string{"my_changes", "my_keys", "my_sources"} {
				require.Contains(t, all, "CREATE TABLE IF NOT EXISTS "+q+name+q)
			}
			require.NoError(t, coalesce.CreateTables(context.Background(), c.Dialect, c.DB, cfg))
			co := newCoalescer(t, c, cfg)
			_, err = co.Accept(context.Background(), coalesce.Change{Key: "k", EventID: "e", Source: "s", Seq: 1})
			require.NoError(t, err)
			require.Equal(t, int64(1), count(t, c, "SELECT COUNT(*) FROM my_changes"))
			require.Equal(t, int64(1), count(t, c, "SELECT COUNT(*) FROM my_keys WHERE status = 'PENDING'"))
			require.Equal(t, int64(1), count(t, c, "SELECT last_seq FROM my_sources"))
		})
	}
}

// TestConcurrentDuplicates: eight goroutines send the same changes at the
// same time, with and without a source: each event id is recorded once,
// every sender gets the same change id, and exactly one of them a receipt
// that is not a duplicate.
func TestConcurrentDuplicates(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c *testengine.Conn) {
		ctx := context.Background()
		co := newCoalescer(t, c, coalesce.Config{})
		const events = 15
		type got struct {
			id    int64
			first bool
		}
		var mu sync.Mutex
		res := map[string][]got{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for i := range events {
					ch := coalesce.Change{Key: "dup", EventID: "d" + string(rune('a'+i)), Payload: []byte("1")}
					if i%2 == 0 {
						ch.Source, ch.Seq = "src", int64(i+1)
					}
					r, err := co.Accept(ctx, ch)
					if err != nil {
						// A later change of the source may win the race
						// against an earlier one: then the earlier one is
						// stale for every sender but the one that got in.
						if ch.Source != "" && errors.Is(err, coalesce.ErrStale) {
							continue
						}
						t.Error(err)
						return
					}
					mu.Lock()
					res[ch.EventID] = append(res[ch.EventID], got{r.ID, !r.Duplicate})
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		var recorded int64
		for ev, gs := range res {
			firsts := 0
			for _, g := range gs {
				require.Equal(t, gs[0].id, g.id, ev)
				if g.first {
					firsts++
				}
			}
			require.Equal(t, 1, firsts, "%s: %d first receipts", ev, firsts)
			recorded++
		}
		require.Equal(t, recorded, count(t, c, "SELECT COUNT(*) FROM coalesce_changes"))
		drain(t, ctx, c, newFlusher(t, c, co, coalesce.FlusherConfig{}))
		total, _, changes := stateOf(t, c, "dup")
		require.Equal(t, [2]int64{recorded, recorded}, [2]int64{total, changes})
	})
}

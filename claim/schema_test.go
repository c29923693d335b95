package claim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// A migration of a table that does not exist creates it with every
// recommended index; once applied, the table passes Verify and lacks
// nothing; a configuration that names a new column gets one ALTER TABLE for
// it, after which that configuration passes Verify too. On every engine.
func TestMigration(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := open(t, en)
			cfg := claim.Config{
				ClaimTable: dialect.ClaimTable{
					Table: tableName("migrated"), Scope: []string{"task_id"}, Attempts: "attempts",
					RunAt: "run_at", Error: "last_error", Columns: []string{"payload"},
				},
				ScopeValues: []any{42},
			}
			c, err := claim.New(e.d, cfg, jobFields)
			require.NoError(t, err)

			m, err := c.Migration(ctx, true)
			require.NoError(t, err)
			require.Len(t, m.Create, 1, "one CREATE TABLE")
			require.Contains(t, m.Create[0], "CREATE TABLE IF NOT EXISTS")
			require.Empty(t, m.Columns)
			require.Equal(t, c.IndexDDL(false), m.Indexes, "a new table gets every index, built plainly")
			all, err := claim.CreateTableDDL(e.d, cfg)
			require.NoError(t, err)
			require.Equal(t, append(m.Create, m.Indexes...), all, "the migration of a missing table is CreateTableDDL's")

			require.NoError(t, claim.CreateTable(ctx, e.d, cfg))
			require.NoError(t, claim.CreateTable(ctx, e.d, cfg), "again: the table and its indexes exist")
			require.NoError(t, c.Verify(ctx))
			m, err = c.Migration(ctx, true)
			require.NoError(t, err)
			require.Equal(t, claim.Migration{}, m, "nothing lacks")

			versioned := cfg
			versioned.Version = "version"
			cv, err := claim.New(e.d, versioned, jobFields)
			require.NoError(t, err)
			require.ErrorIs(t, cv.Verify(ctx), dialect.ErrInvalidConfig, "the table has no version column yet")
			m, err = cv.Migration(ctx, false)
			require.NoError(t, err)
			require.Nil(t, m.Create)
			require.Empty(t, m.Indexes)
			require.Len(t, m.Columns, 1, "%v", m.Columns)
			require.Contains(t, m.Columns[0], "ADD COLUMN")
			require.Contains(t, strings.ToLower(m.Columns[0]), "version")
			for _, q := range m.Columns {
				e.exec(t, q)
			}
			require.NoError(t, cv.Verify(ctx))
		})
	}
}

// CreateTableDDL validates its configuration as New does.
func TestCreateTableDDLInvalid(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	_, err := claim.CreateTableDDL(nil, claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs"}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = claim.CreateTableDDL(e.d, claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs; DROP"}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
	_, err = claim.CreateTableDDL(e.d, claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}}})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "scope values missing, as for New")
}

// Stats counts the claimer's scope, TableStats every scope.
func TestTableStats(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := open(t, en)
			c, _ := jobSetup(t, e, strategies(e)[0], 3, nil) // 3 rows of task 42, 3 of task 7
			b, err := c.Claim(ctx)
			require.NoError(t, err)
			require.Equal(t, 3, b.Len())
			require.NoError(t, b.Ack(ctx, b.IDs()[0]))
			// SQLite's stamps have millisecond precision: read in the
			// claim's own millisecond, the oldest claim's age is 0.
			time.Sleep(5 * time.Millisecond)

			st, err := c.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, [4]int64{0, 2, 1, 0}, [4]int64{st.Pending, st.Processing, st.Done, st.Failed}, "task 42")
			all, err := c.TableStats(ctx)
			require.NoError(t, err)
			require.Equal(t, [4]int64{3, 2, 1, 0}, [4]int64{all.Pending, all.Processing, all.Done, all.Failed}, "every task")
			require.Positive(t, all.OldestProcessing)
		})
	}
}

package chaos

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/ident"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// hostileNames are identifiers that must be refused at construction.
var hostileNames = []string{
	`it"ems`, "it`ems", "it'ems", "items; DROP TABLE chaos_items", "items -- x", "items/*x*/",
	"items\x00", "ite ms", " items", "itеms" /* Cyrillic e */, "ıtems" /* dotless i */, "ｉtems", /* fullwidth */
	strings.Repeat("a", ident.MaxLen+1), "a.b.c", "", "1items", "items.",
}

// TestHostileInput feeds hostile configuration and values to every
// constructor and operation, on every engine.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			dsn := e.dsn(t)
			d := openT(t, e.driver, dsn)
			setup(t, d, 3)
			t.Run("identifiers", func(t *testing.T) { hostileIdentifiers(t, d) })
			t.Run("scope-values", func(t *testing.T) { hostileScopeValues(t, d) })
			t.Run("status-types", func(t *testing.T) { hostileStatusTypes(t, d) })
			t.Run("short-token-column", func(t *testing.T) { shortTokenColumn(t, e, d, dsn) })
			t.Run("missing-indexes", func(t *testing.T) { missingIndexes(t, d) })
		})
	}
}

func hostileIdentifiers(t *testing.T, d *db) {
	good := func() claim.Config { return itemsConfig(5) }
	for _, name := range hostileNames {
		mods := map[string]func(*claim.Config){
			"Table":     func(c *claim.Config) { c.Table = name },
			"ID":        func(c *claim.Config) { c.ID = name },
			"Status":    func(c *claim.Config) { c.Status = name },
			"Token":     func(c *claim.Config) { c.Token = name },
			"ClaimedAt": func(c *claim.Config) { c.ClaimedAt = name },
			"Attempts":  func(c *claim.Config) { c.Attempts = name },
			"Columns":   func(c *claim.Config) { c.Columns = []string{name} },
			"Scope":     func(c *claim.Config) { c.Scope[0] = name },
		}
		for field, mod := range mods {
			if name == "" && field != "Table" && field != "Columns" && field != "Scope" {
				continue // an empty column name means the documented default
			}
			cfg := good()
			cfg.Scope = slices.Clone(cfg.Scope)
			mod(&cfg)
			var err error
			require.NotPanics(t, func() { _, err = claim.New(d.d, cfg, itemFields) }, "claim.New %s=%q", field, name)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, "claim.New %s=%q", field, name)
			require.NotPanics(t, func() { _, err = zombie.New(d.d, cfg, zombie.Config{Timeout: time.Second}) }, "zombie.New %s=%q", field, name)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, "zombie.New %s=%q", field, name)
		}
		leaseMods := map[string]func(*dialect.LeaseTable){
			"Table":     func(l *dialect.LeaseTable) { l.Table = name },
			"Key":       func(l *dialect.LeaseTable) { l.Key = name },
			"Owner":     func(l *dialect.LeaseTable) { l.Owner = name },
			"LockedAt":  func(l *dialect.LeaseTable) { l.LockedAt = name },
			"ExpiresAt": func(l *dialect.LeaseTable) { l.ExpiresAt = name },
			"Fence":     func(l *dialect.LeaseTable) { l.Fence = name },
		}
		for field, mod := range leaseMods {
			cfg := lockerConfig(time.Second)
			mod(&cfg.Table)
			if name == "" && (field == "ExpiresAt" || field == "Fence") {
				continue // optional columns: empty means "none"
			}
			var err error
			require.NotPanics(t, func() { _, err = tasklock.New(d.d, cfg) }, "tasklock.New %s=%q", field, name)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, "tasklock.New %s=%q", field, name)
		}
	}
	// The tables are intact.
	st, err := stats(context.Background(), d)
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Pending)
}

// hostileScopeValues claims, reaps and counts with scope values that are
// SQL: they must travel as plain values.
func hostileScopeValues(t *testing.T, d *db) {
	ctx := context.Background()
	spec := dialect.ClaimTable{Table: "chaos_text_scope", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
		Pending: mustStatus("PENDING"), Processing: mustStatus("PROCESSING"), Done: mustStatus("DONE"), Failed: mustStatus("FAILED")}
	def := store.ClaimTableDef(spec)
	def.Columns = append(def.Columns, store.ColumnDef{Name: "task_id", Type: store.TypeText, Len: 64, NotNull: true})
	ddl, err := store.CreateTableDDL(d.d, def)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d.d, ddl))
	evil := []string{"1; DROP TABLE chaos_text_scope; --", "' OR '1'='1", `" OR "1"="1`, "1) OR (1=1", "x'); DELETE FROM chaos_text_scope; --"}
	scopes := append([]string{"plain"}, evil...)
	for _, s := range scopes {
		for range 3 {
			_, err := d.sql.ExecContext(ctx, d.sqlf("INSERT INTO {chaos_text_scope} ({task_id}) VALUES ($1)"), s)
			require.NoError(t, err)
		}
	}
	count := func(where string, args ...any) int {
		var n int
		require.NoError(t, d.sql.QueryRowContext(ctx, d.sqlf("SELECT COUNT(*) FROM {chaos_text_scope} WHERE "+where), args...).Scan(&n))
		return n
	}
	for i, s := range evil {
		cfg := claim.Config{
			ClaimTable:  dialect.ClaimTable{Table: "chaos_text_scope", Scope: []string{"task_id"}},
			ScopeValues: []any{s}, RequireScope: true, BatchSize: 100,
		}
		c, err := claim.New[struct{}](d.d, cfg, nil)
		require.NoError(t, err)
		st, err := c.Stats(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 3, st.Pending, "stats of scope %q", s)
		b, err := c.Claim(ctx)
		require.NoError(t, err, "scope %q", s)
		require.Equal(t, 3, b.Len(), "scope %q claims exactly its own rows", s)
		for _, id := range b.IDs() {
			var got string
			require.NoError(t, d.sql.QueryRowContext(ctx, d.sqlf("SELECT {task_id} FROM {chaos_text_scope} WHERE {id} = $1"), id).Scan(&got))
			require.Equal(t, s, got)
		}
		r, err := zombie.New(d.d, cfg, zombie.Config{Timeout: time.Hour})
		require.NoError(t, err)
		_, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.NoError(t, b.AckAll(ctx))
		// The table survives and nothing outside the scope changed.
		require.Equal(t, 3*len(scopes), count("1 = 1"))
		require.Equal(t, 3*(i+1), count("{status} = 'DONE'"))
		require.Equal(t, 3*(len(scopes)-i-1), count("{status} = 'PENDING' AND {token} IS NULL"))
		require.Equal(t, 3, count("{task_id} = $1 AND {status} = 'DONE'", s))
	}
	require.Equal(t, 3, count("{task_id} = 'plain' AND {status} = 'PENDING'"))

	// Lease keys with SQL in them are plain values too.
	k, err := tasklock.New(d.d, lockerConfig(5*time.Second))
	require.NoError(t, err)
	for _, s := range evil {
		l, err := k.Acquire(ctx, s)
		require.NoError(t, err, "key %q", s)
		st, err := k.Inspect(ctx, s)
		require.NoError(t, err)
		require.Equal(t, l.Owner(), st.Owner)
		ok, err := l.Release(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	}
	var n int
	require.NoError(t, d.sql.QueryRowContext(ctx, d.sqlf("SELECT COUNT(*) FROM {chaos_leases}")).Scan(&n))
	require.Equal(t, len(evil), n, "one lease row per key, table intact")
}

func mustStatus(v any) dialect.Status {
	s, err := store.StatusOf("status", v)
	if err != nil {
		panic(err)
	}
	return s
}

// hostileStatusTypes configures status values that are not safe strings:
// [dialect.StatusString] refuses them without panicking, claim.New and
// zombie.New report the field, and none reaches SQL. Values that are neither
// strings nor integers cannot be a Status at all except through
// store.StatusOf, which refuses them the same way.
func hostileStatusTypes(t *testing.T, d *db) {
	bad := []string{"PEND'ING", "PENDING; --", "", strings.Repeat("P", 65), "NOT SENT", "P\x00", `P"`, "P`"}
	for _, v := range bad {
		var st dialect.Status
		require.NotPanics(t, func() { st = dialect.StatusString(v) }, "%q", v)
		require.False(t, st.IsSet(), "%q holds no value", v)
		for _, field := range []string{"Pending", "Processing", "Done", "Failed"} {
			cfg := itemsConfig(5)
			switch field {
			case "Pending":
				cfg.Pending = st
			case "Processing":
				cfg.Processing = st
			case "Done":
				cfg.Done = st
			case "Failed":
				cfg.Failed = st
			}
			var err error
			require.NotPanics(t, func() { _, err = claim.New(d.d, cfg, itemFields) }, "%s = %q", field, v)
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%s = %q", field, v)
			require.Contains(t, err.Error(), field)
			require.NotPanics(t, func() { _, err = zombie.New(d.d, cfg, zombie.Config{Timeout: time.Second}) })
			require.ErrorIs(t, err, dialect.ErrInvalidConfig, "zombie %s = %q", field, v)
		}
	}
	for _, v := range []any{1.5, float32(2), true, struct{ A int }{1}, []byte("PENDING"), uint64(1), map[string]int{}} {
		var err error
		require.NotPanics(t, func() { _, err = store.StatusOf("Pending", v) }, "%#v", v)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%#v (%T)", v, v)
	}
}

// shortTokenColumn claims from a table whose token column is VARCHAR(8),
// shorter than a token. The claim must fail clearly (or work with the whole
// token), and never leave a row processing under a truncated token that no
// ack can match.
func shortTokenColumn(t *testing.T, e engine, d *db, dsn string) {
	variants := []struct {
		name string
		d    *db
	}{{e.name, d}}
	if e.driver == "mysql" {
		// A server without strict mode truncates instead of refusing.
		variants = append(variants, struct {
			name string
			d    *db
		}{e.name + "-nonstrict", openT(t, e.driver, withParam(e.driver, dsn, "sql_mode", "''"))})
	}
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ctx := context.Background()
			table := fmt.Sprintf("chaos_short_token_%d", i)
			cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: table}, BatchSize: 10}
			spec, err := cfg.Resolve()
			require.NoError(t, err)
			def := store.ClaimTableDef(spec)
			for j := range def.Columns {
				if def.Columns[j].Name == "token" {
					def.Columns[j].Len = 8
				}
			}
			ddl, err := store.CreateTableDDL(v.d.d, def)
			require.NoError(t, err)
			require.NoError(t, store.ExecDDL(ctx, v.d.d, ddl))
			for range 4 {
				_, err := v.d.sql.ExecContext(ctx, v.d.sqlf("INSERT INTO {"+table+"} ({status}) VALUES ('PENDING')"))
				require.NoError(t, err)
			}
			c, err := claim.New[struct{}](v.d.d, cfg, nil)
			require.NoError(t, err)
			b, claimErr := c.Claim(ctx)
			st, err := c.Stats(ctx)
			require.NoError(t, err)
			var stranded int
			require.NoError(t, v.d.sql.QueryRowContext(ctx, v.d.sqlf("SELECT COUNT(*) FROM {"+table+"} WHERE {status} = 'PROCESSING'")).Scan(&stranded))
			switch {
			case claimErr != nil:
				// The claimer verifies the table before its first claim:
				// the token column is refused before any row is touched.
				t.Logf("chaos: short token column on %s: the claim fails: %v; rows processing afterwards: %d", v.name, claimErr, stranded)
				require.ErrorIs(t, claimErr, dialect.ErrInvalidConfig)
				require.ErrorContains(t, claimErr, "Token")
				require.Zero(t, stranded, "a refused claim leaves no row processing")
				require.EqualValues(t, 4, st.Pending)
			case b.Len() > 0:
				// The engine stored the whole token (SQLite does not enforce
				// VARCHAR lengths): acks must match it.
				t.Logf("chaos: short token column on %s: the engine stores the whole token; claim and ack work", v.name)
				require.Equal(t, "sqlite", e.driver, "only SQLite ignores the declared length")
				require.NoError(t, b.AckAll(ctx))
				st, err = c.Stats(ctx)
				require.NoError(t, err)
				require.EqualValues(t, 4, st.Done)
			default:
				// An empty batch: rows may have been claimed under a
				// truncated token that no ack can match.
				t.Fatalf("claim on %s returned no row and no error with %d row(s) left processing: tokens were truncated", v.name, stranded)
			}
		})
	}
}

// logBuffer is an slog handler target safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// missingIndexes claims from a table without the recommended indexes: it
// works, and the claimer warns once.
func missingIndexes(t *testing.T, d *db) {
	ctx := context.Background()
	var logs logBuffer
	cfg := claim.Config{
		ClaimTable:  dialect.ClaimTable{Table: "chaos_no_index", Scope: []string{"task_id"}},
		ScopeValues: []any{7}, BatchSize: 2,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	spec, err := cfg.Resolve()
	require.NoError(t, err)
	ddl, err := store.CreateTableDDL(d.d, store.ClaimTableDef(spec))
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d.d, ddl))
	for range 6 {
		_, err := d.sql.ExecContext(ctx, d.sqlf("INSERT INTO {chaos_no_index} ({task_id}, {status}) VALUES (7, 'PENDING')"))
		require.NoError(t, err)
	}
	c, err := claim.New[struct{}](d.d, cfg, nil)
	require.NoError(t, err)
	missing, err := c.MissingIndexes(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, missing)
	claimed := 0
	for range 4 {
		b, err := c.Claim(ctx)
		require.NoError(t, err)
		claimed += b.Len()
		require.NoError(t, b.AckAll(ctx))
	}
	require.Equal(t, 6, claimed)
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "recommended indexes are missing"), "one warning: %s", out)
	require.Contains(t, out, "level=WARN")
	t.Logf("chaos: missing indexes warning: %s", strings.TrimSpace(out))
}

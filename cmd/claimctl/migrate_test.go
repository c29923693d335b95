package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
)

var update = flag.Bool("update", false, "rewrite examples/migrate's claimlock migrations from claimctl ddl")

const migrateDir = "../../examples/migrate"

// statements splits a migration file into its statements.
func statements(sql string) []string {
	var out []string
	for _, s := range strings.Split(sql, ";\n") {
		var lines []string
		for _, l := range strings.Split(s, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			out = append(out, strings.Join(lines, "\n"))
		}
	}
	return out
}

// withoutHeader drops the first line (it names the server version).
func withoutHeader(s string) string {
	_, rest, _ := strings.Cut(s, "\n")
	return rest
}

// The cron story's migration on every engine: claimctl ddl prints what the
// story's tables lack (the committed migration of examples/migrate is that
// output), the printed DDL applies cleanly, and the tables then pass
// VerifySchema with no recommended index missing; a second run prints
// nothing to do.
func TestMigrationDDL(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := testengine.Open(t, e, 4)
			dir := filepath.Join(migrateDir, "migrations", e.Name)
			before, err := os.ReadFile(filepath.Join(dir, "0001_cron_tables.sql"))
			require.NoError(t, err)
			for _, s := range statements(string(before)) {
				_, err := c.DB.ExecContext(ctx, s)
				require.NoError(t, err, s)
			}
			args := []string{"ddl", "-config", filepath.Join(migrateDir, "claimctl.json"), "-driver", e.Name, "-dsn", c.DSN}
			code, out, stderr := ctl(t, "", args...)
			require.Equal(t, exitOK, code, stderr)
			golden := filepath.Join(dir, "0002_claimlock.sql")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			require.Equal(t, withoutHeader(string(want)), withoutHeader(out), "the committed migration is what claimctl prints (go test -run TestMigrationDDL -update)")

			for _, s := range statements(out) {
				_, err := c.DB.ExecContext(ctx, s)
				require.NoError(t, err, s)
			}
			o, err := parseOptions("ddl", args[1:])
			require.NoError(t, err)
			spec, err := o.claimTable()
			require.NoError(t, err)
			cl, err := claim.New[struct{}](c.Dialect, claimConfig(spec, wholeTable(spec)), nil)
			require.NoError(t, err)
			require.NoError(t, cl.Verify(ctx))
			missing, err := cl.MissingIndexes(ctx)
			require.NoError(t, err)
			require.Empty(t, missing)
			lt, err := o.leaseTable()
			require.NoError(t, err)
			k, err := tasklock.New(c.Dialect, tasklock.Config{Table: lt, TTL: time.Minute})
			require.NoError(t, err)
			require.NoError(t, k.Verify(ctx))

			code, out, _ = ctl(t, "", args...)
			require.Equal(t, exitOK, code)
			require.Equal(t, 3, strings.Count(out, "-- (nothing to do)"), out)
		})
	}
}

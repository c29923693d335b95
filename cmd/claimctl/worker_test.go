package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// TestWorkerColumn: with a worker column (-worker), stuck and the status
// page name the worker behind each stuck row's token, as its claimer's
// Config.Worker wrote it, and drop the "worker unknown" note.
func TestWorkerColumn(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := testengine.Open(t, e, 4)
			cfg := claim.Config{
				ClaimTable:  dialect.ClaimTable{Table: "mail", Scope: []string{"task_id"}, Columns: []string{"addr"}, Worker: "claimed_by"},
				ScopeValues: []any{42}, BatchSize: 2, Worker: "mailer-3",
			}
			require.NoError(t, claim.CreateTable(ctx, c.Dialect, cfg))
			for i := range 3 {
				_, err := c.DB.ExecContext(ctx, fmt.Sprintf("INSERT INTO mail (task_id, addr) VALUES (42, 'a%d')", i))
				require.NoError(t, err)
			}
			cl, err := claim.New(c.Dialect, cfg, func(r *struct{ A string }) []any { return []any{&r.A} })
			require.NoError(t, err)
			b, err := cl.Claim(ctx) // two rows stuck: never acked
			require.NoError(t, err)
			require.Equal(t, 2, b.Len())

			driver := e.Name
			if driver == testengine.Postgres {
				driver = "postgres"
			}
			data, err := json.Marshal(map[string]any{"driver": driver, "dsn": c.DSN, "table": "mail", "scope-cols": []string{"task_id"}, "worker": "claimed_by"})
			require.NoError(t, err)
			conf := filepath.Join(t.TempDir(), "claimctl.json")
			require.NoError(t, os.WriteFile(conf, data, 0o600))

			code, out, errOut := ctl(t, "", "stuck", "-config", conf, "-scope", "42", "-older", "1ms", "-json")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			var stuck []rowOut
			require.NoError(t, json.Unmarshal([]byte(out), &stuck))
			require.Len(t, stuck, 2)
			for _, r := range stuck {
				require.Equal(t, b.Token(), r.Token)
				require.Equal(t, "mailer-3", r.Worker)
			}
			code, out, errOut = ctl(t, "", "stuck", "-config", conf, "-scope", "42", "-older", "1ms")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			rows := fields(out)
			require.Equal(t, []string{"ID", "TOKEN", "WORKER", "ATTEMPTS", "CLAIMED", "AGO"}, rows[0])
			require.Len(t, rows, 3, out)
			for _, r := range rows[1:] {
				require.Equal(t, []string{b.Token(), "mailer-3"}, r[1:3])
			}
			require.NotContains(t, out, noWorkerNote)

			// The status page: the worker in the page's JSON and HTML.
			o, err := parseOptions("serve", []string{"-config", conf, "-scope", "42", "-older", "1ms"})
			require.NoError(t, err)
			require.NoError(t, o.Serve.check())
			src, err := openSource(ctx, &env{o: o, d: c.Dialect})
			require.NoError(t, err)
			log := slog.New(slog.NewTextHandler(&syncBuffer{}, nil))
			m := newMonitor(src, time.Second, log)
			s, err := newServer(m, "", true, log)
			require.NoError(t, err)
			m.sampleAll(ctx)
			cli := &client{t: t, s: s}
			w := cli.do(req{method: "GET", path: "/api/page/0"})
			require.Equal(t, http.StatusOK, w.Code)
			var v pageView
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
			require.Len(t, v.Stuck, 2)
			for _, r := range v.Stuck {
				require.Equal(t, "mailer-3", r.Worker)
			}
			page := cli.visit(0)
			require.Contains(t, page, `<td class="mono">mailer-3</td>`)
			require.Contains(t, page, "with the worker of each claim")
			require.NoError(t, b.AckAll(ctx))
		})
	}
}

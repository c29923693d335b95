package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every field of the config file takes what its flag takes, in the
// flag's spelling (a string: "0,1,2,3" for a list, "300" for a TTL) and
// as JSON spells the value (an array, a number, a boolean), and gives the
// options the flag gives.
func TestConfigSpellings(t *testing.T) {
	t.Parallel()
	// For each field: its value as on the command line, then as JSON
	// spells it natively (nil: a string only).
	samples := map[string]struct {
		flag   string
		native []any
	}{
		"driver": {"mysql", nil}, "dsn": {"u:p@tcp(h:3306)/d", nil},
		"table": {"xxx_task_target", nil}, "id": {"target_id", nil}, "id-kind": {"text", nil},
		"status": {"state", nil}, "token": {"cron_token", nil}, "claimed-at": {"send_at", nil},
		"attempts": {"tries", nil}, "version": {"ver", nil}, "created-at": {"added_at", nil},
		"run-at": {"next_at", nil}, "error": {"last_error", nil}, "worker": {"claimed_by", nil},
		"text-times": {"true", []any{true}}, "clear-claimed-at": {"true", []any{true}},
		"int-statuses": {"true", []any{true}}, "scope-text": {"true", []any{true}},
		"claimed-at-format": {"unix-seconds", nil}, "created-at-format": {"unix-millis", nil},
		"run-at-format": {"unix-seconds", nil},
		"scope-cols":    {"task_id,shard", []any{[]any{"task_id", "shard"}}},
		"statuses":      {"0,1,2,3", []any{[]any{0, 1, 2, 3}, []any{"0", "1", "2", "3"}}},
		"lease-table":   {"xxx_task", nil}, "lease-kind": {"task-no-owner", nil}, "lease-key": {"task_id", nil},
		"lease-key-kind": {"int", nil}, "lease-key-len": {"64", []any{64}}, "lease-owner": {"-", nil},
		"lease-status": {"state", nil}, "lease-locked-at": {"locked", nil}, "lease-expires-at": {"-", nil},
		"lease-fence": {"-", nil}, "lease-locked-at-format": {"unix-seconds", nil},
		"lease-expires-at-format": {"unix-millis", nil},
		"lease-ttl":               {"300", []any{300, "5m", "300s"}},
		"lease-done":              {"2,3", []any{[]any{2, 3}, []any{"2", "3"}}},
		"coalesce":                {"true", []any{true}},
		"coalesce-changes":        {"ops.changes", nil}, "coalesce-keys": {"ops.keys", nil},
		"coalesce-sources": {"ops.sources", nil}, "pause-table": {"ops.pauses", nil},
	}
	names := make([]string, 0, len(fileField))
	for name := range fileField {
		names = append(names, name)
	}
	sort.Strings(names)
	write := func(t *testing.T, v any) string {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		p := filepath.Join(t.TempDir(), "c.json")
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			s, ok := samples[name]
			require.True(t, ok, "no sample for config field %q: add one", name)
			want, err := parseOptions("serve", []string{"-" + name + "=" + s.flag})
			require.NoError(t, err)
			for _, v := range append([]any{s.flag}, s.native...) {
				got, err := parseOptions("serve", []string{"-config", write(t, map[string]any{name: v})})
				require.NoError(t, err, "%s: %v", name, v)
				got.Config = ""
				require.Equal(t, want, got, "%s: %#v gives what -%s %s gives", name, v, name, s.flag)
			}
		})
	}

	// The command line overrides the file; a bad value names the field.
	o, err := parseOptions("leases", []string{"-config", write(t, map[string]any{"lease-ttl": 300, "lease-table": "a"}), "-lease-ttl", "2m"})
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, o.LeaseTTL)
	require.Equal(t, "a", o.LeaseTable)
	for _, tc := range []struct {
		conf map[string]any
		msg  string
	}{
		{map[string]any{"lease-ttl": "soon"}, `"lease-ttl": invalid value "soon"`},
		{map[string]any{"lease-ttl": 0}, "must be positive"},
		{map[string]any{"lease-key-len": "many"}, `"lease-key-len": invalid value "many"`},
		{map[string]any{"text-times": "maybe"}, `"text-times": invalid value "maybe"`},
		{map[string]any{"table": []any{"a", "b"}}, `"table": want a string, number or boolean`},
		{map[string]any{"statuses": []any{"0", []any{1}}}, `"statuses": element 1`},
		{map[string]any{"scope-cols": []any{"a,b"}}, `"scope-cols": element 0`},
		{map[string]any{"table": nil}, `"table": want a string`},
		{map[string]any{"statuses": map[string]any{"pending": 0}}, `"statuses": want a string, number or boolean, or an array of them`},
		{map[string]any{"nope": 1}, `unknown field "nope"`},
		{map[string]any{"json": true}, `unknown field "json"`},
	} {
		_, err := parseOptions("serve", []string{"-config", write(t, tc.conf)})
		require.ErrorContains(t, err, tc.msg)
		var ee *exitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, exitUsage, ee.code)
	}
}

// Package golden renders every statement of an engine, for each claim and
// lease table variant, into plain SQL files under the engine package's
// testdata/golden, and compares them with what the engine renders now, so
// that every change to the SQL shows in a diff as SQL. Run an engine's
// golden test with -update to rewrite its files after a deliberate change.
package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

var update = flag.Bool("update", false, "rewrite the golden SQL files under testdata/golden")

// Claim is one claim table variant.
type Claim struct {
	Name string
	Spec dialect.ClaimTable
}

// Lease is one lease table variant.
type Lease struct {
	Name string
	Spec dialect.LeaseTable
}

// Claims are the claim table variants every engine renders: the defaults;
// every optional column with a scope and a schema-qualified name; text
// keys with integer statuses and a cleared claim time; a worker column.
// textTimes adds the SQLite text-time variant.
func Claims(textTimes bool) []Claim {
	out := []Claim{
		{"claim_minimal", dialect.ClaimTable{Table: "jobs"}},
		{"claim_full", dialect.ClaimTable{
			Table: "app.jobs", Scope: []string{"task_id", "shard"}, Attempts: "attempts", Version: "version",
			RunAt: "run_at", Error: "last_error", CreatedAt: "created_at", Columns: []string{"payload", "openid"},
		}},
		{"claim_text_keys_int_status", dialect.ClaimTable{
			Table: "outbox", ID: "msg_id", IDKind: dialect.IDText, Status: "state", Token: "cron_token", ClaimedAt: "send_at",
			Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2), Failed: dialect.StatusInt(3),
			Attempts: "tries", ClearClaimedAt: true,
		}},
		{"claim_delete_done", dialect.ClaimTable{Table: "jobs", Attempts: "attempts", Version: "version", DeleteDone: true}},
		{"claim_archive", dialect.ClaimTable{Table: "app.jobs", Attempts: "attempts", DeleteDone: true, Archive: "app.jobs_done"}},
		// The cron story's target table with send_at INT (unix seconds),
		// run-at in unix milliseconds and created-at in seconds.
		{"claim_unix_times", dialect.ClaimTable{
			Table: "xxx_task_target", Scope: []string{"task_id"}, Status: "status", Token: "cron_token",
			ClaimedAt: "send_at", ClaimedAtFormat: dialect.UnixSeconds, RunAt: "run_at", RunAtFormat: dialect.UnixMillis,
			CreatedAt: "created_at", CreatedAtFormat: dialect.UnixSeconds, Attempts: "attempts", Columns: []string{"openid"},
			Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1), Done: dialect.StatusInt(2), Failed: dialect.StatusInt(3),
		}},
		// A worker column written by every claim and read by List.
		{"claim_worker", dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}, Attempts: "attempts", Error: "last_error", Worker: "claimed_by"}},
	}
	if textTimes {
		out = append(out, Claim{"claim_text_times", dialect.ClaimTable{
			Table: "jobs", Attempts: "attempts", RunAt: "run_at", CreatedAt: "created_at", TextTimes: true,
		}})
	}
	return out
}

// Leases are the lease table shapes every engine renders: the cron story's
// task table with and without an owner column (tasklock.TaskTable,
// TaskTableNoOwner), a task table with every optional column, and the
// library's key table (tasklock.KeyTable). textTimes adds the SQLite
// text-time variant.
func Leases(textTimes bool) []Lease {
	out := []Lease{
		{"lease_task", dialect.LeaseTable{Table: "xxx_task", Key: "id", Owner: "lock_owner", LockedAt: "lock_at"}},
		{"lease_task_no_owner", dialect.LeaseTable{Table: "xxx_task", Key: "id", LockedAt: "lock_at", Status: "status"}},
		{"lease_task_full", dialect.LeaseTable{
			Table: "xxx_task", Key: "id", Owner: "lock_owner", LockedAt: "lock_at", ExpiresAt: "lock_expires_at",
			Fence: "fence", Status: "status",
		}},
		{"lease_keyed", store.KeyedLeaseTable("claimlock_lease", 0)},
		// Task tables whose lock_at is INT unix seconds, without and with
		// an owner and an expiry in milliseconds.
		{"lease_task_unix_no_owner", dialect.LeaseTable{Table: "xxx_task", Key: "id", LockedAt: "lock_at", LockedAtFormat: dialect.UnixSeconds, Status: "status"}},
		{"lease_task_unix_full", dialect.LeaseTable{
			Table: "xxx_task", Key: "id", Owner: "lock_owner", LockedAt: "lock_at", LockedAtFormat: dialect.UnixSeconds,
			ExpiresAt: "lock_expires_at", ExpiresAtFormat: dialect.UnixMillis, Fence: "fence", Status: "status",
		}},
	}
	if textTimes {
		out = append(out, Lease{"lease_text_times", dialect.LeaseTable{
			Table: "xxx_task", Key: "id", Owner: "lock_owner", LockedAt: "lock_at", ExpiresAt: "lock_expires_at", TextTimes: true,
		}})
	}
	return out
}

// Check renders every variant's statements on d (a dialect built without
// a server, for a fixed server version) and compares each variant's file
// under testdata/golden with them; with -update it writes the files
// instead. Files of variants that no longer exist are reported.
func Check(t *testing.T, d dialect.Dialect, textTimes bool) {
	t.Helper()
	dir := filepath.Join("testdata", "golden")
	want := map[string]bool{}
	for _, c := range Claims(textTimes) {
		c.Spec = c.Spec.WithDefaults()
		cs, err := store.OpenClaims(d, c.Spec)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		ddl, err := store.CreateTableDDL(d, store.ClaimTableDef(c.Spec))
		if err != nil {
			t.Fatalf("%s: create table: %v", c.Name, err)
		}
		rendered := append(ddlOf(ddl), cs.(*store.Claims).Rendered()...)
		compare(t, dir, c.Name, rendered)
		want[c.Name+".sql"] = true
	}
	for _, l := range Leases(textTimes) {
		ls, err := store.OpenLeases(d, l.Spec)
		if err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		var rendered []store.Rendered
		if l.Spec.Keyed {
			ddl, err := store.CreateTableDDL(d, store.LeaseTableDef(l.Spec.Table, 0))
			if err != nil {
				t.Fatalf("%s: create table: %v", l.Name, err)
			}
			rendered = ddlOf(ddl)
		}
		rendered = append(rendered, ls.(*store.Leases).Rendered()...)
		compare(t, dir, l.Name, rendered)
		want[l.Name+".sql"] = true
	}
	// The schedule tables (package schedule), under a schema-qualified
	// name to show the quoting.
	tables := store.ScheduleTables{Jobs: "app.claimlock_jobs", Runs: "app.claimlock_runs"}
	sch, err := store.OpenSchedules(d, tables)
	if err != nil {
		t.Fatalf("schedule: %v", err)
	}
	var rendered []store.Rendered
	for _, def := range store.ScheduleTableDefs(tables) {
		ddl, err := store.CreateTableDDL(d, def)
		if err != nil {
			t.Fatalf("schedule: create table: %v", err)
		}
		for i, q := range ddl {
			rendered = append(rendered, store.Rendered{Name: fmt.Sprintf("create table %s %d", def.Table, i+1), SQL: q})
		}
	}
	compare(t, dir, "schedule", append(rendered, sch.Rendered()...))
	want["schedule.sql"] = true
	// The pause table (claim.Pauses).
	ps, err := store.OpenPauses(d, "app.claimlock_pauses")
	if err != nil {
		t.Fatalf("pause: %v", err)
	}
	ddl, err := store.CreateTableDDL(d, store.PauseTableDef("app.claimlock_pauses"))
	if err != nil {
		t.Fatalf("pause: create table: %v", err)
	}
	compare(t, dir, "pause", append(ddlOf(ddl), ps.Rendered()...))
	want["pause.sql"] = true
	files, _ := filepath.Glob(filepath.Join(dir, "*.sql"))
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("%s: no such variant any more; delete the file", f)
		}
	}
}

// ddlOf names the statements of a table's DDL.
func ddlOf(ddl []string) []store.Rendered {
	out := make([]store.Rendered, len(ddl))
	for i, q := range ddl {
		out[i] = store.Rendered{Name: fmt.Sprintf("create table %d", i+1), SQL: q}
	}
	return out
}

// compare checks (or, with -update, writes) one variant's file.
func compare(t *testing.T, dir, name string, rendered []store.Rendered) {
	t.Helper()
	seen := map[string]bool{}
	var b strings.Builder
	fmt.Fprintf(&b, "-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update\n")
	for _, r := range rendered {
		if seen[r.Name] {
			t.Errorf("%s: two statements named %q", name, r.Name)
		}
		seen[r.Name] = true
		fmt.Fprintf(&b, "\n-- %s\n", r.Name)
		if len(r.Args) > 0 {
			fmt.Fprintf(&b, "-- args: %s\n", strings.Join(r.Args, ", "))
		}
		fmt.Fprintf(&b, "%s;\n", Format(r.SQL))
	}
	path := filepath.Join(dir, name+".sql")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if string(old) != b.String() {
		t.Errorf("%s differs from the SQL the engine renders now (first difference at line %d); after a deliberate change run the test with -update and review the diff",
			path, firstDiff(string(old), b.String()))
	}
}

// firstDiff returns the 1-based line number of the first line that differs.
func firstDiff(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}

// clauses start a new line in a formatted statement.
var clauses = []string{" FROM ", " WHERE ", " SET ", " ORDER BY ", " GROUP BY ", " LIMIT ", " RETURNING ",
	" ON CONFLICT ", " ON DUPLICATE KEY ", " UNION ALL ", " VALUES ", " FOR UPDATE"}

// Format breaks a one-line statement before its main clauses, for
// reading; the text is otherwise unchanged.
func Format(q string) string {
	for _, c := range clauses {
		q = strings.ReplaceAll(q, c, "\n  "+strings.TrimPrefix(c, " "))
	}
	return q
}
